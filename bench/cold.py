"""The translator per event with its caches cold, as inside mitmdump (issue 31: where the per-event time goes).

Inside mitmdump the translator costs about twice what ``bench/run.py`` measures in a tight loop (13.5-16 µs
against 6 µs per ``anthropic<-chat`` event, docs/performance.md): between two events mitmproxy runs ~50 µs of
its own per-chunk work, which evicts the translator's code, objects and inline caches from the CPU caches. This
bench reproduces that without mitmdump: between two ``feed`` calls it walks ``--walk`` Python objects (dicts
and lists among 200,000 allocated once (tens of MB), each touched once, like mitmproxy's layers touch their own state), and times only
the ``feed`` calls. An optimisation that helps the tight loop but not the cold column will not show in
mitmdump; one that shrinks the cold column will.

    .venv/bin/python bench/cold.py [--events 3000] [--rounds 3] [--walk 5400] [DIRECTION ...]

A direction is ``client<-upstream`` in the short names (``anthropic<-chat``); default: the 12 cross ones.
Per-event times from ``perf_counter_ns`` around each call (median over rounds; a timed empty call costs ~0.1
µs warm, ~0.35 µs cold, in both columns).
"""

from __future__ import annotations

import argparse
import statistics
import time

import orjson
import streams
from inproc import make_translator

_SPREAD = 200_000  # objects allocated once; the walk touches every (SPREAD // walk)-th of them


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--walk", type=int, default=5400, help="objects walked between two events (0: warm only)")
    ap.add_argument("directions", nargs="*")
    a = ap.parse_args()
    by_short = {v: k for k, v in streams.SHORT.items()}
    pairs = [(c, u) for c in streams.PROTOCOLS for u in streams.PROTOCOLS if c != u]
    if a.directions:
        pairs = [(by_short[d.split("<-")[0]], by_short[d.split("<-")[1]]) for d in a.directions]
    objs = [{f"k{i}": [i, str(i)]} for i in range(_SPREAD)]
    step = max(1, _SPREAD // a.walk) if a.walk else 0
    picked = objs[::step] if step else []

    def walk() -> int:
        s = 0
        for o in picked:
            for v in o.values():
                s += v[0]
        return s

    events = {u: streams.generate(u, a.events) for _, u in pairs}
    clock = time.perf_counter_ns
    print(f"{'direction (client <- upstream)':36} {'warm µs/ev':>10} {'cold µs/ev':>10} {'cold/warm':>9}")
    for c, u in pairs:
        req = orjson.dumps(streams.small_request(c, "bench-model"))
        got = {}
        for cold in (False, True) if step else (False,):
            per = []
            for _ in range(a.rounds):
                tr = make_translator(c, u, req)
                total = 0
                for ev in events[u]:
                    if cold:
                        walk()
                    t0 = clock()
                    tr.feed(ev)
                    total += clock() - t0
                tr.close()
                per.append(total / len(events[u]) / 1000)
            got[cold] = statistics.median(per)
        warm, cold_us = got[False], got.get(True, float("nan"))
        name = f"{streams.SHORT[c]} <- {streams.SHORT[u]}"
        print(f"{name:36} {warm:10.2f} {cold_us:10.2f} {cold_us / warm:9.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
