"""Issue 31: Dragoman next to a pass-through mitmdump under four loads, side by side, as ratios.

* **short requests**: 1,024 non-streamed requests (a Claude Code-shaped Anthropic request on a Chat
  upstream, model ``text``: a short JSON answer) over 32 keep-alive connections; mitmdump CPU per request
  (``/proc`` utime+stime delta ÷ requests) and requests/s, for a single upstream and for a two-entry route
  (the failover relay), against the pass-through (the same request shape, Chat client to the Chat upstream);
* **one stream**: ``mitm.bench_streams`` on a 20,000-event stream (events/s, CPU per event, TTFB);
* **500 paced streams**: opened evenly over 2 s, each 80 events, one every 50 ms: time to first byte p99 of
  the ramp, and the inter-event gap p99 at the client once every stream is open (and its excess over 50 ms);
* **a burst of 500 streams** opened at once (40 paced events each) while another client, in its own process,
  sends one small request every 50 ms on a new connection: its worst wait.

Every section interleaves the paths (pass-through, Dragoman) round by round; each figure is the median over
rounds with its min-max spread. mitmdump is pinned to core 0, the fake upstream and the clients to core 1.
Wall-clock figures depend on what else runs on the machine (the load average is printed); the CPU ratios
much less. Run: ``python bench/load.py [--quick] [--rounds N]`` (``make bench`` runs it after ``run.py``);
``--probe`` is the other client's process (internal).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import orjson
import procs
import streams

import mitm

PACE = 0.05  # seconds between two events of a paced stream (20 events/s)
RESULTS = procs.BENCH / "results"


# -- HTTP/1.1 on asyncio streams -----------------------------------------------------------------------------


def _request(path: str, body: bytes, keep_alive: bool) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        "x-api-key: sk-bench\r\nauthorization: Bearer sk-bench\r\nanthropic-version: 2023-06-01\r\n"
        f"content-length: {len(body)}\r\nconnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode() + body


async def _read_answer(reader: asyncio.StreamReader) -> int:
    """Read one whole answer (content-length or chunked); its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length, chunked = 0, False
    for ln in lines[1:]:
        name, _, value = ln.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16):
            await reader.readexactly(size + 2)
        await reader.readuntil(b"\r\n")
    elif length:
        await reader.readexactly(length)
    return status


