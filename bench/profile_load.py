"""Where a running mitmdump's CPU goes under one of issue 31's loads (py-spy on the live process).

    .venv/bin/pip install py-spy
    .venv/bin/python bench/profile_load.py short|short-two|stream|probe|passthrough-short|passthrough-stream|passthrough-probe [--seconds 10]

Starts the fake upstream and one mitmdump (Dragoman with one Chat upstream, or a two-entry route, or the
pass-through), drives the load (``probe``: small 20-event streams one after another on new connections, what
the time to first byte is made of) while ``py-spy record -f raw`` samples the mitmdump process, and prints the share
of samples per part: mitmproxy's hook dispatch, each Dragoman part (the Translate addon, the relay, the
translator, the ledger, the other addons), logging, and the rest of mitmproxy and asyncio. Samples are counted
by the innermost frame that belongs to a part, so each sample counts once. ``--raw FILE`` keeps py-spy's output.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import load
import procs
import streams

import mitm

# (part, substrings of a frame's file) — first match, innermost frame first
PARTS = [
    ("logging", ("/logging/__init__.py", "mitmproxy/addons/termlog", "mitmproxy/log.py", "dragoman/logsafe")),
    ("ledger", ("dragoman/ledger/",)),
    (
        "relay (loopback hop, its HTTP/1.1 client)",
        ("mitm/relay/relay", "mitm/relay/http1", "mitm/relay/upstream_http", "mitm/relay/exchange", "mitm/relay/held"),
    ),
    (
        "translator (translate/, protocols/, ir/, sse/)",
        ("dragoman/translate/", "dragoman/protocols/", "dragoman/ir/", "dragoman/sse/", "dragoman/routing/"),
    ),
    (
        "Translate addon (request/response hooks, stream callable)",
        (
            "mitm/translate_addon",
            "mitm/answer/",
            "mitm/outbound",
            "mitm/relay/headers",
            "mitm/usage",
            "mitm/flowstate",
            "mitm/keymask",
            "mitm/hosts",
            "mitm/route_state",
            "mitm/routing",
        ),
    ),
    ("Dragoman's Chain (one dispatch to the parts)", ("mitm/chain",)),
    ("other Dragoman addons (gate, CORS, client keys, endpoints, recorder, replayer, scrub)", ("dragoman/mitm/",)),
    ("pass-through callable", ("passthrough_addon",)),
    ("pydantic / orjson", ("pydantic",)),
    (
        "mitmproxy hook dispatch (addonmanager, safecall)",
        ("mitmproxy/addonmanager", "mitmproxy/hooks", "mitmproxy/ctx"),
    ),
    (
        "mitmproxy HTTP layers, connections",
        (
            "mitmproxy/proxy/",
            "mitmproxy/net/",
            "mitmproxy/http.py",
            "mitmproxy/connection",
            "mitmproxy/flow",
            "h11",
            "h2/",
        ),
    ),
    ("mitmproxy other addons", ("mitmproxy/addons/",)),
    ("asyncio, sockets", ("asyncio/", "selectors", "socket")),
]


#: innermost frames of a thread that waits (epoll, a sleeping writer thread): py-spy may still report them,
#: with ``--gil`` as the last thread that held the GIL; counted apart as idle, outside the shares
IDLE = (
    "BaseSelector.select",
    "EpollSelector.select",
    "selectors.py",
    "QueuedLedger._run",
    "Condition.wait",
    "queue.py",
)
IDLE_PART = "idle (a waiting thread; not in the shares)"


def classify(stack: list[str]) -> str:
    if stack and any(s in stack[-1] for s in IDLE):
        return IDLE_PART
    for frame in reversed(stack):
        for part, subs in PARTS:
            if any(s in frame for s in subs):
                return part
    return "other"


def summarize(raw: str) -> list[tuple[str, int, float]]:
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = stack.split(";")
        if frames and frames[0].startswith("process"):
            frames = frames[1:]
        counts[classify(frames)] += int(n)
    total = sum(c for p, c in counts.items() if p != IDLE_PART) or 1
    return [(p, c, c / total if p != IDLE_PART else 0.0) for p, c in counts.most_common()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summarize", default="", help="only summarize a kept raw file (--raw) again")
    ap.add_argument(
        "load",
        nargs="?",
        default="short",
        choices=[
            "short",
            "short-two",
            "stream",
            "probe",
            "passthrough-short",
            "passthrough-stream",
            "passthrough-probe",
        ],
    )
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--raw", default="", help="keep py-spy's raw output here")
    ap.add_argument("--mitmdump", default=str(Path(sys.executable).parent / "mitmdump"))
    a = ap.parse_args()
    if a.summarize:
        print_summary(Path(a.summarize).read_text(), 0.0, "unit")
        return 0
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    workdir = Path(tempfile.mkdtemp(prefix="dragoman-prof-"))
    started: list[procs.Proc] = []
    try:
        up = procs.start_upstream(1, [20000, 20])
        started.append(up)
        if a.load.startswith("passthrough"):
            proc = procs.start_mitmdump("pt", a.mitmdump, up.port, mitm.PASSTHROUGH_SCRIPT, {}, 0, workdir)
            client = streams.CHAT
        elif a.load == "short-two":
            cfg = mitm.routes_file(workdir, "two", up.port, "[a, b]")
            proc = procs.start_mitmdump(
                "dm", a.mitmdump, up.port, mitm.DRAGOMAN_SCRIPT, {"dragoman_config": str(cfg)}, 0, workdir
            )
            client = streams.ANTHROPIC
        else:
            sets = mitm.dragoman_sets(streams.CHAT, up.port)
            proc = procs.start_mitmdump("dm", a.mitmdump, up.port, mitm.DRAGOMAN_SCRIPT, sets, 0, workdir)
            client = streams.ANTHROPIC
        started.append(proc)
        path = load.Path_("p", proc, client)
        stop = threading.Event()
        done = [0]

        def drive() -> None:
            while not stop.is_set():
                if a.load.endswith("probe"):
                    mitm.client.fetch(proc.port, path.path, path.body(streams.bench_model(20), True))
                    done[0] += 1
                elif a.load.endswith("stream"):
                    mitm.client.fetch(proc.port, path.path, path.body(streams.bench_model(20000), True))
                    done[0] += 20000
                else:
                    asyncio.run(load._short_requests(proc.port, path.path, path.body("text", False), 64, 32))
                    done[0] += 64

        drive_once = threading.Thread(target=drive, daemon=True)
        drive_once.start()
        deadline = time.monotonic() + 120
        warm = 40000 if a.load.endswith("stream") else 256
        while done[0] < warm and time.monotonic() < deadline:
            time.sleep(0.2)  # start-up (imports, gc.freeze at ``running``) must not be in the profile
        time.sleep(0.5)
        out = workdir / "raw.txt"
        c0 = proc.cpu_seconds()
        n0 = done[0]
        subprocess.run(
            [
                pyspy,
                "record",
                "--nonblocking",
                "-r",
                str(a.rate),
                "-d",
                str(int(a.seconds)),
                "-f",
                "raw",
                "-o",
                str(out),
                "-p",
                str(proc.pid),
            ],
            check=True,
            capture_output=True,
        )
        c1, n1 = proc.cpu_seconds(), done[0]
        stop.set()
        drive_once.join(timeout=60)
        raw = out.read_text()
        if a.raw:
            Path(a.raw).write_text(raw)
        unit = "event" if a.load.endswith("stream") else "probe" if a.load.endswith("probe") else "request"
        per = (c1 - c0) / max(1, n1 - n0) * 1e6
        print(f"{a.load}: {n1 - n0} {unit}s sampled, mitmdump CPU {per:,.1f} µs per {unit} (py-spy adds a little)")
        print_summary(raw, per, unit)
    finally:
        for p in started:
            p.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def print_summary(raw: str, per: float, unit: str) -> None:
    """Shares of the non-idle samples, and that share of the measured CPU per request or event."""
    for part, n, share in summarize(raw):
        cost = f"{per * share:8.1f} µs/{unit}  " if per else ""
        print(f"  {share * 100:5.1f}%  {cost}{part}  ({n} samples)")


if __name__ == "__main__":
    raise SystemExit(main())
