"""Context overflow with the real CLIs (issue 36): Claude Code and Codex through Dragoman to a Chat upstream whose
model has a small window and answers overflows the vLLM/DeepSeek way (``overflow_upstream``).

* Claude Code gets ``prompt is too long: M tokens > N maximum``, compacts (its reactive compaction) and finishes
  the task. On main it got the upstream's sentence verbatim and stopped with "API Error: 400" (measured by hand
  with this fake: see docs/caching-and-limits.md).
* With the window declared in the routes file, Dragoman answers the overflow itself (no upstream call) and clamps
  Claude Code's ``max_tokens`` (64000) to what the window leaves; the session finishes the same way.
* Codex gets code ``context_length_exceeded`` and reports its own context-window error (on main: the raw JSON).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from npm_clients import explain
from npm_clients import run_claude
from npm_clients import run_codex
from overflow_upstream import BIG_FILES
from overflow_upstream import FINAL_MARK
from overflow_upstream import OverflowUpstream

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import caching  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.clients]

#: Claude Code's first request is ~19,300 tokens as the fake counts; each file read adds ~6,000
CLAUDE_WINDOW = 30000
#: Codex's first request is ~9,400 tokens; each file read adds ~2,650 (Codex truncates the output)
CODEX_WINDOW = 13000
PROMPT = "Run the commands you are told to run, one by one."


def _work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    rows = "\n".join(f"row {i}: the quick brown fox jumps over the lazy dog {i * 7919 % 10007}" for i in range(400))
    for name in BIG_FILES:
        (work / name).write_text(rows)  # ~25 KB: under Claude Code's 30,000-character inline tool output
    return work


def _proxy(tmp_path: Path, up: OverflowUpstream, declared: int | None):
    routes = tmp_path / "routes.yaml"
    routes.write_text(
        f"upstreams:\n  - {{name: local, protocol: openai-chat, base_url: '{up.url}/v1'}}\n"
        "routes:\n  - {match: '*', to: local/qwen3}\n"
        + (f"models:\n  - {{match: qwen3, context_window: {declared}}}\n" if declared else "")
    )
    return caching.start(tmp_path, "mitmdump", up.port, {"dragoman_config": str(routes)}, {}, caching.SCRIPT)


def _summary(up: OverflowUpstream) -> str:
    lines = []
    for status, n, body in up.requests:
        msgs = body.get("messages") or []
        last = str(msgs[-1].get("content"))[:70] if msgs else ""
        lines.append(
            f"  {status} {n} tokens, max_tokens={body.get('max_tokens')}, {len(msgs)} messages, last: {last!r}"
        )
    return "\n".join(lines)


def _claude(npm_clients, tmp_path: Path, declared: int | None):
    work = _work(tmp_path)
    with OverflowUpstream(CLAUDE_WINDOW) as up:
        proc = _proxy(tmp_path, up, declared)
        try:
            run = run_claude(
                npm_clients,
                f"http://127.0.0.1:{proc.port}",
                PROMPT,
                work,
                tmp_path / "home",
                ["--allowedTools", "Bash"],
                timeout=240,
            )
        finally:
            proc.stop()
        return run, list(up.requests), explain(run, _summary(up), proc.log_tail(8000)), proc.log_tail(200000)


def test_claude_code_compacts_past_a_vllm_overflow_and_finishes(npm_clients, tmp_path):
    run, requests, why, log = _claude(npm_clients, tmp_path, declared=None)
    statuses = [s for s, _n, _b in requests]
    assert 400 in statuses, why  # the upstream answered an overflow the vLLM way
    first = statuses.index(400)
    # after it: Claude Code's compaction request (a summary asked for) and the continued session, all fitting
    after = requests[first + 1 :]
    assert any("summar" in str((b.get("messages") or [{}])[-1].get("content")).lower() for _s, _n, b in after), why
    assert after and all(s == 200 for s, _n, _b in after), why
    assert FINAL_MARK in run.stdout and run.returncode == 0, why
    assert "context overflow (prompt" in log and "original message: This model's maximum context length" in log


def test_claude_code_with_a_declared_window_is_answered_locally_and_clamped(npm_clients, tmp_path):
    run, requests, why, log = _claude(npm_clients, tmp_path, declared=CLAUDE_WINDOW)
    assert FINAL_MARK in run.stdout and run.returncode == 0, why
    # the overflow was answered by Dragoman from its estimate: no request over the window was spent upstream
    assert all(s == 200 for s, _n, _b in requests), why
    assert "Dragoman's estimate of the input against the context window" in log, why
    # Claude Code asks for 64000 output tokens; each request got what the window leaves after its input
    assert all(b["max_tokens"] < CLAUDE_WINDOW for _s, _n, b in requests), why
    assert "adjusted to the model's declared limits: max_tokens 64000 -> " in log, why


def test_codex_gets_its_own_context_window_error_from_a_vllm_overflow(npm_clients, tmp_path):
    work = _work(tmp_path)
    with OverflowUpstream(CODEX_WINDOW, tool="exec_command") as up:
        proc = _proxy(tmp_path, up, None)
        try:
            run = run_codex(
                npm_clients,
                f"http://127.0.0.1:{proc.port}/v1",
                PROMPT,
                work,
                tmp_path / "codex",
                model="qwen3",
                timeout=240,
            )
        finally:
            proc.stop()
        why = explain(run, _summary(up), proc.log_tail(8000))
        assert 400 in [s for s, _n, _b in up.requests], why
    # Codex's ContextWindowExceeded, which only code context_length_exceeded gives (main: the raw upstream JSON)
    assert "ran out of room in the model's context window" in run.stderr, why
    assert "BadRequestError" not in run.stderr, why
