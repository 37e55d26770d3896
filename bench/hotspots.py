"""Profile the in-process translator for one or more directions and print the hot spots (file:line).

    .venv/bin/python bench/hotspots.py anthropic<-chat            # cProfile, top 25 by own time
    .venv/bin/python bench/hotspots.py all --events 20000 --top 15
    .venv/bin/python bench/hotspots.py sse                         # the SSE decoder alone

Directions are ``client<-upstream`` with short names (anthropic, chat, responses). Only the feed/close
loop is profiled (translator construction and request translation are not).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import inproc  # noqa: E402
import orjson  # noqa: E402
import streams  # noqa: E402

LONG = {v: k for k, v in streams.SHORT.items()}


def parse_direction(s: str) -> tuple[str, str]:
    c, _, u = s.partition("<-")
    return LONG.get(c, c), LONG.get(u, u)


def profile_direction(client: str, upstream: str, n: int, top: int, sort: str) -> str:
    events = streams.generate(upstream, n)
    req = orjson.dumps(streams.small_request(client, "bench-model"))
    inproc._run_once(client, upstream, req, events, keep=False)  # warm-up (imports, adapters)
    tr = inproc.make_translator(client, upstream, req)
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    for ev in events:
        tr.feed(ev)
    tr.close()
    pr.disable()
    dt = time.perf_counter() - t0
    buf = io.StringIO()
    st = pstats.Stats(pr, stream=buf)
    st.sort_stats(sort).print_stats(top)
    head = f"== {streams.SHORT[client]}<-{streams.SHORT[upstream]}: {len(events)} events, {dt / len(events) * 1e6:.1f} µs/event under cProfile\n"
    return head + _trim(buf.getvalue())


def profile_sse(n: int, top: int, sort: str) -> str:
    from dragoman.sse.decoder import SSEDecoder

    out = []
    for p in streams.PROTOCOLS:
        events = streams.generate(p, n)
        pr = cProfile.Profile()
        dec = SSEDecoder()
        pr.enable()
        for ev in events:
            dec.feed(ev)
        dec.close()
        pr.disable()
        buf = io.StringIO()
        pstats.Stats(pr, stream=buf).sort_stats(sort).print_stats(top)
        out.append(f"== SSE decoder alone, {streams.SHORT[p]} events\n" + _trim(buf.getvalue()))
    return "\n".join(out)


def _trim(text: str) -> str:
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if ln.strip().startswith("ncalls"):
            return "\n".join(lines[i:])
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("directions", nargs="+", help="client<-upstream, 'all' (the six translated directions) or 'sse'")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="tottime", help="pstats sort key (tottime, cumulative)")
    a = ap.parse_args()
    todo: list[tuple[str, str]] = []
    for d in a.directions:
        if d == "sse":
            print(profile_sse(a.events, a.top, a.sort))
        elif d == "all":
            todo += [(c, u) for c in streams.PROTOCOLS for u in streams.PROTOCOLS if c != u]
        else:
            todo.append(parse_direction(d))
    for c, u in todo:
        print(profile_direction(c, u, a.events, a.top, a.sort))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
