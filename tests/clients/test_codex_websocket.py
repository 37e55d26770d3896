"""The real Codex CLI over its Responses WebSocket (a custom provider with ``supports_websockets``) through
Dragoman on an Anthropic upstream: the upgrade is accepted (no 426, no fallback to HTTP), a tool loop runs
over the socket, and its second turn reaches the upstream with the whole history."""

from __future__ import annotations

import pytest
from agent_upstream import COMMAND
from agent_upstream import COMMAND_OUTPUT
from agent_upstream import FINAL_MARK
from agent_upstream import summary
from agent_upstream import tool_results
from npm_clients import explain
from npm_clients import run_codex

pytestmark = [pytest.mark.e2e, pytest.mark.clients]


@pytest.mark.parametrize("target", ["anthropic", "openai-chat"])
def test_codex_tool_loop_over_websocket(target, npm_clients, agent, dragoman, tmp_path):
    proxy = dragoman(target)
    before = len(proxy.log())  # the proxy is shared by the session: only this test's lines count
    run = run_codex(
        npm_clients,
        f"http://127.0.0.1:{proxy.port}/v1",
        f"run {COMMAND}",
        tmp_path / "work",
        tmp_path / "codex-home",
        model="gpt-5.5",
        websockets=True,
    )
    log = proxy.log()[before:]
    why = explain(run, summary(agent.requests), log)
    assert run.returncode == 0, why
    assert FINAL_MARK in run.stdout and COMMAND_OUTPUT in run.stdout, why
    assert "Responses WebSocket accepted" in log and "refused (426)" not in log, why
    assert "Falling back from WebSockets" not in run.stderr, why
    assert not [line for line in log.splitlines() if ": POST http" in line], why  # every turn went over the socket
    reqs = agent.model_requests()
    assert [r.protocol for r in reqs] == [target, target], why
    results = tool_results(target, reqs[1].body)
    assert len(results) == 1 and COMMAND_OUTPUT in results[0], why
