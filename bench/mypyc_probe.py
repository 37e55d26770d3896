"""Issues 31 and 35: what a mypyc-compiled build of Dragoman's hot modules would buy (a measurement, no build step).

``build`` copies ``addon/`` (sources only) and ``pyproject.toml`` into a directory OUTSIDE the repository and
compiles a set of modules there with mypyc (from the ``mypy`` dev dependency; needs ``setuptools``, gcc and the
interpreter's headers). The ``.so`` files stay in that copy: one left inside the repository's ``addon/`` would
shadow the ``.py`` next to it. ``translator`` and ``lint`` then run ``bench/inproc.py``'s translator bench and
``bench/lint.py`` in fresh subprocesses, pure (the repository's ``addon/``) and compiled (the copy's) interleaved
round by round, and print both with their ratio and the load average. ``mitmdump`` streams through a
pass-through mitmdump and two Dragoman ones (the repository's, the copy's), interleaved (``bench/mitm.py``);
``bench/load.py --sections stream --baseline COPY`` gives the anthropic<-chat figure too.

    .venv/bin/python bench/mypyc_probe.py build /tmp/dragoman-mypyc [--python PY] [--set hot[,lint][,mitm]]
    .venv/bin/python bench/mypyc_probe.py translator /tmp/dragoman-mypyc [--rounds 3] [--events 2000]
    .venv/bin/python bench/mypyc_probe.py lint /tmp/dragoman-mypyc [--rounds 3] [--events 2000]
    .venv/bin/python bench/mypyc_probe.py mitmdump /tmp/dragoman-mypyc [--rounds 5] [--events 20000]

The build needs ``pip install setuptools`` in the interpreter's environment (or on its PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PKG = "addon/dragoman"

# The translator's stream path: the SSE codec, the stream translator, the IR, and per protocol the stream
# decoder/encoder with the helpers they call per event. The pydantic model modules stay interpreted.
HOT = [
    "sse/capped.py",
    "sse/decoder.py",
    "sse/encoder.py",
    "sse/events.py",
    "translate/stream.py",
    "translate/overflow.py",
    "ir/*.py",
    "protocols/base.py",
    "protocols/_checks.py",
    "protocols/_custom_args.py",
    "protocols/_openai_errors.py",
    "protocols/*/stream_*.py",
    "protocols/*/response.py",
    "protocols/*/errors.py",
    "protocols/openai_responses/response_encode.py",
    "protocols/openai_responses/response_decode.py",
    "protocols/openai_chat/reasoning_details.py",
    "protocols/openai_chat/gemini.py",
    "protocols/gemini/partial_args.py",
    "protocols/gemini/thoughts.py",
]
LINT = ["lint/*.py"]

# Applied to the COPY only (the source is not changed for mypyc):
# * mypyc limitation: a native class has one base (besides traits). The three stream classes built from a mixin
#   and the ABC keep the same MRO with the mixin deriving from the ABC;
# * mypyc limitation: ``typing.dataclass_transform`` on a compiled function fails at import (it sets an
#   attribute on the function); the IR events become plain (native) dataclasses, same fields, eq and hash;
# * compiled classes subclassed by interpreted code (tests' fakes, SearchCodec, UsageTap, AnswerTap) need
#   ``mypy_extensions.mypyc_attr(allow_interpreted_subclasses=True)`` (a runtime import of mypy_extensions);
# * a mixin's ``name: Callable[...]`` declaration of a method its subclass defines compiles to an instance
#   attribute that is never set (AttributeError at run time): declared as methods instead;
# * mypyc bug: an attribute ``_signed`` becomes the C struct field ``__signed``, a GCC keyword (compile error).
_STUB = "\n        raise NotImplementedError"
COPY_PATCHES = [
    (
        "protocols/openai_responses/stream_encode_search.py",
        "_release: Callable[[], bytes]",
        "def _release(self) -> bytes:" + _STUB,
    ),
    (
        "protocols/openai_responses/stream_encode_search.py",
        "_mint: Callable[[str, str | None], str]",
        "def _mint(self, a: str, b: str | None, /) -> str:" + _STUB,
    ),
    (
        "protocols/anthropic_messages/stream_search.py",
        "_ensure_started: Callable[[bytearray], None]",
        "def _ensure_started(self, a: bytearray, /) -> None:" + _STUB,
    ),
    (
        "protocols/anthropic_messages/stream_search.py",
        "_close_wire: Callable[[bytearray, OutBlock], None]",
        "def _close_wire(self, a: bytearray, b: OutBlock, /) -> None:" + _STUB,
    ),
    (
        "protocols/anthropic_messages/stream_search.py",
        "_started_ping: Callable[[bytearray], None]",
        "def _started_ping(self, a: bytearray, /) -> None:" + _STUB,
    ),
    (
        "protocols/base.py",
        "\nfrom abc import ABC\n",
        "\nfrom abc import ABC\n\nfrom mypy_extensions import mypyc_attr\n",
    ),
    (
        "protocols/base.py",
        "\nclass StreamDecoder(ABC)",
        "\n@mypyc_attr(allow_interpreted_subclasses=True)\nclass StreamDecoder(ABC)",
    ),
    (
        "protocols/base.py",
        "\nclass StreamEncoder(ABC)",
        "\n@mypyc_attr(allow_interpreted_subclasses=True)\nclass StreamEncoder(ABC)",
    ),
    ("protocols/base.py", "\nclass Codec(ABC)", "\n@mypyc_attr(allow_interpreted_subclasses=True)\nclass Codec(ABC)"),
    (
        "protocols/base.py",
        "\nclass ModuleCodec(Codec)",
        "\n@mypyc_attr(allow_interpreted_subclasses=True)\nclass ModuleCodec(Codec)",
    ),
    ("ir/events.py", "@dataclass_transform(frozen_default=True)\n", ""),
    ("ir/events.py", "\n@_event\n", "\n@dataclass(unsafe_hash=True)\n"),
    ("protocols/openai_chat/stream_encode.py", "self._signed", "self._sig_by_call"),
    ("protocols/anthropic_messages/stream_search.py", "class SearchBlocks:", "class SearchBlocks(StreamEncoder):"),
    (
        "protocols/anthropic_messages/stream_search.py",
        "from dragoman.protocols.base import Context\n",
        "from dragoman.protocols.base import Context\nfrom dragoman.protocols.base import StreamEncoder\n",
    ),
    ("protocols/anthropic_messages/stream_encode.py", "(SearchBlocks, StreamEncoder)", "(SearchBlocks)"),
    ("protocols/openai_responses/stream_encode_items.py", "class ItemFraming:", "class ItemFraming(StreamEncoder):"),
    (
        "protocols/openai_responses/stream_encode_items.py",
        "from dragoman.protocols.base import Context\n",
        "from dragoman.protocols.base import Context\nfrom dragoman.protocols.base import StreamEncoder\n",
    ),
    ("protocols/openai_responses/stream_encode.py", "(SearchItems, StreamEncoder)", "(SearchItems)"),
    ("protocols/openai_responses/stream_decode_items.py", "class ItemState:", "class ItemState(StreamDecoder):"),
    (
        "protocols/openai_responses/stream_decode_items.py",
        "from dragoman.protocols.base import Context\n",
        "from dragoman.protocols.base import Context\nfrom dragoman.protocols.base import StreamDecoder\n",
    ),
    ("protocols/openai_responses/stream_decode.py", "(ItemState, StreamDecoder)", "(ItemState)"),
]
# the addon layer (typed loosely: untyped code compiles as generic Python objects); not view.py (nested
# classes) nor chain.py (it sets hook attributes on its instance at run time: a native class has fixed ones)
MITM = ["mitm/*.py", "logsafe.py"]
SETS = {"hot": HOT, "lint": LINT, "mitm": MITM}


def _modules(copy: Path, sets: list[str]) -> list[str]:
    files: list[str] = []
    for s in sets:
        for pat in SETS[s]:
            for f in sorted((copy / PKG).glob(pat)):
                rel = str(f.relative_to(copy / "addon"))
                if f.name not in ("__init__.py", "view.py", "chain.py") and rel not in files:  # see MITM
                    files.append(rel)
    return files


def build(a: argparse.Namespace) -> int:
    out = Path(a.dir).resolve()
    if out == REPO or REPO in out.parents:
        sys.exit("build outside the repository: a .so inside addon/ would shadow the edited .py")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(REPO / "addon", out / "addon", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for rel, old, new in COPY_PATCHES:
        f = out / PKG / rel
        text = f.read_text()
        if old not in text:
            sys.exit(f"{rel}: {old!r} not found (update COPY_PATCHES)")
        f.write_text(text.replace(old, new))
    cfg = (REPO / "pyproject.toml").read_text()
    (out / "pyproject.toml").write_text(cfg.replace('files = ["addon/dragoman", "tools"]', 'files = ["dragoman"]'))
    files = _modules(out, a.set.split(","))
    env = {**os.environ, "MYPYPATH": str(out / "addon"), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    # run from addon/: the shared group library (<hash>__mypyc.*.so) lands there, importable beside the package
    cmd = [a.python, "-m", "mypyc", "--config-file", str(out / "pyproject.toml"), *files]
    print(f"mypyc: {len(files)} modules with {a.python} (load average {os.getloadavg()[0]:.2f})", flush=True)
    t0 = time.monotonic()
    r = subprocess.run(cmd, cwd=out / "addon", env=env, capture_output=True, text=True)
    took = time.monotonic() - t0
    (out / "mypyc.log").write_text(r.stdout + r.stderr)
    if r.returncode:
        print((r.stdout + r.stderr)[-4000:])
        return r.returncode
    shutil.rmtree(out / "addon" / "build", ignore_errors=True)
    sos = sorted((out / "addon").rglob("*.so"))
    size = sum(f.stat().st_size for f in sos)
    check = subprocess.run(
        [a.python, "-c", "import dragoman.sse.decoder as m, dragoman.translate.stream as s; print(m.__file__)"],
        env={**os.environ, "PYTHONPATH": str(out / "addon")},
        capture_output=True,
        text=True,
    )
    info = {
        "python": a.python,
        "modules": files,
        "seconds": round(took, 1),
        "so_files": len(sos),
        "so_bytes": size,
        "largest": {
            str(f.relative_to(out)): f.stat().st_size for f in sorted(sos, key=lambda f: -f.stat().st_size)[:3]
        },
        "imports": check.stdout.strip() or check.stderr.strip()[-500:],
        "load_average": os.getloadavg()[0],
    }
    (out / "mypyc_build.json").write_text(json.dumps(info, indent=1) + "\n")
    print(json.dumps({k: v for k, v in info.items() if k != "modules"}, indent=1))
    return 0


# -- interleaved in-process benches -------------------------------------------------------------------------------

_TRANSLATOR = """
import json
import inproc
r = inproc.bench_streams({n}, {runs}, 2, log=lambda m: None)
import dragoman.sse.decoder as d
us = {{k: v["us_per_event"]["median"] for k, v in r["directions"].items()}}
us.update({{"SSE decoder alone, " + p: f["sse_decoder"]["median"] for p, f in r["floors"].items()}})
us.update({{"orjson loads+dumps floor, " + p: f["orjson"]["median"] for p, f in r["floors"].items()}})
bad = {{k: v["problem"] for k, v in r["directions"].items() if v.get("problem")}}
print(json.dumps({{"file": d.__file__, "us": us, "problems": bad}}))
"""

_LINT = """
import json, contextlib, io
import lint
with contextlib.redirect_stdout(io.StringIO()):
    t = lint.main({n}, {runs})
