"""Through-mitmdump measurements: throughput, CPU per event, time to first byte, memory, concurrency."""

from __future__ import annotations

import asyncio
import gc
import statistics
from dataclasses import dataclass
from pathlib import Path

import client
import orjson
import procs
import streams
from inproc import Stat

DRAGOMAN_SCRIPT = procs.REPO / "addon" / "dragoman.py"
PASSTHROUGH_SCRIPT = procs.BENCH / "passthrough_addon.py"


def dragoman_sets(upstream: str, up_port: int) -> dict[str, str]:
    base = f"http://127.0.0.1:{up_port}" + ("" if upstream == streams.ANTHROPIC else "/v1")
    return {"dragoman_target": upstream, "dragoman_upstream": base, "dragoman_api_key": "sk-bench"}


def routes_file(workdir: Path, label: str, up_port: int, to: str) -> Path:
    """A routes file sending every model to the fake upstream as a Chat upstream (``to``: "[a]" or "[a, b]")."""
    path = workdir / (label.replace(" ", "-").replace("(", "").replace(")", "") + ".yaml")
    base = f"http://127.0.0.1:{up_port}/v1"
    path.write_text(
        "upstreams:\n"
        f"  - {{name: a, protocol: openai-chat, base_url: '{base}', keys: [sk-bench-a]}}\n"
        f"  - {{name: b, protocol: openai-chat, base_url: '{base}', keys: [sk-bench-b]}}\n"
        f"routes:\n  - {{match: '*', to: {to}}}\n"
    )
    return path


@dataclass
class Route:
    key: str  # "direct chat", "pass-through chat", "dragoman anthropic<-chat"
    kind: str  # direct | passthrough | dragoman
    client: str
    upstream: str
    port: int
    proc: procs.Proc | None

    @property
    def path(self) -> str:
        return streams.CLIENT_PATHS[self.client]

    def path_n(self, n: int) -> str:
        """The path for an ``n``-event stream: Gemini names the model (and so the event count) in the path."""
        if self.client == streams.GEMINI:
            return self.path.replace("/models/bench:", f"/models/{streams.bench_model(n)}:")
        return self.path

    def body(self, n: int) -> bytes:
        return orjson.dumps(streams.small_request(self.client, streams.bench_model(n)))

    @property
    def identity(self) -> bool:
        return self.kind == "dragoman" and self.client == self.upstream


def direction_key(c: str, u: str) -> str:
    return f"{streams.SHORT[c]}<-{streams.SHORT[u]}"


def _check(route: Route, n: int) -> dict:
    try:
        f = client.fetch(route.port, route.path_n(n), route.body(n), keep_body=True)
    except Exception as e:  # noqa: BLE001
        return {"problem": f"{type(e).__name__}: {e}"}
    if f.status != 200:
        return {"problem": f"HTTP {f.status}: {(f.body or b'')[:300]!r}"}
    n_out, problem = streams.check_output(route.client, f.body or b"")
    if not f.complete and not problem:
        problem = "response not complete (no terminating chunk)"
    return {"problem": problem, "out_events": n_out, "out_bytes": len(f.body or b"")}


def bench_streams(
    routes: list[Route], n: int, runs: int, warmups: int, probes: int, probe_n: int, check_n: int, log=print
) -> dict:
    res: dict[str, dict] = {}
    for r in routes:
        res[r.key] = {"kind": r.kind, "client": r.client, "upstream": r.upstream, **_check(r, check_n)}
    live = [r for r in routes if not res[r.key].get("problem")]
    for r in routes:
        if res[r.key].get("problem"):
            log(f"  {r.key}: {res[r.key]['problem']}")
    eps = {r.key: Stat() for r in live}
    cpu = {r.key: Stat() for r in live}
    ttfb = {r.key: Stat() for r in live}
    for i in range(warmups + runs):
        for r in live:
            gc.collect()
            c0 = r.proc.cpu_seconds() if r.proc else 0.0
            f = client.fetch(r.port, r.path_n(n), r.body(n))
            c1 = r.proc.cpu_seconds() if r.proc else 0.0
            if f.status != 200 or not f.complete:
                res[r.key]["problem"] = f"run {i}: HTTP {f.status}, complete={f.complete}"
                continue
            if i < warmups:
                continue
            events = upstream_events(r.upstream or r.client, n)  # what the upstream really sends
            eps[r.key].samples.append(events / f.t_total)
            if r.proc:
                cpu[r.key].samples.append((c1 - c0) / events * 1e6)
        log(f"  stream round {i + 1}/{warmups + runs} done")
    for i in range(probes + 1):
        for r in live:
            f = client.fetch(r.port, r.path_n(probe_n), r.body(probe_n))
            if i and f.t_first is not None:
                ttfb[r.key].samples.append(f.t_first * 1e3)
    for r in live:
        res[r.key]["events_per_s"] = eps[r.key].as_dict()
        res[r.key]["cpu_us_per_event"] = cpu[r.key].as_dict() if r.proc else None
        res[r.key]["ttfb_ms"] = ttfb[r.key].as_dict()
    return {"n_events": n, "runs": runs, "probe_events": probe_n, "probes": probes, "routes": res}


