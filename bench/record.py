"""Recorder benchmark (issue 23, 3(d)): what recording one long stream costs mitmdump, and the other flows.

    .venv/bin/python bench/record.py [--events 300000] [--quick] [--mitmdump PATH] [--script PATH]
                                     [--set NAME=VALUE ...]

A fresh mitmdump with ``dragoman_record`` (Anthropic client, Chat upstream = ``fake_upstream.py``), warmed up
with 3 small streams; then one ``--events``-event stream is read as fast as possible while a second client
sends count_tokens requests and small 20-event streams one after the other, on their own connections, until the long stream's recording
is on disk (and 1 s more). Reported:

* RSS growth: peak RSS (``VmHWM``) after the long stream and its recording, minus the peak after the warm-up;
* the worst stall of a concurrent flow: the slowest count_tokens request (answered by mitmdump itself, so
  its time is how long mitmdump's event loop kept it waiting) minus the idle median, over the whole long
  stream and its writing; the slowest small stream through the fake upstream is shown beside it;
* how long after the long stream's end its recording file appeared.

The same run without ``dragoman_record`` is the reference: with an upstream that sends 300,000 events as fast
as it can, mitmdump's event loop keeps other flows waiting for a while even without recording (how long is
bounded by ``dragoman_read_size`` and the start-up ``gc.freeze()``, ``dragoman/mitm/guards/responsive.py``), so the
stall is shown both as what recording adds and absolute. ``--script /other/checkout/addon/dragoman.py``
measures another checkout ("before"); ``--set dragoman_read_size=0`` one option. Budget lines (issue 23): growth
<= 16 MiB, stall <= 100 ms. They are printed as PASS/OVER, never asserted; the run exits 0 whenever it could measure.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import client  # noqa: E402
import orjson  # noqa: E402
import procs  # noqa: E402
import streams  # noqa: E402

import mitm  # noqa: E402

BUDGET_GROWTH_MIB = 16.0
BUDGET_STALL_MS = 100.0
CLIENT, UPSTREAM = streams.ANTHROPIC, streams.CHAT


def _body(n: int) -> bytes:
    return orjson.dumps(streams.small_request(CLIENT, streams.bench_model(n)))


def _recorded(root: Path, events: int) -> bool:
    """The long stream's recording is on disk (its file name carries the model, ``bench-n<events>``)."""
    return root.exists() and any(not p.name.startswith(".") for p in root.rglob(f"*bench-n{events}*.json"))


def warm_upstream(port: int, events: int) -> None:
    """Have the fake upstream generate (and cache) the long stream before anything is measured."""
    body = orjson.dumps(streams.small_request(UPSTREAM, streams.bench_model(events)))
    client.fetch(port, streams.CLIENT_PATHS[UPSTREAM], body, timeout=900)


COUNT_TOKENS = "/v1/messages/count_tokens"


def _probe(port: int, path: str, body: bytes) -> bool:
    try:
        f = client.fetch(port, path, body, timeout=60)
    except OSError:
        return False
    return f.status == 200 and (f.complete or path == COUNT_TOKENS)