import dragoman.lint.flow as f
print(json.dumps({{"file": f.__file__, "table": t}}))
"""


def _child(code: str, addon: Path, python: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(addon), "PYTHONHASHSEED": "0"}
    r = subprocess.run([python, "-c", code], cwd=BENCH, env=env, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _paths(a: argparse.Namespace) -> list[tuple[str, Path]]:
    return [("pure", REPO / "addon"), ("compiled", Path(a.dir).resolve() / "addon")]


def translator(a: argparse.Namespace) -> int:
    samples: dict[str, dict[str, list[float]]] = {"pure": {}, "compiled": {}}
    loads = [os.getloadavg()[0]]
    for i in range(a.rounds):
        for name, addon in _paths(a) if i % 2 == 0 else reversed(_paths(a)):
            res = _child(_TRANSLATOR.format(n=a.events, runs=a.runs), addon, a.python)
            if i == 0:
                print(f"{name}: dragoman.sse.decoder from {res['file']}", flush=True)
            if res["problems"]:
                print(f"{name}: output problems {res['problems']}", flush=True)
            for d, us in res["us"].items():
                samples[name].setdefault(d, []).append(us)
        loads.append(os.getloadavg()[0])
        print(f"round {i + 1}/{a.rounds} done (load average {loads[-1]:.2f})", flush=True)
    _table("µs/event", samples, loads)
    return 0


def lint(a: argparse.Namespace) -> int:
    samples: dict[str, dict[str, list[float]]] = {}
    loads = [os.getloadavg()[0]]
    for i in range(a.rounds):
        for name, addon in _paths(a) if i % 2 == 0 else reversed(_paths(a)):
            res = _child(_LINT.format(n=a.events, runs=a.runs), addon, a.python)
            if i == 0:
                print(f"{name}: dragoman.lint.flow from {res['file']}", flush=True)
            for d, row in res["table"].items():
                for col in ("alone", "lint", "share"):
                    samples.setdefault(f"{name} {col}", {}).setdefault(d, []).append(row[col])
        loads.append(os.getloadavg()[0])
        print(f"round {i + 1}/{a.rounds} done (load average {loads[-1]:.2f})", flush=True)
    med = {k: {d: statistics.median(v) for d, v in t.items()} for k, t in samples.items()}
    # "mixed": the lint's compiled µs over the pure translator (a build with lint/ compiled alone), derived
    print(
        f"\n{'direction':30} {'pure alone':>10} {'+lint µs':>8} {'share':>6}"
        f" {'comp alone':>10} {'+lint µs':>8} {'share':>6} {'mixed':>6}"
    )
    shares: dict[str, list[float]] = {"pure": [], "compiled": [], "mixed (lint compiled, translator pure)": []}
    for d in med["pure alone"]:
        pa, ca = med["pure alone"][d], med["compiled alone"][d]
        pl, cl = med["pure lint"][d] - pa, med["compiled lint"][d] - ca
        shares["pure"].append(pl / pa)
        shares["compiled"].append(cl / ca)
        shares["mixed (lint compiled, translator pure)"].append(cl / pa)
        print(f"{d:30} {pa:10.2f} {pl:8.2f} {pl / pa:6.0%} {ca:10.2f} {cl:8.2f} {cl / ca:6.0%} {cl / pa:6.0%}")
    for k, v in shares.items():
        print(f"lint share {k}: median {statistics.median(v):.0%}, max {max(v):.0%} (goal < 20 %)")
    print(f"load average {min(loads):.2f}-{max(loads):.2f} over the run")
    return 0


def mitmdump(a: argparse.Namespace) -> int:
    """One 20,000-event stream per route and round through mitmdump (pinned to core 0), routes interleaved:
    pass-through (Chat client, Chat upstream), then pure and compiled Dragoman for anthropic<-chat and
    responses<-chat (one mitmdump each, target Chat). mitmdump CPU µs per upstream event and events/s."""
    sys.path.insert(0, str(BENCH))
    import tempfile

    import procs
    import streams

    import mitm

    procs.pin_self(1)
    workdir = Path(tempfile.mkdtemp(prefix="dragoman-mypyc-"))
    started: list = []
    loads = [os.getloadavg()[0]]
    try:
        up = procs.start_upstream(1, [20, a.events])
        started.append(up)
        mdump = str(Path(a.python).parent / "mitmdump")

        def start(name: str, script: Path, sets: dict[str, str], env: dict[str, str] | None = None):
            p = procs.start_mitmdump(name, mdump, up.port, script, sets, 0, workdir, env)
            started.append(p)
            return p

        c_, a_, r_ = streams.CHAT, streams.ANTHROPIC, streams.RESPONSES
        pt = start("pass-through", mitm.PASSTHROUGH_SCRIPT, {})
        pure = start("pure", mitm.DRAGOMAN_SCRIPT, mitm.dragoman_sets(c_, up.port), {"PYTHONPATH": str(REPO / "addon")})
        copy = Path(a.dir).resolve() / "addon"
        comp = start("compiled", copy / "dragoman.py", mitm.dragoman_sets(c_, up.port), {"PYTHONPATH": str(copy)})
        routes = [mitm.Route("pass-through chat", "passthrough", c_, c_, pt.port, pt)]
        for cl in (a_, r_):
            d = mitm.direction_key(cl, c_)
            routes.append(mitm.Route(f"pure {d}", "dragoman", cl, c_, pure.port, pure))
            routes.append(mitm.Route(f"compiled {d}", "dragoman", cl, c_, comp.port, comp))
        res = mitm.bench_streams(
            routes, a.events, a.rounds, 1, 0, 20, 200, log=lambda m: loads.append(os.getloadavg()[0])
        )
        for proc in (pure, comp):  # the compiled copy's .so files really are what that mitmdump runs
            maps = Path(f"/proc/{proc.pid}/maps").read_text()
            sos = {ln.split()[-1] for ln in maps.splitlines() if "dragoman" in ln and ln.endswith(".so")}
            print(f"{proc.name} mitmdump: {len(sos)} Dragoman .so files mapped", flush=True)
    finally:
        for p in started:
            p.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    rs = res["routes"]
    base = rs["pass-through chat"]["cpu_us_per_event"]["median"]
    print(f"\n{'route':30} {'CPU µs/event':>22} {'x pass-through':>14} {'events/s':>18}")
    for k, r in rs.items():
        if r.get("problem"):
            print(f"{k:30} problem: {r['problem']}")
            continue
        c, e = r["cpu_us_per_event"], r["events_per_s"]
        span = f"{c['median']:.1f} ({c['min']:.1f}-{c['max']:.1f})"
        eps = f"{e['median']:,.0f} ({e['min']:,.0f}-{e['max']:,.0f})"
        print(f"{k:30} {span:>22} {c['median'] / base:14.2f} {eps:>18}")
    for cl in (a_, r_):
        d = mitm.direction_key(cl, c_)
        p_, c2 = rs[f"pure {d}"], rs[f"compiled {d}"]
        if not (p_.get("problem") or c2.get("problem")):
            pc, cc = p_["cpu_us_per_event"]["median"], c2["cpu_us_per_event"]["median"]
            print(f"{d}: Dragoman's own CPU over pass-through {pc - base:.1f} -> {cc - base:.1f} µs/event")
    print(f"load average {min(loads):.2f}-{max(loads):.2f} over the run; {a.rounds} rounds of {a.events:,} events")
    return 0


def _table(unit: str, samples: dict[str, dict[str, list[float]]], loads: list[float]) -> None:
    print(f"\n{'direction (client<-upstream)':36} {'pure ' + unit:>14} {'compiled':>10} {'ratio':>6}")
    ratios = []
    for d, ps in samples["pure"].items():
        cs = samples["compiled"].get(d)
        if not cs:
            continue
        p, c = statistics.median(ps), statistics.median(cs)
        if "floor" not in d:  # orjson's floor is the control: the same in both
            ratios.append(c / p)
        print(f"{d:36} {p:14.2f} {c:10.2f} {c / p:6.2f}")
    if ratios:
        print(
            f"ratio compiled/pure (floors left out): median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}"
        )
    print(f"load average {min(loads):.2f}-{max(loads):.2f} over the run")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="copy addon/ to DIR and compile a module set there")
    b.add_argument("dir")
    b.add_argument("--python", default=sys.executable, help="the interpreter to build for (needs mypy, setuptools)")
    b.add_argument("--set", default="hot", help="comma list of: " + ", ".join(SETS))
    m = sub.add_parser("mitmdump", help="one stream through mitmdump: pass-through, pure, DIR's compiled copy")
    m.add_argument("dir")
    m.add_argument("--python", default=sys.executable)
    m.add_argument("--rounds", type=int, default=5)
    m.add_argument("--events", type=int, default=20000)
    for name in ("translator", "lint"):
        p = sub.add_parser(name, help=f"{name} bench, pure vs DIR's compiled copy, interleaved")
        p.add_argument("dir")
        p.add_argument("--python", default=sys.executable)
        p.add_argument("--rounds", type=int, default=3)
        p.add_argument("--events", type=int, default=2000)
        p.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    return {"build": build, "translator": translator, "lint": lint, "mitmdump": mitmdump}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
