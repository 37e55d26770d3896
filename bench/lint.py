"""The cost of ``dragoman_lint=log`` (issue 35 item 4) next to the translator's own per-event cost.

For each cross direction, the bench streams of ``streams.py`` (one SSE event per ``feed``, as mitmproxy's
stream callable receives them) are translated alone, then translated with a ``FlowLint`` checking the
upstream bytes (tolerant grammar) and our output (strict grammar), then with each side alone (the
``up`` and ``ours`` columns: what that side adds, µs/event). µs/event is this thread's CPU time per
upstream event (median of runs); the lint share = (with lint - alone) / alone. Goal: < 20 %.

    .venv/bin/python bench/lint.py [N_EVENTS] [RUNS]
"""

from __future__ import annotations

import statistics
import sys

import orjson
import streams
from inproc import CLOCK
from inproc import make_translator

from dragoman.lint.flow import FlowLint


def _once(client: str, upstream: str, req: bytes, events: list[bytes], lint: bool, side: str = "") -> float:
    tr = make_translator(client, upstream, req)
    fl = FlowLint("log", client, upstream) if lint else None
    if fl is not None and side == "up":
        fl.ours = None
    elif fl is not None and side == "ours":
        fl.theirs = None
    t0 = CLOCK()
    if fl is None:
        for ev in events:
            tr.feed(ev)
        tr.close()
    else:
        feed = fl.feed  # what the addon's stream callable calls per chunk in ``log`` mode
        for ev in events:
            feed(ev, tr.feed(ev))
        fl.feed_upstream(b"", final=True)
        fl.feed_ours(tr.close(), final=True)
        # both sides must be clean (a stream flagged early would stop its check and look cheap)
        assert fl.reports == [], fl.reports
    return (CLOCK() - t0) / len(events) * 1e6


def main(n_events: int = 2000, runs: int = 5) -> dict[str, dict[str, float]]:
    events = {p: streams.generate(p, n_events) for p in streams.PROTOCOLS}
    reqs = {c: orjson.dumps(streams.small_request(c, "bench-model")) for c in streams.PROTOCOLS}
    table: dict[str, dict[str, float]] = {}
    head = f"{'direction (client <- upstream)':36} {'alone µs/ev':>12} {'+lint µs/ev':>12} {'lint share':>10}"
    print(f"{head} {'up +µs':>7} {'ours +µs':>8}")
    for client in streams.PROTOCOLS:
        for upstream in streams.PROTOCOLS:
            if client == upstream:
                continue
            args = (client, upstream, reqs[client], events[upstream])
            alone = statistics.median(_once(*args, lint=False) for _ in range(runs + 1))
            linted = statistics.median(_once(*args, lint=True) for _ in range(runs + 1))
            up = statistics.median(_once(*args, lint=True, side="up") for _ in range(runs + 1)) - alone
            ours = statistics.median(_once(*args, lint=True, side="ours") for _ in range(runs + 1)) - alone
            share = (linted - alone) / alone
            table[f"{client}<-{upstream}"] = {"alone": alone, "lint": linted, "share": share, "up": up, "ours": ours}
            row = f"{client + ' <- ' + upstream:36} {alone:12.1f} {linted:12.1f} {share:10.0%}"
            print(f"{row} {up:7.1f} {ours:8.1f}")
    shares = [r["share"] for r in table.values()]
    print(f"lint share: median {statistics.median(shares):.0%}, max {max(shares):.0%} (goal < 20%)")
    return table


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
