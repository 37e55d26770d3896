"""The cost of ``dragoman_lint=log`` (issue 35 item 4) next to the translator's own per-event cost.

For each cross direction, the bench streams of ``streams.py`` (one SSE event per ``feed``, as mitmproxy's
stream callable receives them) are translated alone, then translated with a ``FlowLint`` checking the
upstream bytes (tolerant grammar) and our output (strict grammar), then with each side alone (the
``up`` and ``ours`` columns: what that side adds, µs/event). µs/event is this thread's CPU time per
upstream event (median of runs); the lint share = (with lint - alone) / alone. Goal: < 20 %.

Then the same inside mitmdump (``--mitmdump``; what production pays): per upstream protocol a pass-through
mitmdump and two Dragoman mitmdumps (``dragoman_lint=off`` and ``log``), pinned to one core, each cross
direction's 20,000-event stream through each, the paths interleaved round by round; mitmdump CPU µs per
upstream event (``/proc``, median of rounds). The translator's per-event cost there is Dragoman's CPU over the
pass-through's (the translation and its stream callable); the lint share = (log - off) / (off - pass-through).
In mitmdump every step runs with caches cold (mitmproxy's own per-chunk work between two events): the
translator costs about twice its in-process time, while the lint checks its gathered batch in one warm run.

    .venv/bin/python bench/lint.py [N_EVENTS] [RUNS] [--mitmdump] [--only-mitmdump] [--rounds R]
"""

from __future__ import annotations

import statistics
import sys

import orjson
import streams
from inproc import CLOCK
from inproc import make_translator

from dragoman.lint.flow import BATCH
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
        # what the addon's plain stream callable does per chunk in ``log`` mode: two appends and a sum, both
        # sides checked once ``BATCH`` bytes are gathered
        feed, steps, gathered = tr.feed, fl.steps, 0
        for ev in events:
            out = feed(ev)
            steps.append(ev)
            steps.append(out)
            gathered += len(ev) + len(out)
            if gathered >= BATCH:
                gathered = 0
                fl.check_steps()
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


def in_mitmdump(n_events: int = 20_000, rounds: int = 5) -> dict[str, dict[str, float]]:
    """The lint's cost inside mitmdump, next to the translator's there (see the module's docstring)."""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    import procs

    import mitm

    procs.pin_self(1)
    workdir = Path(tempfile.mkdtemp(prefix="dragoman-lint-bench-"))
    loads = [os.getloadavg()[0]]
    started: list[procs.Proc] = []
    try:
        up = procs.start_upstream(1, [20, 200, n_events])
        started.append(up)
        mdump = str(Path(sys.executable).parent / "mitmdump")
        pt = procs.start_mitmdump("pass-through", mdump, up.port, mitm.PASSTHROUGH_SCRIPT, {}, 0, workdir)
        started.append(pt)
        routes = []
        for upstream in streams.PROTOCOLS:
            routes.append(mitm.Route(f"pass-through {upstream}", "passthrough", upstream, upstream, pt.port, pt))
            for mode in ("off", "log"):
                sets = {**mitm.dragoman_sets(upstream, up.port), "dragoman_lint": mode}
                name = f"{mode}-{streams.SHORT[upstream]}"
                p = procs.start_mitmdump(name, mdump, up.port, mitm.DRAGOMAN_SCRIPT, sets, 0, workdir)
                started.append(p)
                for client in streams.PROTOCOLS:
                    if client != upstream:
                        key = f"{mode} {mitm.direction_key(client, upstream)}"
                        routes.append(mitm.Route(key, "dragoman", client, upstream, p.port, p))
        for p in started[1:]:
            procs.wait_port(p.port, p)
        res = mitm.bench_streams(
            routes, n_events, rounds, 1, 0, 20, 200, log=lambda m: loads.append(os.getloadavg()[0])
        )
    finally:
        for p in started:
            p.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    rs = res["routes"]
    print(f"\ninside mitmdump: mitmdump CPU µs per upstream event, median of {rounds} streams of {n_events:,} events")
    print(
        f"{'direction (client <- upstream)':36} {'pass-thr.':>9} {'lint off':>9} {'lint log':>9} {'translator':>10} {'lint':>6} {'share':>6}"
    )
    table: dict[str, dict[str, float]] = {}
    for upstream in streams.PROTOCOLS:
        for client in streams.PROTOCOLS:
            if client == upstream:
                continue
            d = mitm.direction_key(client, upstream)
            got = [rs[k] for k in (f"pass-through {upstream}", f"off {d}", f"log {d}")]
            bad = [r["problem"] for r in got if r.get("problem")]
            if bad:
                print(f"{client + ' <- ' + upstream:36} problem: {bad[0]}")
                continue
            base, off, log = (r["cpu_us_per_event"]["median"] for r in got)
            share = (log - off) / (off - base)
            table[d] = {"pass_through": base, "off": off, "log": log, "share": share}
            row = f"{client + ' <- ' + upstream:36} {base:9.1f} {off:9.1f} {log:9.1f} {off - base:10.1f}"
            print(f"{row} {log - off:6.1f} {share:6.0%}")
    shares = [r["share"] for r in table.values()]
    if shares:
        print(f"lint share inside mitmdump: median {statistics.median(shares):.0%}, max {max(shares):.0%} (goal < 20%)")
    print(f"load average {min(loads):.2f}-{max(loads):.2f} during the run")
    return table


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    rounds = 5
    if "--rounds" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1])
        args.remove(str(rounds))
    if "--only-mitmdump" not in flags:
        main(*(int(a) for a in args[:2]))
    if "--mitmdump" in flags or "--only-mitmdump" in flags:
        in_mitmdump(rounds=rounds)