def bench_memory(
    mitmdump: str,
    up_port: int,
    cases: list[tuple[str, str | None]],
    sizes: tuple[int, int],
    core: int | None,
    workdir: Path,
    log=print,
) -> dict:
    """Peak RSS (VmHWM) of a FRESH mitmdump after a small warm-up, after a sizes[0]-event stream and after
    a sizes[1]-event stream. ``cases``: (client, upstream) for Dragoman; upstream None = pass-through."""
    out: dict[str, dict] = {}
    for c, u in cases:
        if u is None:
            key = f"pass-through {streams.SHORT[c]}"
            proc = procs.start_mitmdump("mem-passthrough", mitmdump, up_port, PASSTHROUGH_SCRIPT, {}, core, workdir)
            route = Route(key, "passthrough", c, c, proc.port, proc)
        else:
            key = f"dragoman {direction_key(c, u)}"
            proc = procs.start_mitmdump(
                f"mem-{streams.SHORT[c]}-{streams.SHORT[u]}",
                mitmdump,
                up_port,
                DRAGOMAN_SCRIPT,
                dragoman_sets(u, up_port),
                core,
                workdir,
            )
            route = Route(key, "dragoman", c, u, proc.port, proc)
        rec: dict = {"client": c, "upstream": u}
        try:
            for _ in range(3):
                client.fetch(route.port, route.path_n(200), route.body(200))
            rec["warm_mib"] = proc.vmhwm_mib()
            for label, n in (("small", sizes[0]), ("large", sizes[1])):
                c0 = proc.cpu_seconds()
                f = client.fetch(route.port, route.path_n(n), route.body(n), timeout=600)
                c1 = proc.cpu_seconds()
                if f.status != 200 or not f.complete:
                    rec["problem"] = f"{label}: HTTP {f.status}, complete={f.complete}"
                rec[f"{label}_events"] = n
                rec[f"{label}_hwm_mib"] = proc.vmhwm_mib()
                rec[f"{label}_rss_after_mib"] = proc.vmrss_mib()
                rec[f"{label}_cpu_us_per_event"] = (c1 - c0) / n * 1e6
            rec["growth_mib"] = rec["large_hwm_mib"] - rec["small_hwm_mib"]
            rec["text_bytes_large"] = _text_bytes(u or c, sizes[1])
        except Exception as e:  # noqa: BLE001
            rec["problem"] = f"{type(e).__name__}: {e}"
        finally:
            proc.stop()
        out[key] = rec
        log(
            f"  memory {key}: {rec.get('small_hwm_mib', float('nan')):.1f} -> {rec.get('large_hwm_mib', float('nan')):.1f} MiB {rec.get('problem') or ''}"
        )
    return {"sizes": list(sizes), "cases": out}


_TEXT_BYTES: dict[tuple[str, int], int] = {}


_EVENTS: dict[tuple[str, int], int] = {}


def upstream_events(upstream: str, n: int) -> int:
    """The events a ``bench-n<n>`` stream of ``upstream`` really has (Gemini's: about 0.7 n, its tool calls
    come whole, one event each, where the others stream argument fragments)."""
    key = (upstream, n)
    if key not in _EVENTS:
        _EVENTS[key] = len(streams.generate(upstream, n))
    return _EVENTS[key]


def _text_bytes(upstream: str, n: int) -> int:
    key = (upstream, n)
    if key not in _TEXT_BYTES:
        _TEXT_BYTES[key] = streams.output_text_bytes(streams.generate(upstream, n))
    return _TEXT_BYTES[key]


async def _concurrent(routes: list[Route], n_streams: int, n: int) -> tuple[float, list]:
    bodies = [routes[i % len(routes)].body(n) for i in range(n_streams)]
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    results = await asyncio.gather(
        *(
            client.afetch(routes[i % len(routes)].port, routes[i % len(routes)].path_n(n), bodies[i])
            for i in range(n_streams)
        ),
        return_exceptions=True,
    )
    return loop.time() - t0, results


def bench_concurrency(label: str, routes: list[Route], n_streams: int, n: int, runs: int, log=print) -> dict:
    agg, slow, med_ttfb, cpu = Stat(), Stat(), Stat(), Stat()
    failures = 0
    problems: list[str] = []
    proc_list = {id(r.proc): r.proc for r in routes if r.proc}.values()
    for i in range(runs + 1):  # first round = warm-up (a tenth of the events)
        gc.collect()
        c0 = sum(p.cpu_seconds() for p in proc_list)
        wall, results = asyncio.run(_concurrent(routes, n_streams, n if i else max(n // 10, 20)))
        c1 = sum(p.cpu_seconds() for p in proc_list)
        ok = [r for r in results if isinstance(r, client.Fetch) and r.status == 200 and r.complete]
        bad = [r for r in results if r not in ok]
        if bad:
            failures += len(bad)
            problems.extend(
                str(b if isinstance(b, Exception) else f"HTTP {b.status} complete={b.complete}")[:200] for b in bad[:3]
            )
        if i == 0 or not ok:
            continue
        firsts = [r.t_first * 1e3 for r in ok if r.t_first is not None]
        agg.samples.append(len(ok) * n / wall)
        slow.samples.append(max(firsts))
        med_ttfb.samples.append(statistics.median(firsts))
        cpu.samples.append((c1 - c0) / (len(ok) * n) * 1e6)
    log(f"  concurrency {label}: {agg.median:,.0f} events/s, slowest TTFB {slow.median:.1f} ms, failures {failures}")
    return {
        "routes": [r.key for r in routes],
        "streams": n_streams,
        "events_per_stream": n,
        "aggregate_events_per_s": agg.as_dict(),
        "slowest_ttfb_ms": slow.as_dict(),
        "median_ttfb_ms": med_ttfb.as_dict(),
        "cpu_us_per_event": cpu.as_dict(),
        "failures": failures,
        "problems": problems[:5],
    }