async def _keepalive_worker(port: int, path: str, body: bytes, n: int, bad: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = _request(path, body, True)
    try:
        for _ in range(n):
            writer.write(req)
            status = await _read_answer(reader)
            if status != 200:
                bad.append(status)
    finally:
        writer.close()


async def _short_requests(port: int, path: str, body: bytes, total: int, conns: int) -> tuple[float, list[int]]:
    bad: list[int] = []
    t0 = time.perf_counter()
    await asyncio.gather(*(_keepalive_worker(port, path, body, total // conns, bad) for _ in range(conns)))
    return time.perf_counter() - t0, bad


@dataclass
class StreamTimes:
    t_sent: float = 0.0
    t_first: float | None = None
    arrivals: list[tuple[float, int]] = field(default_factory=list)  # (time, events completed in that read)
    complete: bool = False
    error: str = ""


async def _paced_stream(port: int, path: str, body: bytes, start_at: float, out: StreamTimes) -> None:
    await asyncio.sleep(max(0.0, start_at - time.perf_counter()))
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    except OSError as e:
        out.error = f"connect: {e}"
        return
    try:
        out.t_sent = time.perf_counter()
        writer.write(_request(path, body, False))
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            out.error = head[:80].decode("latin-1")
            return
        last = b""
        tail = b""
        while data := await reader.read(1 << 16):
            t = time.perf_counter()
            if out.t_first is None:
                out.t_first = t
            k = (last + data).count(b"\n\n")
            if k:
                out.arrivals.append((t, k))
            last = data[-1:]
            tail = (tail + data)[-7:]
        out.complete = tail.endswith(b"0\r\n\r\n")
    except (OSError, asyncio.IncompleteReadError) as e:
        out.error = f"{type(e).__name__}: {e}"
    finally:
        writer.close()


async def _streams(port: int, path: str, body: bytes, n: int, ramp: float) -> list[StreamTimes]:
    t0 = time.perf_counter() + 0.05
    outs = [StreamTimes() for _ in range(n)]
    await asyncio.gather(*(_paced_stream(port, path, body, t0 + ramp * i / n, outs[i]) for i in range(n)))
    return outs


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _paced_figures(outs: list[StreamTimes], ramp_end: float) -> dict:
    ok = [o for o in outs if o.complete and not o.error and o.t_first is not None]
    ttfb = [(o.t_first - o.t_sent) * 1e3 for o in ok]  # type: ignore[operator]
    gaps: list[float] = []
    for o in ok:
        prev = None
        for t, k in o.arrivals:
            if prev is not None and t > ramp_end:
                gaps.append((t - prev) * 1e3)
                gaps.extend([0.0] * (k - 1))
            prev = t
    problems = sorted({o.error or "incomplete" for o in outs if o not in ok})[:3]
    return {
        "complete": len(ok),
        "streams": len(outs),
        "ttfb_p99_ms": _pct(ttfb, 0.99),
        "ttfb_p50_ms": _pct(ttfb, 0.5),
        "gap_p99_ms": _pct(gaps, 0.99),
        "gap_excess_p99_ms": _pct(gaps, 0.99) - PACE * 1e3,
        "gaps": len(gaps),
        "problems": problems,
    }


# -- the other client, in its own process ----------------------------------------------------------------------


def probe_main(port: int, path: str, body_file: str, duration: float, interval: float) -> None:
    body = Path(body_file).read_bytes()
    waits: list[float] = []
    errors = 0
    end = time.perf_counter() + duration
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.sendall(_request(path, body, False))
                data = b""
                while chunk := s.recv(65536):
                    data += chunk
            if b" 200 " not in data[:20]:
                errors += 1
        except OSError:
            errors += 1
        wait = time.perf_counter() - t0
        waits.append(wait * 1e3)
        time.sleep(max(0.0, interval - wait))
    sys.stdout.write(json.dumps({"waits_ms": waits, "errors": errors}) + "\n")


def _start_probe(port: int, path: str, body: bytes, duration: float, workdir: Path) -> subprocess.Popen:
    bf = workdir / f"probe-{port}.json"
    bf.write_bytes(body)
    cmd = [*procs.pin_prefix(1), sys.executable, __file__, "--probe", str(port), path, str(bf), str(duration)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=procs.BENCH)
    assert p.stdout is not None
    p.stdout.readline()  # READY
    return p


# -- the paths ----------------------------------------------------------------------------------------------------


@dataclass
class Path_:
    label: str
    proc: procs.Proc
    client: str

    @property
    def path(self) -> str:
        return streams.CLIENT_PATHS[self.client]

    def body(self, model: str, stream: bool) -> bytes:
        req = streams.small_request(self.client, model)
        req["stream"] = stream
        if not stream:
            req.pop("stream_options", None)
        return orjson.dumps(req)


def _span(xs: list[float], digits: int = 0) -> str:
    if not xs:
        return "n/a"
    f = f"{{:,.{digits}f}}"
    return f"{f.format(statistics.median(xs))} ({f.format(min(xs))}-{f.format(max(xs))})"


def _ratio(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b) if y]


def bench_short(paths: list[Path_], total: int, conns: int, rounds: int, log) -> dict:
    res: dict[str, dict[str, list[float]]] = {p.label: {"cpu_us": [], "rps": [], "bad": []} for p in paths}
    for p in paths:  # warm-up
        asyncio.run(_short_requests(p.proc.port, p.path, p.body("text", False), conns * 4, conns))
    for i in range(rounds):
        for p in paths:
            c0 = p.proc.cpu_seconds()
            wall, bad = asyncio.run(_short_requests(p.proc.port, p.path, p.body("text", False), total, conns))
            c1 = p.proc.cpu_seconds()
            n = total // conns * conns
            res[p.label]["cpu_us"].append((c1 - c0) / n * 1e6)
            res[p.label]["rps"].append(n / wall)
            res[p.label]["bad"].append(len(bad))
        log(f"  short requests round {i + 1}/{rounds} done")
    return res


def bench_paced(paths: list[Path_], n: int, events: int, ramp: float, rounds: int, log) -> dict:
    res: dict[str, list[dict]] = {p.label: [] for p in paths}
    for i in range(rounds):
        for p in paths:
            t0 = time.perf_counter()
            outs = asyncio.run(_streams(p.proc.port, p.path, p.body(f"bench-p{events}", True), n, ramp))
            res[p.label].append(_paced_figures(outs, t0 + ramp + 0.5))
        log(f"  paced streams round {i + 1}/{rounds} done")
    return res


def bench_burst(paths: list[Path_], n: int, events: int, rounds: int, workdir: Path, log) -> dict:
    res: dict[str, list[dict]] = {p.label: [] for p in paths}
    duration = events * PACE + 2.0
    for i in range(rounds):
        for p in paths:
            probe = _start_probe(p.proc.port, p.path, p.body("text", False), duration, workdir)
            time.sleep(0.3)  # the probe's quiet-time answers first
            outs = asyncio.run(_streams(p.proc.port, p.path, p.body(f"bench-p{events}", True), n, 0.0))
            out, _ = probe.communicate(timeout=duration + 60)
            got = json.loads(out.decode().strip().splitlines()[-1])
            waits = got["waits_ms"]
            res[p.label].append(
                {
                    "worst_wait_ms": max(waits) if waits else float("nan"),
                    "median_wait_ms": statistics.median(waits) if waits else float("nan"),
                    "probes": len(waits),
                    "probe_errors": got["errors"],
                    "complete": sum(1 for o in outs if o.complete and not o.error),
                    "streams": n,
                }
            )
        log(f"  burst round {i + 1}/{rounds} done")
    return res


# -- the table ------------------------------------------------------------------------------------------------------


def _rows(res: dict) -> list[list[str]]:
    rows: list[list[str]] = []
    pt = "pass-through"
    sr = res.get("short")
    if sr:
        base = sr[pt]
        rows.append(
            ["short requests", pt, f"{_span(base['cpu_us'])} µs CPU/req", f"{_span(base['rps'])} req/s", "", ""]
        )
        for label, r in sr.items():
            if label == pt:
                continue
            ratio = _ratio(r["cpu_us"], base["cpu_us"])
            ok = statistics.median(ratio) <= 1.2 if ratio else None
            rows.append(
                [
                    "short requests",
                    label,
                    f"{_span(r['cpu_us'])} µs CPU/req",
                    f"{_span(r['rps'])} req/s",
                    f"CPU {_span(ratio, 2)}x, req/s {_span(_ratio(r['rps'], base['rps']), 2)}x",
                    f"≤ 1.2x CPU: {'met' if ok else 'NOT met'}",
                ]
            )
    one = res.get("one_stream")
    if one:
        routes = one["routes"]
        base = routes.get("pass-through chat", {})
        names = ("dragoman anthropic<-chat", "baseline anthropic<-chat")
        if base.get("events_per_s"):
            rows.append(_stream_row(pt, base, None))
            rows += [_stream_row(n, routes[n], base) for n in names if (routes.get(n) or {}).get("events_per_s")]
    for key, title in (("paced", "500 paced streams"),):
        pr = res.get(key)
        if not pr:
            continue
        base = pr[pt]
        for label, rs in pr.items():
            ttfb = [r["ttfb_p99_ms"] for r in rs]
            gap = [r["gap_p99_ms"] for r in rs]
            exc = [r["gap_excess_p99_ms"] for r in rs]
            cell = f"ramp TTFB p99 {_span(ttfb)} ms, complete {min(r['complete'] for r in rs)}/{rs[0]['streams']}"
            cell2 = f"inter-event p99 {_span(gap, 1)} ms (over {PACE * 1e3:.0f} ms: {_span(exc, 1)})"
            if label == pt:
                rows.append([title, label, cell, cell2, "", ""])
                continue
            bt, bg = [r["ttfb_p99_ms"] for r in base], [r["gap_p99_ms"] for r in base]
            rt = _ratio(ttfb, bt)
            ok1 = statistics.median(rt) <= 1.2
            ok2 = statistics.median(gap) <= 1.5 * statistics.median(bg) + 2
            done = all(r["complete"] == r["streams"] for r in rs)
            rows.append(
                [
                    title,
                    label,
                    cell,
                    cell2,
                    f"TTFB p99 {_span(rt, 2)}x, gap p99 {_span(_ratio(gap, bg), 2)}x",
                    f"all complete/≤1.2x/≤1.5x+2ms: {'met' if done else 'NOT met'}/{'met' if ok1 else 'NOT met'}/"
                    f"{'met' if ok2 else 'NOT met'}",
                ]
            )
    br = res.get("burst")
    if br:
        base = br[pt]
        for label, rs in br.items():
            worst = [r["worst_wait_ms"] for r in rs]
            cell = f"other client's worst wait {_span(worst)} ms (median {_span([r['median_wait_ms'] for r in rs], 1)})"
            cell2 = f"streams complete {min(r['complete'] for r in rs)}/{rs[0]['streams']}, probe errors {sum(r['probe_errors'] for r in rs)}"
            if label == pt:
                rows.append(["burst of 500", label, cell, cell2, "", ""])
                continue
            bw = [r["worst_wait_ms"] for r in base]
            m = statistics.median(worst)
            rows.append(
                [
                    "burst of 500",
                    label,
                    cell,
                    cell2,
                    f"worst wait {_span(_ratio(worst, bw), 2)}x",
                    f"≤ 250 ms: {'met' if m <= 250 else 'NOT met'}; ≤ pass-through's: "
                    f"{'met' if m <= statistics.median(bw) else 'NOT met'}",
                ]
            )
    tr = _translator_rows()
    rows.extend(tr)
    return rows


def _stream_row(label: str, r: dict, base: dict | None) -> list[str]:
    figures = [
        "one stream",
        label,
        f"{_span(r['events_per_s']['samples'])} events/s",
        f"{_span(r['cpu_us_per_event']['samples'], 1)} µs CPU/event, TTFB {r['ttfb_ms']['median']:.2f} ms",
    ]
    if base is None:
        return [*figures, "", ""]
    eps = _ratio(r["events_per_s"]["samples"], base["events_per_s"]["samples"])
    cpu = _ratio(r["cpu_us_per_event"]["samples"], base["cpu_us_per_event"]["samples"])
    dt = r["ttfb_ms"]["median"] - base["ttfb_ms"]["median"]
    met = (statistics.median(eps) >= 0.9, statistics.median(cpu) <= 1.2, dt <= 0.5)
    return [
        *figures,
        f"events/s {_span(eps, 2)}x, CPU {_span(cpu, 2)}x, TTFB {dt:+.2f} ms",
        "≥0.9x / ≤1.2x / ≤+0.5 ms: " + "/".join("met" if c else "NOT met" for c in met),
    ]


def _translator_rows() -> list[list[str]]:
    """Translator alone vs the orjson floor, from ``run.py``'s last results (``make bench`` runs it first)."""
    latest = RESULTS / "latest.json"
    try:
        data = json.loads(latest.read_text())
    except (OSError, ValueError):
        return []
    tr = data.get("translator") or {}
    floors = tr.get("floors") or {}
    env = data.get("env") or {}
    # the rows are only as fresh as run.py's last translator section: say which run they come from
    source = f"run.py {str(env.get('date', '?'))[:16]}, git {env.get('git_head', '?')}"
    rows = []
    for d, r in sorted((tr.get("directions") or {}).items()):
        fl = (floors.get(r.get("upstream")) or {}).get("orjson", {}).get("median")
        us = (r.get("us_per_event") or {}).get("median")
        if r.get("client") == r.get("upstream") or not fl or us is None:
            continue
        x = us / fl
        rows.append(
            [
                "translator alone",
                f"{d} ({source})",
                f"{us:.2f} µs/event",
                f"orjson floor {fl:.2f} µs/event",
                f"{x:.2f}x floor",
                f"≤ 5x: {'met' if x <= 5 else 'NOT met'}",
            ]
        )
    return rows


def render(rows: list[list[str]]) -> str:
    header = ["load", "path", "figure", "figure", "vs pass-through", "issue 31 goal"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out = [" | ".join(c.ljust(w) for c, w in zip(header, widths)), "-+-".join("-" * w for w in widths)]
    out += [" | ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", nargs=4, metavar=("PORT", "PATH", "BODY_FILE", "DURATION"), help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="fewer requests, streams and rounds (a smoke run)")
    ap.add_argument("--rounds", type=int, default=0, help="rounds per section (default 3, quick 1)")
    ap.add_argument("--requests", type=int, default=0, help="short requests per path and round (default 1024)")
    ap.add_argument("--sections", default="short,stream,paced,burst")
    ap.add_argument("--mitmdump", default=str(Path(sys.executable).parent / "mitmdump"))
    ap.add_argument("--script", default=str(mitm.DRAGOMAN_SCRIPT), help="the Dragoman entry script to measure")
    ap.add_argument(
        "--baseline",
        default="",
        help="another checkout's root (e.g. `git archive main addon | tar -x -C DIR`): its Dragoman measured too, "
        "same run, for before/after ratios (short requests and one stream)",
    )
    ap.add_argument("--out", default=str(RESULTS / "load.json"))
    a = ap.parse_args(argv)
    if a.probe:
        port, path, body_file, duration = a.probe
        probe_main(int(port), path, body_file, float(duration), PACE)
        return 0
    sections = set(a.sections.split(","))
    rounds = a.rounds or (1 if a.quick else 3)
    n_req = a.requests or (320 if a.quick else 1024)
    n_streams = 100 if a.quick else 500
    procs.pin_self(1)
    t_start = time.monotonic()
    log = lambda m: print(m, flush=True)  # noqa: E731
    log(f"issue 31 load bench: load average {os.getloadavg()[0]:.2f} at start, {procs.cpus()} cores")
    workdir = Path(tempfile.mkdtemp(prefix="dragoman-load-"))
    started: list[procs.Proc] = []
    res: dict = {"rounds": rounds, "quick": a.quick}
    try:
        up = procs.start_upstream(1, [20, 20000], delay=PACE)
        started.append(up)
        script = Path(a.script)

        def start(label: str, script_: Path, sets: dict[str, str], env: dict[str, str] | None = None) -> procs.Proc:
            p = procs.start_mitmdump(label.replace(" ", "-"), a.mitmdump, up.port, script_, sets, 0, workdir, env)
            started.append(p)
            return p

        pt = start("pass-through", mitm.PASSTHROUGH_SCRIPT, {})
        single = start("dragoman single", script, mitm.dragoman_sets(streams.CHAT, up.port))
        two = start(
            "dragoman two", script, {"dragoman_config": str(mitm.routes_file(workdir, "two", up.port, "[a, b]"))}
        )
        a_, c_ = streams.ANTHROPIC, streams.CHAT
        p_pt = Path_("pass-through", pt, c_)
        p_single = Path_("dragoman single upstream", single, a_)
        p_two = Path_("dragoman two-entry route", two, a_)
        base: list[Path_] = []
        if a.baseline:
            root = Path(a.baseline).resolve()
            env = {"PYTHONPATH": str(root / "addon")}
            bscript = root / "addon" / "dragoman.py"
            b1 = start("baseline single", bscript, mitm.dragoman_sets(streams.CHAT, up.port), env)
            cfg = str(mitm.routes_file(workdir, "two-b", up.port, "[a, b]"))
            b2 = start("baseline two", bscript, {"dragoman_config": cfg}, env)
            base = [Path_("baseline single upstream", b1, a_), Path_("baseline two-entry route", b2, a_)]
            res["baseline"] = str(root)
        if "short" in sections:
            log(f"[1/4] short requests: {n_req} non-streamed over 32 keep-alive connections, {rounds} rounds")
            res["short"] = bench_short([p_pt, p_single, p_two, *base], n_req, 32, rounds, log)
        if "stream" in sections:
            log(f"[2/4] one stream ({2000 if a.quick else 20000:,} events)")
            rs = [
                mitm.Route("direct chat", "direct", c_, c_, up.port, None),
                mitm.Route("pass-through chat", "passthrough", c_, c_, pt.port, pt),
                mitm.Route("dragoman anthropic<-chat", "dragoman", a_, c_, single.port, single),
                *[mitm.Route("baseline anthropic<-chat", "dragoman", a_, c_, b.proc.port, b.proc) for b in base[:1]],
            ]
            n_ev = 2000 if a.quick else 20000
            res["one_stream"] = mitm.bench_streams(
                rs, n_ev, max(rounds, 3) if not a.quick else 1, 1, 15, 20, 200, log=log
            )
            for r in res["one_stream"]["routes"].values():
                for k in ("events_per_s", "cpu_us_per_event", "ttfb_ms"):
                    if isinstance(r.get(k), dict) and "samples" not in r[k]:
                        r[k]["samples"] = [r[k]["median"]]
        if "paced" in sections:
            log(f"[3/4] {n_streams} paced streams opened over 2 s, 80 events each at 20 events/s")
            res["paced"] = bench_paced([p_pt, p_single, *base[:1]], n_streams, 80, 2.0, max(1, rounds - 1), log)
        if "burst" in sections:
            log(f"[4/4] a burst of {n_streams} streams at once, another client asking every 50 ms")
            res["burst"] = bench_burst([p_pt, p_single, *base[:1]], n_streams, 40, max(1, rounds - 1), workdir, log)
    finally:
        for p in started:
            p.stop()
        res["logs_tail"] = {p.name: p.log_tail(2000) for p in started if p.log}
        shutil.rmtree(workdir, ignore_errors=True)
    res["elapsed_s"] = round(time.monotonic() - t_start, 1)
    rows = _rows(res)
    res["table"] = rows
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(render(rows))
    print(
        f"\nload average at end {os.getloadavg()[0]:.2f}; {res['elapsed_s']} s; wrote {out} "
        "(goals from issue 31; wall-clock figures move with the machine's load, compare ratios)"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
