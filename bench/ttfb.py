"""Time to first byte only (issue 31): many small streamed requests, the paths interleaved, same run.

    .venv/bin/python bench/ttfb.py [--probes 300] [--baseline DIR] [--events 20]

Starts the fake upstream (core 1), a pass-through mitmdump, this tree's Dragoman (``anthropic<-chat``, one
upstream) and, with ``--baseline DIR`` (``git archive main addon bench | tar -x -C DIR``), another checkout's
Dragoman, all mitmdumps pinned to core 0. Each round sends one probe per path in turn (a new connection, a
20-event stream; the clock starts once connected), so every path sees the same machine. Prints per path the
median, mean of the middle half and p90 of the time to the response head and to the first body byte, and the
mitmdump CPU per probe (``/proc`` utime+stime over all probes: the whole flow's cost, head to end); then the
differences from the pass-through. Far more probes than ``load.py``'s 15, for differences of ~0.1 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import client
import orjson
import procs
import streams

import mitm


def _mid_mean(xs: list[float]) -> float:
    s = sorted(xs)
    q = len(s) // 4
    mid = s[q : len(s) - q] or s
    return sum(mid) / len(mid)


def _p(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probes", type=int, default=300)
    ap.add_argument("--events", type=int, default=20)
    ap.add_argument("--baseline", default="")
    ap.add_argument("--mitmdump", default=str(Path(sys.executable).parent / "mitmdump"))
    ap.add_argument("--script", default=str(mitm.DRAGOMAN_SCRIPT))
    ap.add_argument("--set", action="append", default=[], help="extra --set k=v for this tree's Dragoman")
    a = ap.parse_args(argv)
    procs.pin_self(1)
    print(f"ttfb: load average {os.getloadavg()[0]:.2f} at start", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="dragoman-ttfb-"))
    started: list[procs.Proc] = []
    try:
        up = procs.start_upstream(1, [a.events])
        started.append(up)

        def start(label: str, script: Path, sets: dict[str, str], env: dict[str, str] | None = None) -> procs.Proc:
            p = procs.start_mitmdump(label, a.mitmdump, up.port, script, sets, 0, workdir, env)
            started.append(p)
            return p

        extra = dict(kv.split("=", 1) for kv in a.set)
        paths: list[tuple[str, procs.Proc, str]] = [
            ("pass-through chat", start("pt", mitm.PASSTHROUGH_SCRIPT, {}), streams.CHAT),
            (
                "dragoman anthropic<-chat",
                start("this", Path(a.script), {**mitm.dragoman_sets(streams.CHAT, up.port), **extra}),
                streams.ANTHROPIC,
            ),
        ]
        if a.baseline:
            root = Path(a.baseline).resolve()
            env = {"PYTHONPATH": str(root / "addon")}
            b = start("base", root / "addon" / "dragoman.py", mitm.dragoman_sets(streams.CHAT, up.port), env)
            paths.append(("baseline anthropic<-chat", b, streams.ANTHROPIC))
        model = streams.bench_model(a.events)
        bodies = {c: orjson.dumps(streams.small_request(c, model)) for c in (streams.CHAT, streams.ANTHROPIC)}
        head: dict[str, list[float]] = {p[0]: [] for p in paths}
        first: dict[str, list[float]] = {p[0]: [] for p in paths}
        cpu: dict[str, float] = {p[0]: 0.0 for p in paths}
        for i in range(a.probes + 10):
            for label, proc, c in paths:
                c0 = proc.cpu_seconds()
                f = client.fetch(proc.port, streams.CLIENT_PATHS[c], bodies[c])
                c1 = proc.cpu_seconds()
                if f.status != 200 or f.t_first is None or not f.complete:
                    raise RuntimeError(f"{label}: HTTP {f.status}, complete={f.complete}")
                if i < 10:
                    continue  # warm-up
                head[label].append(f.t_headers * 1e3)
                first[label].append(f.t_first * 1e3)
                cpu[label] += c1 - c0
            time.sleep(0.002)
        print(f"{a.probes} probes per path, {a.events}-event streams; load average {os.getloadavg()[0]:.2f} at end")
        print(f"{'path':28} {'head med':>9} {'first med':>9} {'first mid':>9} {'first p90':>9} {'CPU/probe':>10}")
        for label, _, _ in paths:
            h, fs = head[label], first[label]
            print(
                f"{label:28} {statistics.median(h):9.3f} {statistics.median(fs):9.3f} {_mid_mean(fs):9.3f} "
                f"{_p(fs, 0.9):9.3f} {cpu[label] / a.probes * 1e6:8.0f}µs"
            )
        pt = paths[0][0]
        for label, _, _ in paths[1:]:
            print(
                f"{label} - pass-through: first byte median {statistics.median(first[label]) - statistics.median(first[pt]):+.3f} ms, "
                f"mid-mean {_mid_mean(first[label]) - _mid_mean(first[pt]):+.3f} ms, "
                f"CPU {(cpu[label] - cpu[pt]) / a.probes * 1e6:+.0f} µs per probe"
            )
    finally:
        for p in started:
            p.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