class Prober(threading.Thread):
    """Another flow, again and again: a count_tokens request (answered by mitmdump itself, so its time is how
    long mitmdump kept it waiting) and, for reference, a small 20-event stream through the fake upstream.
    Each one's total time, in ms."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.times: list[float] = []
        self.starts: list[float] = []
        self.stream_times: list[float] = []
        self.failures = 0
        self.stop_at: float | None = None
        self._body = _body(20)

    def run(self) -> None:
        path = streams.CLIENT_PATHS[CLIENT]
        while self.stop_at is None or time.monotonic() < self.stop_at:
            t0 = time.monotonic()
            self.starts.append(t0)
            ok = _probe(self.port, COUNT_TOKENS, self._body)
            t1 = time.monotonic()
            self.times.append((t1 - t0) * 1e3)
            ok = _probe(self.port, path, self._body) and ok
            self.stream_times.append((time.monotonic() - t1) * 1e3)
            self.failures += not ok
            time.sleep(0.005)


def measure(
    mitmdump: str, script: Path, extra: dict[str, str], up_port: int, events: int, record: bool, workdir: Path
) -> dict:
    rec_root = workdir / ("rec" if record else "none")
    sets = {**mitm.dragoman_sets(UPSTREAM, up_port), **extra}
    if record:
        sets["dragoman_record"] = str(rec_root)
    name = "record" if record else "no-record"
    proc = procs.start_mitmdump(name, mitmdump, up_port, script, sets, None, workdir)
    out: dict = {"record": record, "events": events}
    path = streams.CLIENT_PATHS[CLIENT]
    try:
        for _ in range(3):
            client.fetch(proc.port, path, _body(200))
        idle = [client.fetch(proc.port, COUNT_TOKENS, _body(20)).t_total * 1e3 for _ in range(15)]
        out["idle_probe_ms"] = statistics.median(idle)
        out["warm_hwm_mib"] = proc.vmhwm_mib()
        prober = Prober(proc.port)
        prober.start()
        t0 = time.monotonic()
        f = client.fetch(proc.port, path, _body(events), timeout=900)
        t_end = time.monotonic()
        out["stream_s"] = t_end - t0
        out["stream_ok"] = f.status == 200 and f.complete
        if record:
            deadline = t_end + 300
            while time.monotonic() < deadline and not _recorded(rec_root, events):
                time.sleep(0.05)
            out["file_after_s"] = time.monotonic() - t_end
        prober.stop_at = time.monotonic() + 1.0
        prober.join()
        out["hwm_mib"] = proc.vmhwm_mib()
        out["growth_mib"] = out["hwm_mib"] - out["warm_hwm_mib"]
        out["probes"] = len(prober.times)
        out["probe_failures"] = prober.failures
        out["worst_probe_ms"] = max(prober.times) if prober.times else float("nan")
        out["worst_stream_probe_ms"] = max(prober.stream_times) if prober.stream_times else float("nan")
        out["stall_ms"] = out["worst_probe_ms"] - out["idle_probe_ms"]
        if prober.times:
            worst = prober.times.index(max(prober.times))
            out["worst_at_s"] = prober.starts[worst] - t0  # when the slowest probe started, after the long stream
    except Exception as e:  # noqa: BLE001 - report, do not crash the bench
        out["problem"] = f"{type(e).__name__}: {e} {proc.log_tail(1000)}"
    finally:
        proc.stop()
    return out


def _verdict(value: float, budget: float) -> str:
    return "PASS" if value <= budget else "OVER"


def _added(rows: list[dict]) -> float | None:
    """The recording's own share of the stall: its worst minus the reference run's worst (no recording)."""
    ref = [r for r in rows if not r["record"] and "problem" not in r]
    rec = [r for r in rows if r["record"] and "problem" not in r]
    return rec[0]["stall_ms"] - ref[0]["stall_ms"] if ref and rec else None


def table(rows: list[dict]) -> str:
    added = _added(rows)
    lines = [
        "| case | events | RSS growth | worst stall of a concurrent flow | idle probe | worst small stream | file after "
        "| budget |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        case = "record" if r["record"] else "no record (reference)"
        if "problem" in r:
            lines.append(f"| {case} | {r['events']} | ERR {r['problem'][:200]} | | | | | |")
            continue
        budget = ""
        if r["record"]:
            budget = f"growth <= {BUDGET_GROWTH_MIB:g} MiB {_verdict(r['growth_mib'], BUDGET_GROWTH_MIB)}"
            if added is not None:
                budget += (
                    f", stall added by recording {added:+.0f} ms <= {BUDGET_STALL_MS:g} ms "
                    f"{_verdict(added, BUDGET_STALL_MS)} (absolute {_verdict(r['stall_ms'], BUDGET_STALL_MS)})"
                )
        after = f"{r['file_after_s']:.2f} s" if "file_after_s" in r else "-"
        lines.append(
            f"| {case} | {r['events']:,} | +{r['growth_mib']:.1f} MiB | {r['stall_ms']:.0f} ms "
            f"(worst {r['worst_probe_ms']:.0f} ms at +{r.get('worst_at_s', 0):.1f} s of a {r['stream_s']:.1f} s stream; "
            f"{r['probes']} probes, {r['probe_failures']} failed) "
            f"| {r['idle_probe_ms']:.1f} ms | {r['worst_stream_probe_ms']:.0f} ms | {after} | {budget} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--quick", action="store_true", help="20,000 events (smoke run)")
    ap.add_argument("--mitmdump", default=str(Path(sys.executable).parent / "mitmdump"))
    ap.add_argument("--script", default=str(mitm.DRAGOMAN_SCRIPT), help="another checkout's addon/dragoman.py")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a mitmdump option, both runs")
    a = ap.parse_args()
    extra = dict(s.split("=", 1) for s in a.set)
    events = 20_000 if a.quick else a.events
    work = Path(tempfile.mkdtemp(prefix="dragoman-bench-record-"))
    up = procs.start_upstream(None, [])
    rows = []
    try:
        warm_upstream(up.port, events)
        for record in (False, True):
            print(f"recorder bench: {'with' if record else 'without'} dragoman_record, {events:,} events", flush=True)
            rows.append(measure(a.mitmdump, Path(a.script), extra, up.port, events, record, work))
    finally:
        up.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("\nRecorder (issue 23, 3(d)): an Anthropic client on a Chat upstream, one long stream recorded")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
