"""Gemini's protocol with real CLIs: the real Gemini CLI (npm) through Dragoman on Anthropic and Chat fake
upstreams, and the real Claude Code and Codex on a Gemini fake upstream; each completes a shell tool loop.

Gemini CLI -> mitmdump + addon -> fake agent upstream: its routing call (structured output) gets a JSON answer,
the turn gets a ``run_shell_command`` call, the CLI runs it and sends the result, the agent answers a final
text quoting the output.
"""

from __future__ import annotations

import json

import pytest
from agent_upstream import COMMAND
from agent_upstream import COMMAND_OUTPUT
from agent_upstream import FINAL_MARK
from agent_upstream import offered_tools
from agent_upstream import run_claude_loop
from agent_upstream import summary
from agent_upstream import tool_results
from gemini_cli import ensure_gemini
from gemini_cli import run_gemini
from npm_clients import ClientsUnavailable
from npm_clients import explain
from npm_clients import run_codex

from dragoman.demo.gemini import THOUGHT_SIGNATURE

pytestmark = [pytest.mark.e2e, pytest.mark.clients]


@pytest.fixture(scope="session")
def gemini_exe():
    try:
        return ensure_gemini()
    except ClientsUnavailable as e:
        pytest.skip(f"Gemini CLI unavailable: {e}")


@pytest.mark.parametrize("target", ["anthropic", "openai-chat"])
def test_gemini_cli_shell_tool_loop(target, gemini_exe, agent, dragoman, tmp_path):
    proxy = dragoman(target)
    run = run_gemini(
        gemini_exe,
        f"http://127.0.0.1:{proxy.port}",
        f"run the shell command: {COMMAND}",
        tmp_path / "work",
        tmp_path / "home",
    )
    reqs = agent.model_requests()
    why = explain(run, summary(agent.requests), proxy.log())
    assert run.returncode == 0, why
    out = json.loads(run.stdout[run.stdout.index("{") :])
    assert FINAL_MARK in out["response"] and COMMAND_OUTPUT in out["response"], why
    turns = [r for r in reqs if offered_tools(target, r.body)]
    assert len(turns) == 2 and all(r.protocol == target for r in reqs), why
    assert "run_shell_command" in offered_tools(target, turns[0].body), why
    (result,) = tool_results(target, turns[1].body)
    assert f"Output: {COMMAND_OUTPUT}" in result, why  # Gemini CLI wraps a command's output in its own frame
    assert all(r.body.get("stream") for r in turns), why
    # its routing call (structured output, no tools) went out as the upstream's structured-output request
    (routing,) = [r for r in reqs if not offered_tools(target, r.body)]
    assert routing.body.get("output_config" if target == "anthropic" else "response_format"), why


def _gemini_turns(reqs) -> list[dict]:
    return [r.body for r in reqs if r.protocol == "gemini"]


def _model_calls(body: dict) -> list[dict]:
    return [p for c in body["contents"] if c["role"] == "model" for p in c["parts"] if "functionCall" in p]


def test_claude_code_on_gemini(npm_clients, agent, dragoman, tmp_path):
    proxy = dragoman("gemini")
    run = run_claude_loop(npm_clients, proxy.port, tmp_path)
    reqs = agent.model_requests()
    why = explain(run, summary(agent.requests), proxy.log())
    assert run.returncode == 0, why
    result = json.loads(run.stdout)
    assert FINAL_MARK in result["result"] and COMMAND_OUTPUT in result["result"], why
    turns = [b for b in _gemini_turns(reqs) if offered_tools("gemini", b)]
    assert len(turns) == 2, why
    (call,) = _model_calls(turns[1])
    assert call["functionCall"]["name"] == "Bash" and call["functionCall"]["args"]["command"] == COMMAND, why
    assert call.get("thoughtSignature") == THOUGHT_SIGNATURE, why  # Gemini's signature came back on its call
    assert [t.strip() for t in tool_results("gemini", turns[1])] == [COMMAND_OUTPUT], why


def test_codex_on_gemini(npm_clients, agent, dragoman, tmp_path):
    proxy = dragoman("gemini")
    run = run_codex(
        npm_clients,
        f"http://127.0.0.1:{proxy.port}/v1",
        f"run {COMMAND}",
        tmp_path / "work",
        tmp_path / "codex-home",
        model="gpt-5.5",
    )
    reqs = agent.model_requests()
    why = explain(run, summary(agent.requests), proxy.log())
    assert run.returncode == 0, why
    assert FINAL_MARK in run.stdout and COMMAND_OUTPUT in run.stdout, why
    turns = _gemini_turns(reqs)
    assert len(turns) == 2, why
    (call,) = _model_calls(turns[1])
    assert call["functionCall"]["name"] == "exec_command" and call.get("thoughtSignature") == THOUGHT_SIGNATURE, why
    assert len(tool_results("gemini", turns[1])) == 1 and COMMAND_OUTPUT in tool_results("gemini", turns[1])[0], why
