"""Prompt caching across protocols (issue 36): the share of input tokens read from cache in a 10-turn session.

    .venv/bin/python bench/caching.py [--turns 10] [--main /work/main] [--out bench/results/caching.json]

A real mitmdump (reverse mode) in front of ``cache_fake.CachingAnthropic``, a fake Anthropic upstream that caches
as the API documents (a read only for a prefix covered by a breakpoint or automatic caching, within its TTL).
Two sessions drive it, each a 10-turn agent loop whose history grows by one tool call and its ~500-token output
per turn:

* codex: a Codex-style Responses session (streamed, ~3,000-token ``instructions``, 6 tools, ``prompt_cache_key``);
* chat: a Chat Completions session (whole answers, a system message, the same tools).

Per variant: ``main`` (the checkout given by --main, as it was before issue 36: nothing asks Anthropic to cache),
then this tree with the upstream's ``cache`` set to ``off``, ``breakpoints`` and ``auto``. The share is computed
twice: from the usage the CLIENT saw in its own protocol (Responses ``input_tokens_details.cached_tokens``, Chat
``prompt_tokens_details.cached_tokens``) and from the fake's own ledger (the ground truth); both are printed.
Numbers are printed and written to bench/results/caching.json; never asserted.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import procs  # noqa: E402
from cache_fake import CachingAnthropic  # noqa: E402

BENCH = Path(__file__).parent
SCRIPT = BENCH.parent / "addon" / "dragoman.py"
INSTRUCTIONS = "You are a coding agent running in a terminal. " + " ".join(
    f"Rule {i}: keep edits small, run the tests, explain what changed and why, never touch unrelated files."
    for i in range(120)
)
TOOLS = [
    {
        "type": "function",
        "name": name,
        "description": f"{name}: " + "runs the given command in the workspace and returns its output. " * 6,
        "parameters": {
            "type": "object",
            "properties": {"cmd": {"type": "string", "description": "the command line"}, "workdir": {"type": "string"}},
            "required": ["cmd"],
        },
    }
    for name in ("exec_command", "read_file", "write_file", "list_dir", "search", "apply_patch")
]


def tool_output(turn: int) -> str:
    return "\n".join(f"line {turn}.{i}: src/module_{i}.py ok, 3 functions, 120 lines" for i in range(40))


def post(port: int, path: str, body: dict) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(
            "POST", path, json.dumps(body), {"content-type": "application/json", "authorization": "Bearer sk-bench"}
        )
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def sse_events(data: bytes) -> list[dict]:
    out = []
    for line in data.decode().splitlines():
        if line.startswith("data: ") and line[6:] != "[DONE]":
            out.append(json.loads(line[6:]))
    return out


def codex_session(port: int, turns: int) -> list[tuple[int, int]]:
    """(input tokens, cached tokens) per turn as the Responses client saw them."""
    items: list[dict] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the failing test"}]}
    ]
    seen = []
    for turn in range(turns):
        body = {
            "model": "claude-sonnet-4-5",
            "instructions": INSTRUCTIONS,
            "input": items,
            "tools": TOOLS,
            "stream": True,
            "store": False,
            "prompt_cache_key": "0199a8c2-codex-session",
        }
        status, data = post(port, "/v1/responses", body)
        if status != 200:
            raise RuntimeError(f"turn {turn}: HTTP {status} {data[:300]!r}")
        done = [e for e in sse_events(data) if e.get("type") == "response.completed"][-1]["response"]
        usage = done["usage"]
        seen.append((usage["input_tokens"], (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0))
        call = next(o for o in done["output"] if o["type"] == "function_call")
        items.append(
            {"type": "function_call", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]}
        )
        items.append({"type": "function_call_output", "call_id": call["call_id"], "output": tool_output(turn)})
    return seen


def chat_session(port: int, turns: int) -> list[tuple[int, int]]:
    messages: list[dict] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": "fix the failing test"},
    ]
    tools = [{"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}} for t in TOOLS]
    seen = []
    for turn in range(turns):
        status, data = post(
            port, "/v1/chat/completions", {"model": "claude-sonnet-4-5", "messages": messages, "tools": tools}
        )
        if status != 200:
            raise RuntimeError(f"turn {turn}: HTTP {status} {data[:300]!r}")
        obj = json.loads(data)
        usage = obj["usage"]
        seen.append((usage["prompt_tokens"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0))
        msg = obj["choices"][0]["message"]
        messages.append({"role": "assistant", "content": msg.get("content"), "tool_calls": msg["tool_calls"]})
        messages.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": tool_output(turn)})
    return seen


def start(
    workdir: Path, name: str, up_port: int, sets: dict[str, str], env: dict[str, str], script: Path
) -> procs.Proc:
    port = procs.free_port()
    log = workdir / f"{name}.log"
    cmd = [
        str(Path(sys.executable).parent / "mitmdump"),
        "--mode",
        f"reverse:http://127.0.0.1:{up_port}",
        "--listen-host",
        "127.0.0.1",
        "--listen-port",
        str(port),
        "--set",
        f"confdir={workdir / 'confdir'}",
        "--set",
        "termlog_verbosity=warn",
        "--set",
        "flow_detail=0",
        "-s",
        str(script),
    ]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    with open(log, "wb") as fh:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **env})
    proc = procs.Proc(name, p, port, log)
    procs.wait_port(port, proc)
    return proc


def run_variant(workdir: Path, variant: str, main: Path | None, turns: int) -> dict:
    rec: dict = {"variant": variant}
    for session, fn in (("codex", codex_session), ("chat", chat_session)):
        with CachingAnthropic() as up:
            base = f"http://127.0.0.1:{up.port}"
            if variant == "main":
                assert main is not None
                sets = {"dragoman_target": "anthropic", "dragoman_upstream": base, "dragoman_ledger": "off"}
                # mitmproxy puts the script's folder first on sys.path: main's script loads main's package
                env, script = {"PYTHONPATH": str(main / "addon")}, main / "addon" / "dragoman.py"
            else:
                routes = workdir / f"routes-{variant}.yaml"
                routes.write_text(
                    f"upstreams:\n  - {{name: claude, protocol: anthropic, base_url: '{base}', cache: {variant}}}\n"
                    "routes:\n  - {match: '*', to: claude}\n"
                )
                sets, env, script = {"dragoman_config": str(routes), "dragoman_ledger": "off"}, {}, SCRIPT
            proc = start(workdir, f"{variant}-{session}", up.port, sets, env, script)
            try:
                seen = fn(proc.port, turns)
            finally:
                proc.stop()
            client_in, client_cached = sum(s[0] for s in seen), sum(s[1] for s in seen)
            total = sum(
                u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in up.ledger
            )
            read = sum(u["cache_read_input_tokens"] for u in up.ledger)
            written = sum(u["cache_creation_input_tokens"] for u in up.ledger)
            rec[session] = {
                "turns": len(seen),
                "client_input_tokens": client_in,
                "client_cached_tokens": client_cached,
                "client_cached_share": round(client_cached / client_in, 3) if client_in else 0.0,
                "upstream_input_tokens": total,
                "upstream_cache_read": read,
                "upstream_cache_write": written,
                "upstream_read_share": round(read / total, 3) if total else 0.0,
                "per_turn_cached": [s[1] for s in seen],
            }
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--main", default="/work/main", help="a checkout without issue 36 ('' to skip the before run)")
    ap.add_argument("--out", default=str(BENCH / "results" / "caching.json"))
    args = ap.parse_args(argv)
    main_dir = Path(args.main) if args.main and (Path(args.main) / "addon" / "dragoman").is_dir() else None
    variants = (["main"] if main_dir else []) + ["off", "breakpoints", "auto"]
    results = []
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-caching-") as tmp:
        for v in variants:
            rec = run_variant(Path(tmp), v, main_dir, args.turns)
            results.append(rec)
            for s in ("codex", "chat"):
                r = rec[s]
                print(
                    f"caching {v:11s} {s:5s} {r['turns']} turns: cached share (client's usage) {r['client_cached_share']:.1%}"
                    f" of {r['client_input_tokens']} input tokens; upstream read {r['upstream_read_share']:.1%}"
                    f" (read {r['upstream_cache_read']}, written {r['upstream_cache_write']})",
                    flush=True,
                )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"turns": args.turns, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
