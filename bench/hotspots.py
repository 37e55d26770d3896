"""Profile the in-process translator for one or more directions and print the hot spots (file:line).

    .venv/bin/python bench/hotspots.py anthropic<-chat            # cProfile, top 25 by own time
    .venv/bin/python bench/hotspots.py all --events 20000 --top 15
    .venv/bin/python bench/hotspots.py sse                         # the SSE decoder alone
    .venv/bin/python bench/hotspots.py --py-spy all                # sampling profiler (pip install py-spy):
                                                                     # own time per file:line, no cProfile distortion

Directions are ``client<-upstream`` with short names (anthropic, chat, responses). Only the feed/close
loop is profiled (translator construction and request translation are not).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
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


def loop_direction(client: str, upstream: str, n: int, seconds: float) -> None:
    """Translate the stream over and over for ``seconds`` (the py-spy target)."""
    events = streams.generate(upstream, n)
    req = orjson.dumps(streams.small_request(client, "bench-model"))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        inproc._run_once(client, upstream, req, events, keep=False)


def py_spy_direction(client: str, upstream: str, n: int, top: int, seconds: float) -> str:
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.path.exists(exe):
        return "py-spy not found: pip install py-spy"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "stacks.txt"
        cmd = [
            exe,
            "record",
            "--format",
            "raw",
            "-r",
            "997",
            "-o",
            str(raw),
            "--",
            sys.executable,
            __file__,
            "--loop",
            f"{streams.SHORT[client]}<-{streams.SHORT[upstream]}",
            "--events",
            str(n),
            "--seconds",
            str(seconds),
        ]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0 or not raw.exists():
            return f"py-spy failed ({p.returncode}): {p.stderr[-500:]}"
        own: collections.Counter[str] = collections.Counter()
        incl: collections.Counter[str] = collections.Counter()
        total = 0
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack:
                continue
            c = int(count)
            frames = stack.split(";")
            # only samples inside the translator loop (skip stream generation and start-up)
            if not any("feed" in f and "translate/stream.py" in f for f in frames):
                continue
            total += c
            own[_short_frame(frames[-1])] += c
            for f in set(_short_frame(x, line_no=False) for x in frames):
                incl[f] += c
    out = [
        f"== {streams.SHORT[client]}<-{streams.SHORT[upstream]} (py-spy, {total} samples in StreamTranslator.feed)",
        "  own time (leaf frame, file:line):",
    ]
    for f, c in own.most_common(top):
        out.append(f"    {100 * c / max(total, 1):5.1f}%  {f}")
    out.append("  inclusive time per function:")
    for f, c in incl.most_common(top):
        out.append(f"    {100 * c / max(total, 1):5.1f}%  {f}")
    return "\n".join(out)


def _short_frame(frame: str, line_no: bool = True) -> str:
    """``func (/abs/path/addon/dragoman/x.py:12)`` -> ``dragoman/x.py:12 func``."""
    func, _, loc = frame.partition(" (")
    loc = loc.rstrip(")")
    for marker in ("/addon/", "/site-packages/", "/lib/python"):
        if marker in loc:
            loc = loc.split(marker, 1)[1]
            break
    if not line_no:
        loc = loc.rsplit(":", 1)[0]
    return f"{loc} {func}"


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
    ap.add_argument("--py-spy", action="store_true", help="sample with py-spy instead of cProfile")
    ap.add_argument("--seconds", type=float, default=8.0, help="py-spy: seconds of sampling per direction")
    ap.add_argument("--loop", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.loop:
        c, u = parse_direction(a.directions[0])
        loop_direction(c, u, a.events, a.seconds)
        return 0
    todo: list[tuple[str, str]] = []
    for d in a.directions:
        if d == "sse":
            print(profile_sse(a.events, a.top, a.sort))
        elif d == "all":
            todo += [(c, u) for c in streams.PROTOCOLS for u in streams.PROTOCOLS if c != u]
        else:
            todo.append(parse_direction(d))
    for c, u in todo:
        if a.py_spy:
            print(py_spy_direction(c, u, a.events, a.top, a.seconds), flush=True)
        else:
            print(profile_direction(c, u, a.events, a.top, a.sort), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
