"""Dragoman benchmark: prints ONE table and writes bench/results/latest.json (and latest.md).

    .venv/bin/python bench/run.py            # full run (< 10 min on 2 cores)
    .venv/bin/python bench/run.py --quick    # smoke run (< 2 min)

Sections (measured side by side in the same run, see bench/README.md):
1. translator alone, in process (µs per upstream event per direction, vs the orjson floor) and
   request translation (µs per real client request);
2. through mitmdump (events/s, mitmdump CPU µs per event, time to first byte) for direct, a pass-through
   SSE callable, and Dragoman per direction (identity included);
3. mitmdump peak RSS for a small and a large stream;
4. 50 concurrent streams of mixed directions.
Budget lines from issue 6 are printed next to the numbers (PASS/OVER); they are never assertions.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import inproc  # noqa: E402
import procs  # noqa: E402
import streams  # noqa: E402

import mitm  # noqa: E402

RESULTS = procs.BENCH / "results"

FULL = {
    "inproc_events": 20_000,
    "inproc_runs": 7,
    "inproc_warmups": 2,
    "request_runs": 7,
    "mitm_events": 10_000,
    "mitm_runs": 5,
    "mitm_warmups": 0,  # the correctness check (check_events) already warmed every route up
    "ttfb_probes": 15,
    "ttfb_probe_events": 20,
    "check_events": 2_000,
    "memory_sizes": (2_000, 200_000),
    "conc_streams": 50,
    "conc_events": 1_000,
    "conc_runs": 3,
}
QUICK = {
    "inproc_events": 3_000,
    "inproc_runs": 3,
    "inproc_warmups": 1,
    "request_runs": 3,
    "mitm_events": 2_000,
    "mitm_runs": 2,
    "mitm_warmups": 0,
    "ttfb_probes": 5,
    "ttfb_probe_events": 20,
    "check_events": 300,
    "memory_sizes": (2_000, 10_000),
    "conc_streams": 50,
    "conc_events": 100,
    "conc_runs": 1,
}

# -- budget lines (issue 6) ----------------------------------------------------------------------------------
BUDGET_TRANSLATOR_US = 10.0
BUDGET_TRANSLATOR_X_FLOOR = 5.0
BUDGET_EPS = 20_000
BUDGET_CPU_X_PT = 1.5
BUDGET_TTFB_ADDED_MS = 1.0
BUDGET_MEM_MIB = 5.0
BUDGET_REQUEST_US = 2_000.0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def verdict(ok: bool | None) -> str:
    return "" if ok is None else ("PASS" if ok else "OVER")


def _fmt(x: float, digits: int = 1) -> str:
    if x != x:  # nan
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def _spread(d: dict | None, digits: int = 1) -> str:
    if not d or not d.get("samples"):
        return ""
    return f"{_fmt(d['min'], digits)}-{_fmt(d['max'], digits)}"


def short(p: str) -> str:
    return streams.SHORT[p]


# -- table ---------------------------------------------------------------------------------------------------


def build_rows(res: dict) -> list[list[str]]:
    rows: list[list[str]] = []  # section, case, value, spread(min-max), vs ref, budget, verdict

    tr = res.get("translator")
    if tr:
        floors = tr["floors"]
        for p, f in floors.items():
            rows.append(
                [
                    "translator",
                    f"floor: orjson loads+dumps ({short(p)} events)",
                    f"{_fmt(f['orjson']['median'], 2)} µs/ev",
                    _spread(f["orjson"], 2),
                    "",
                    "",
                    "",
                ]
            )
        for p, f in floors.items():
            if f["sse_decoder"]["samples"]:
                rows.append(
                    [
                        "translator",
                        f"ref: SSE decoder alone ({short(p)})",
                        f"{_fmt(f['sse_decoder']['median'], 2)} µs/ev",
                        _spread(f["sse_decoder"], 2),
                        "",
                        "",
                        "",
                    ]
                )
        translated = []
        for d in tr["directions"].values():
            c, u = d["client"], d["upstream"]
            name = f"{short(c)}<-{short(u)}" + (" (identity ref)" if c == u else "")
            if d.get("problem") or not d["us_per_event"]["samples"]:
                rows.append(
                    [
                        "translator",
                        name,
                        "ERR",
                        "",
                        "",
                        f"≤{BUDGET_TRANSLATOR_US:g} µs/ev",
                        f"ERR: {str(d.get('problem'))[:70]}",
                    ]
                )
                continue
            med = d["us_per_event"]["median"]
            fl = floors[u]["orjson"]["median"]
            budget = "" if c == u else f"≤{BUDGET_TRANSLATOR_US:g} µs/ev"
            rows.append(
                [
                    "translator",
                    name,
                    f"{_fmt(med, 2)} µs/ev",
                    _spread(d["us_per_event"], 2),
                    f"{med / fl:.1f}× floor",
                    budget,
                    "" if c == u else verdict(med <= BUDGET_TRANSLATOR_US),
                ]
            )
            if c != u:
                translated.append((med, fl))
        if translated:
            m = statistics.median(x for x, _ in translated)
            fl = statistics.median(f for _, f in translated)
            ok = m <= BUDGET_TRANSLATOR_US and m / fl <= BUDGET_TRANSLATOR_X_FLOOR
            rows.append(
                [
                    "translator",
                    f"MEDIAN over {len(translated)} translated directions",
                    f"{_fmt(m, 2)} µs/ev",
                    "",
                    f"{m / fl:.1f}× floor",
                    f"≤{BUDGET_TRANSLATOR_US:g} µs/ev, ≤{BUDGET_TRANSLATOR_X_FLOOR:g}× floor",
                    verdict(ok),
                ]
            )
        for p, err in tr.get("missing", {}).items():
            rows.append(["translator", f"codec {short(p)} unavailable", "-", "", "", "", f"ERR: {err[:60]}"])

    rq = res.get("requests")
    if rq:
        for key, d in rq["requests"].items():
            label = key.split(":")[0]
            budget = f"≤{BUDGET_REQUEST_US:g} µs" if label == "claude-code" else ""
            if d.get("problem"):
                rows.append(["request", key, "ERR", "", "", budget, f"ERR: {d['problem'][:70]}"])
                continue
            med = d["us_per_request"]["median"]
            ident = " (identity)" if d["client"] == d["upstream"] else ""
            rows.append(
                [
                    "request",
                    f"{key}{ident} {d['bytes_in'] // 1024} KB->{d['bytes_out'] // 1024} KB",
                    f"{_fmt(med, 0)} µs/req",
                    _spread(d["us_per_request"], 0),
                    "",
                    budget,
                    verdict(med <= BUDGET_REQUEST_US) if budget else "",
                ]
            )

    ms = res.get("mitm")
    if ms:
        routes = ms["routes"]
        pt = {r["upstream"]: r for r in routes.values() if r["kind"] == "passthrough"}
        direct = {r["upstream"]: r for r in routes.values() if r["kind"] == "direct"}
        for key, r in routes.items():
            sec = "mitmdump"
            if r.get("problem") or "events_per_s" not in r:
                rows.append([sec, key, "ERR", "", "", "", f"ERR: {str(r.get('problem'))[:70]}"])
                continue
            translated = r["kind"] == "dragoman" and r["client"] != r["upstream"]
            dragoman = r["kind"] == "dragoman"
            eps = r["events_per_s"]
            rows.append(
                [
                    sec,
                    f"{key}: throughput",
                    f"{_fmt(eps['median'])} ev/s",
                    _spread(eps),
                    "",
                    f"≥{BUDGET_EPS:,} ev/s" if translated else "",
                    verdict(eps["median"] >= BUDGET_EPS) if translated else "",
                ]
            )
            if r.get("cpu_us_per_event"):
                cpu = r["cpu_us_per_event"]
                ref = pt.get(r["upstream"])
                ratio = ""
                ok = None
                if dragoman and ref and ref.get("cpu_us_per_event") and ref["cpu_us_per_event"]["samples"]:
                    x = cpu["median"] / ref["cpu_us_per_event"]["median"]
                    ratio = f"{x:.2f}× PT"
                    ok = x <= BUDGET_CPU_X_PT if translated else None
                rows.append(
                    [
                        sec,
                        f"{key}: mitmdump CPU",
                        f"{_fmt(cpu['median'], 1)} µs/ev",
                        _spread(cpu),
                        ratio,
                        f"≤{BUDGET_CPU_X_PT:g}× PT" if translated else "",
                        verdict(ok),
                    ]
                )
            tt = r["ttfb_ms"]
            ref = (
                pt.get(r["upstream"]) if dragoman else direct.get(r["upstream"]) if r["kind"] == "passthrough" else None
            )
            delta = ""
            ok = None
            if ref and ref.get("ttfb_ms") and ref["ttfb_ms"]["samples"] and tt["samples"]:
                dms = tt["median"] - ref["ttfb_ms"]["median"]
                delta = f"{dms:+.2f} ms vs {'PT' if dragoman else 'direct'}"
                ok = dms <= BUDGET_TTFB_ADDED_MS if translated else None
            rows.append(
                [
                    sec,
                    f"{key}: TTFB",
                    f"{_fmt(tt['median'], 2)} ms",
                    _spread(tt, 2),
                    delta,
                    f"≤+{BUDGET_TTFB_ADDED_MS:g} ms vs PT" if translated else "",
                    verdict(ok),
                ]
            )

    mem = res.get("memory")
    if mem:
        small, large = mem["sizes"]
        for key, r in mem["cases"].items():
            if r.get("problem") or "growth_mib" not in r:
                rows.append(["memory", key, "ERR", "", "", "", f"ERR: {str(r.get('problem'))[:70]}"])
                continue
            g = r["growth_mib"]
            budget = ""
            ok = None
            if r["upstream"] is not None:
                if r["client"] == streams.RESPONSES:
                    # the final response.completed snapshot holds all output: allow 3 bytes of RSS per text byte
                    allow = BUDGET_MEM_MIB + 3 * r["text_bytes_large"] / 2**20
                    budget = f"≤+{allow:.1f} MiB (5 + 3×text)"
                else:
                    allow = BUDGET_MEM_MIB
                    budget = f"≤+{allow:g} MiB"
                ok = g <= allow
            rows.append(
                [
                    "memory",
                    f"{key}: peak RSS {small:,} -> {large:,} ev",
                    f"{r['small_hwm_mib']:.1f} -> {r['large_hwm_mib']:.1f} MiB",
                    "",
                    f"{g:+.1f} MiB",
                    budget,
                    verdict(ok),
                ]
            )

    cc = res.get("concurrency")
    if cc:
        pt = cc.get("passthrough")
        for label, d in cc.items():
            n = f"{d['streams']}×{d['events_per_stream']:,} ev ({label})"
            if d.get("failures"):
                rows.append(
                    ["concurrent", n, "", "", "", "", f"ERR: {d['failures']} failed: {'; '.join(d['problems'])[:60]}"]
                )
            if not d["aggregate_events_per_s"]["samples"]:
                continue
            ratio = ""
            if label != "passthrough" and pt and pt["aggregate_events_per_s"]["samples"]:
                ratio = f"{d['aggregate_events_per_s']['median'] / pt['aggregate_events_per_s']['median']:.2f}× PT"
            rows.append(
                [
                    "concurrent",
                    f"{n}: aggregate",
                    f"{_fmt(d['aggregate_events_per_s']['median'])} ev/s",
                    _spread(d["aggregate_events_per_s"]),
                    ratio,
                    "",
                    "",
                ]
            )
            rows.append(
                [
                    "concurrent",
                    f"{n}: mitmdump CPU",
                    f"{_fmt(d['cpu_us_per_event']['median'])} µs/ev",
                    _spread(d["cpu_us_per_event"]),
                    "",
                    "",
                    "",
                ]
            )
            rows.append(
                [
                    "concurrent",
                    f"{n}: slowest TTFB",
                    f"{_fmt(d['slowest_ttfb_ms']['median'], 1)} ms",
                    _spread(d["slowest_ttfb_ms"]),
                    f"median {_fmt(d['median_ttfb_ms']['median'], 1)} ms",
                    "",
                    "",
                ]
            )
    return rows


HEADER = ["section", "case", "median", "spread (min-max)", "vs ref", "budget (issue 6)", "verdict"]


def render(rows: list[list[str]]) -> str:
    widths = [max(len(HEADER[i]), *(len(r[i]) for r in rows)) if rows else len(HEADER[i]) for i in range(len(HEADER))]
    sep = "-+-".join("-" * w for w in widths)

    def line(cells):
        return " | ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    out = [line(HEADER), sep]
    prev = None
    for r in rows:
        if prev is not None and r[0] != prev:
            out.append(sep)
        out.append(line(r))
        prev = r[0]
    return "\n".join(out)


def render_md(rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    return "\n".join(out)


# -- environment ---------------------------------------------------------------------------------------------


def loadavg() -> list[float]:
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return []


def environment(mitmdump: str) -> dict:
    env = {
        "loadavg_start": loadavg(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": procs.cpus(),
        "taskset": shutil.which("taskset") is not None,
        "mitmdump": mitmdump,
    }
    try:
        with open("/proc/cpuinfo") as f:
            env["cpu_model"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    try:
        v = subprocess.run([mitmdump, "--version"], capture_output=True, text=True, timeout=60).stdout
        env["mitmproxy_version"] = v.splitlines()[0].split(":", 1)[1].strip() if v else ""
    except Exception as e:  # noqa: BLE001
        env["mitmproxy_version"] = f"unknown ({e})"
    try:
        env["git_head"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=procs.REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        env["git_dirty"] = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=procs.REPO,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
        )
    except Exception:  # noqa: BLE001
        pass
    try:
        import orjson

        env["orjson"] = orjson.__version__
    except Exception:  # noqa: BLE001
        pass
    return env


# -- main ----------------------------------------------------------------------------------------------------


def default_mitmdump() -> str:
    cand = Path(sys.executable).parent / "mitmdump"
    return str(cand) if cand.exists() else (shutil.which("mitmdump") or "mitmdump")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: smaller N, fewer runs (< 2 min)")
    ap.add_argument("--mitmdump", default=default_mitmdump(), help="mitmdump executable (default: next to this Python)")
    ap.add_argument(
        "--sections", default="translator,requests,mitm,memory,concurrency", help="comma list of sections to run"
    )
    ap.add_argument(
        "--out", default=str(RESULTS / "latest.json"), help="JSON output (a .md table is written next to it)"
    )
    ap.add_argument("--no-pin", action="store_true", help="do not pin processes to cores")
    a = ap.parse_args(argv)

    cfg = dict(QUICK if a.quick else FULL)
    sections = {s.strip() for s in a.sections.split(",") if s.strip()}
    pin = not a.no_pin and procs.cpus() >= 2
    mitm_core, client_core = (0, 1) if pin else (None, None)
    t_start = time.monotonic()
    res: dict = {"mode": "quick" if a.quick else "full", "config": cfg, "env": environment(a.mitmdump), "pinned": pin}
    log(
        f"dragoman bench ({res['mode']}): mitmdump {res['env'].get('mitmproxy_version')} on core {mitm_core}, clients/upstream on core {client_core}"
    )
    if pin:
        procs.pin_self(client_core)
    la = res["env"]["loadavg_start"]
    if la and la[0] > procs.cpus() * 0.5:
        log(
            f"  WARNING: load average {la[0]:.1f} on {procs.cpus()} cores: other work is running; wall-clock figures (events/s, TTFB) will be noisy"
        )

    timings: dict[str, float] = {}
    res["section_seconds"] = timings
    t_sec = time.monotonic()

    def lap(name: str) -> None:
        nonlocal t_sec
        now = time.monotonic()
        timings[name] = round(now - t_sec, 1)
        t_sec = now

    if "translator" in sections:
        log("[1/5] translator alone, in process")
        res["translator"] = inproc.bench_streams(
            cfg["inproc_events"], cfg["inproc_runs"], cfg["inproc_warmups"], log=log
        )
        lap("translator")
    if "requests" in sections:
        log("[2/5] request translation, in process")
        try:
            res["requests"] = inproc.bench_requests(cfg["request_runs"], 2, log=log)
        except Exception as e:  # noqa: BLE001
            res["requests"] = {"requests": {}, "error": f"{type(e).__name__}: {e}"}
            log(f"  requests failed: {e}")
        lap("requests")

    need_mitm = sections & {"mitm", "memory", "concurrency"}
    if need_mitm:
        workdir = Path(tempfile.mkdtemp(prefix="dragoman-bench-"))
        started: list[procs.Proc] = []
        try:
            prewarm = sorted(
                {
                    cfg["mitm_events"],
                    cfg["ttfb_probe_events"],
                    cfg["check_events"],
                    cfg["conc_events"],
                    max(cfg["conc_events"] // 10, 20),
                    200,
                    *cfg["memory_sizes"],
                }
            )
            up = procs.start_upstream(client_core, prewarm)
            started.append(up)
            log(f"  fake upstream on 127.0.0.1:{up.port} (pid {up.pid})")
            routes: list[mitm.Route] = []
            dragoman_ok = mitm.DRAGOMAN_SCRIPT.exists()
            if "mitm" in sections or "concurrency" in sections:
                pt = procs.start_mitmdump(
                    "passthrough", a.mitmdump, up.port, mitm.PASSTHROUGH_SCRIPT, {}, mitm_core, workdir
                )
                started.append(pt)
                dm: dict[str, procs.Proc] = {}
                if dragoman_ok:
                    for u in streams.PROTOCOLS:
                        try:
                            dm[u] = procs.start_mitmdump(
                                f"dragoman-{short(u)}",
                                a.mitmdump,
                                up.port,
                                mitm.DRAGOMAN_SCRIPT,
                                mitm.dragoman_sets(u, up.port),
                                mitm_core,
                                workdir,
                            )
                            started.append(dm[u])
                        except Exception as e:  # noqa: BLE001
                            log(f"  mitmdump with Dragoman target {u} failed to start: {e}")
                if dragoman_ok:
                    # issue 10: the same direction through a routes file, one entry (mitmproxy forwards) and two
                    # entries (the failover relay carries it; the first entry answers, so no retry happens)
                    for label, to in (("routed 1 entry", "[a]"), ("routed 2 entries (relay)", "[a, b]")):
                        cfg_path = mitm.routes_file(workdir, label, up.port, to)
                        try:
                            proc = procs.start_mitmdump(
                                label.replace(" ", "-").replace("(", "").replace(")", ""),
                                a.mitmdump,
                                up.port,
                                mitm.DRAGOMAN_SCRIPT,
                                {"dragoman_config": str(cfg_path)},
                                mitm_core,
                                workdir,
                            )
                        except Exception as e:  # noqa: BLE001
                            log(f"  mitmdump with routes ({label}) failed to start: {e}")
                            continue
                        started.append(proc)
                        c, u = streams.ANTHROPIC, streams.CHAT
                        routes.append(
                            mitm.Route(f"{label} {mitm.direction_key(c, u)}", "dragoman", c, u, proc.port, proc)
                        )
                for u in streams.PROTOCOLS:
                    routes.append(mitm.Route(f"direct {short(u)}", "direct", u, u, up.port, None))
                for u in streams.PROTOCOLS:
                    routes.append(mitm.Route(f"pass-through {short(u)}", "passthrough", u, u, pt.port, pt))
                for u in streams.PROTOCOLS:
                    if u not in dm:
                        continue
                    for c in streams.PROTOCOLS:
                        routes.append(
                            mitm.Route(f"dragoman {mitm.direction_key(c, u)}", "dragoman", c, u, dm[u].port, dm[u])
                        )
            if "mitm" in sections:
                log("[3/5] streams through mitmdump")
                lap("startup")
                res["mitm"] = mitm.bench_streams(
                    routes,
                    cfg["mitm_events"],
                    cfg["mitm_runs"],
                    cfg["mitm_warmups"],
                    cfg["ttfb_probes"],
                    cfg["ttfb_probe_events"],
                    cfg["check_events"],
                    log=log,
                )
                lap("mitm")
            if "concurrency" in sections:
                log("[4/5] concurrent streams")
                bad = {k for k, r in res.get("mitm", {}).get("routes", {}).items() if r.get("problem")}
                translated = [r for r in routes if r.kind == "dragoman" and r.client != r.upstream and r.key not in bad]
                cc: dict = {}
                if translated:
                    cc["dragoman mixed"] = mitm.bench_concurrency(
                        "dragoman mixed", translated, cfg["conc_streams"], cfg["conc_events"], cfg["conc_runs"], log=log
                    )
                ptr = [r for r in routes if r.kind == "passthrough"]
                cc["passthrough"] = mitm.bench_concurrency(
                    "passthrough", ptr, cfg["conc_streams"], cfg["conc_events"], cfg["conc_runs"], log=log
                )
                res["concurrency"] = cc
                lap("concurrency")
            for p in started[1:]:
                p.stop()
            if "memory" in sections:
                log("[5/5] memory (fresh mitmdump per case)")
                # one case per client-side ("target") protocol, from the upstream it is most often paired with
                cases = [
                    (streams.ANTHROPIC, streams.CHAT),
                    (streams.CHAT, streams.ANTHROPIC),
                    (streams.RESPONSES, streams.ANTHROPIC),
                ]
                if not dragoman_ok:
                    cases = []
                cases = [(streams.CHAT, None), *cases]
                res["memory"] = mitm.bench_memory(
                    a.mitmdump, up.port, cases, tuple(cfg["memory_sizes"]), mitm_core, workdir, log=log
                )
                lap("memory")
        finally:
            for p in started:
                p.stop()
            logs = {p.name: p.log_tail(4000) for p in started if p.log}
            res["mitmdump_logs_tail"] = {k: v for k, v in logs.items() if v.strip()}
            shutil.rmtree(workdir, ignore_errors=True)

    res["elapsed_s"] = round(time.monotonic() - t_start, 1)
    res["env"]["loadavg_end"] = loadavg()
    rows = build_rows(res)
    res["table"] = [dict(zip(HEADER, r)) for r in rows]
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, ensure_ascii=False, default=str) + "\n")
    md = out.with_suffix(".md")
    env = res["env"]
    md.write_text(
        f"Dragoman benchmark ({res['mode']}), {env['date']}, git {env.get('git_head', '?')}{' (dirty)' if env.get('git_dirty') else ''}, "
        f"Python {env['python']}, mitmproxy {env.get('mitmproxy_version')}, {env['cpus']} cores ({env.get('cpu_model', '')}), "
        f"pinned={pin}, load average {env.get('loadavg_start')} -> {env.get('loadavg_end')}, {res['elapsed_s']} s\n\n{render_md(rows)}\n"
    )
    print(render(rows))
    la0, la1 = res["env"].get("loadavg_start") or [0], res["env"].get("loadavg_end") or [0]
    print(f"\nload average at start {la0[0]:.2f}, at end {la1[0]:.2f} ({procs.cpus()} cores)")
    print(
        f"{res['mode']} run in {res['elapsed_s']} s ({', '.join(f'{k} {v}' for k, v in timings.items())}); wrote {out} and {md.name}  (PASS/OVER = budget lines from issue 6, not assertions)"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
