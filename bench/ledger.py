"""What the usage ledger costs the caller: ``Ledger.add`` on the calling thread (mitmproxy's event loop),
in microseconds per call, and how fast the background writer drains the queue.

    make bench-ledger           # or: .venv/bin/python bench/ledger.py [--rounds 40] [--burst 2000] [--no-redis]

For each backend (SQLite in a temporary folder; Redis when ``redis-server`` is installed: a private
server on 127.0.0.1 at a free port, stopped at the end) the script first times ``--spaced`` single
calls 2 ms apart, each alone (the addon's pattern: the writer is idle and woken by the call), then adds
``--burst`` records in a tight
loop, timing only the loop (wall ``perf_counter`` and the thread's own CPU time), then waits for the
writer outside the timing; ``--rounds`` times. The writer thread runs during the loop, so the numbers
include its competition for the GIL. Also measured: building a ``UsageRecord`` (the addon's side), and
``add`` on a full queue (the drop path). Prints one table; no pass/fail.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from dragoman.ledger import RedisLedger
from dragoman.ledger import SQLiteLedger
from dragoman.ledger import UsageRecord
from dragoman.ledger.store import QueuedLedger


def record(i: int) -> UsageRecord:
    return UsageRecord(
        ts=time.time(),
        client=f"client-{i % 5}",
        route="claude-*",
        upstream="deepseek",
        model="deepseek-chat",
        client_model="claude-sonnet-4-5",
        status=200,
        error=False,
        input_tokens=1000 + i % 100,
        output_tokens=200,
        cache_read_tokens=64,
        cache_write_tokens=0,
        estimated=False,
        stream=True,
        attempts=1,
    )


def measure_add(ledger: QueuedLedger, rounds: int, burst: int) -> dict[str, float]:
    recs = [record(i) for i in range(burst)]
    wall: list[float] = []
    cpu: list[float] = []
    drain: list[float] = []
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.thread_time()
        for r in recs:
            ledger.add(r)
        c1, t1 = time.thread_time(), time.perf_counter()
        ledger.flush()
        t2 = time.perf_counter()
        wall.append((t1 - t0) / burst * 1e6)
        cpu.append((c1 - c0) / burst * 1e6)
        drain.append(t2 - t0)
    stats = ledger.stats()
    assert stats.dropped == 0 and stats.failed == 0, stats
    return {
        "wall_us_median": statistics.median(wall),
        "wall_us_p90": statistics.quantiles(wall, n=10)[-1],
        "cpu_us_median": statistics.median(cpu),
        "writer_records_per_s": burst / statistics.median(drain),
    }


def measure_spaced(ledger: QueuedLedger, n: int, gap: float = 0.002) -> dict[str, float]:
    """One add() at a time with the writer idle in between (how the addon calls it: one record per
    finished request): each call timed alone, less the timer's own cost."""
    recs = [record(i) for i in range(n)]
    timer = min(_timer_cost() for _ in range(5))
    per: list[float] = []
    for r in recs:
        time.sleep(gap)  # the writer has written the previous record and waits on the queue again
        t0 = time.perf_counter_ns()
        ledger.add(r)
        per.append((time.perf_counter_ns() - t0 - timer) / 1000)
    ledger.flush()
    per.sort()
    return {"spaced_us_median": per[len(per) // 2], "spaced_us_p99": per[int(len(per) * 0.99)]}


def _timer_cost(n: int = 10_000) -> float:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples)


def measure_drop(ledger_cls: type[QueuedLedger], path: Path, n: int = 20_000) -> float:
    """µs per add() when the queue is full (the writer is held up on purpose)."""
    import threading

    release = threading.Event()
    entered = threading.Event()

    class Stalled(ledger_cls):  # type: ignore[valid-type, misc]
        def _write(self, batch):
            entered.set()
            release.wait(60)
            super()._write(batch)

    ledger = Stalled(path, max_queue=100, batch=1)
    logging.getLogger("dragoman.ledger").setLevel(logging.ERROR)  # the one "dropping" warning
    ledger.add(record(0))
    entered.wait(10)
    for i in range(100):
        ledger.add(record(i))
    r = record(1)
    t0 = time.perf_counter()
    for _ in range(n):
        ledger.add(r)
    us = (time.perf_counter() - t0) / n * 1e6
    release.set()
    ledger.close()
    return us


def measure_build(n: int = 100_000) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        record(i)
    return (time.perf_counter() - t0) / n * 1e6


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[str | None]:
    exe = shutil.which("redis-server")
    if exe is None:
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--burst", type=int, default=2000, help="records added per timed loop (< the queue bound)")
    ap.add_argument("--spaced", type=int, default=1000, help="add() calls timed one by one, 2 ms apart")
    ap.add_argument("--no-redis", action="store_true")
    args = ap.parse_args(argv)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        results = {}
        with SQLiteLedger(tmpdir / "usage.sqlite3") as ledger:
            results["sqlite"] = measure_add(ledger, args.rounds, args.burst) | measure_spaced(ledger, args.spaced)
        if not args.no_redis:
            with redis_server(tmpdir) as url:
                if url is None:
                    print("redis-server not installed: Redis not measured", file=sys.stderr)
                else:
                    with RedisLedger(url) as ledger:
                        results["redis"] = measure_add(ledger, args.rounds, args.burst) | measure_spaced(
                            ledger, args.spaced
                        )
        drop = measure_drop(SQLiteLedger, tmpdir / "drop.sqlite3")
    build = measure_build()
    for name, r in results.items():
        rows += [
            (f"{name}: add() alone, writer idle, median", f"{r['spaced_us_median']:.2f} µs"),
            (f"{name}: add() alone, writer idle, p99", f"{r['spaced_us_p99']:.2f} µs"),
            (f"{name}: add() in bursts, wall, median", f"{r['wall_us_median']:.2f} µs"),
            (f"{name}: add() in bursts, wall, p90 of rounds", f"{r['wall_us_p90']:.2f} µs"),
            (f"{name}: add() in bursts, thread CPU, median", f"{r['cpu_us_median']:.2f} µs"),
            (f"{name}: writer drains", f"{r['writer_records_per_s']:,.0f} records/s"),
        ]
    rows += [
        ("add() on a full queue (drop path)", f"{drop:.2f} µs"),
        ("UsageRecord(...) construction", f"{build:.2f} µs"),
    ]
    print(f"Usage ledger, {args.rounds} rounds of {args.burst} add() calls, Python {sys.version.split()[0]}")
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k.ljust(width)}  {v:>20}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
