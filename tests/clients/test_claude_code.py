"""The real Claude Code (npm, pinned) through Dragoman on Chat and Responses upstreams: a Bash tool loop.

Claude Code -> mitmdump + addon -> fake agent upstream: request 1 gets a ``Bash`` call
(``echo dragoman-ok``), Claude Code runs it and sends request 2 with the tool result, the agent answers a
final text quoting the output, and ``claude -p --output-format json`` prints it.
"""

from __future__ import annotations

import json

import pytest
from agent_upstream import COMMAND
from agent_upstream import COMMAND_OUTPUT
from agent_upstream import ENCRYPTED
from agent_upstream import FINAL_MARK
from agent_upstream import THINKING
from agent_upstream import offered_tools
from agent_upstream import run_claude_loop
from agent_upstream import summary
from agent_upstream import tool_results
from npm_clients import explain

pytestmark = [pytest.mark.e2e, pytest.mark.clients]


def _assistant_turns(target: str, body: dict) -> list:
    if target == "openai-chat":
        return [m for m in body.get("messages") or [] if m.get("role") == "assistant"]
    return [
        it
        for it in body.get("input") or []
        if isinstance(it, dict) and it.get("type") in ("reasoning", "function_call")
    ]


@pytest.mark.parametrize("thinking", [False, True], ids=["plain", "thinking"])
@pytest.mark.parametrize("target", ["openai-chat", "openai-responses"])
def test_claude_code_bash_tool_loop(target, thinking, npm_clients, agent, dragoman, tmp_path):
    agent.reset(thinking=thinking, log_path=tmp_path / "upstream.jsonl")
    proxy = dragoman(target)
    run = run_claude_loop(npm_clients, proxy.port, tmp_path)
    reqs = agent.model_requests()
    why = explain(run, summary(agent.requests), proxy.log())

    assert run.returncode == 0, why
    result = json.loads(run.stdout)
    assert result.get("is_error") is False, why
    assert FINAL_MARK in result["result"] and COMMAND_OUTPUT in result["result"], why
    assert result.get("num_turns") == 2, why

    # exactly two upstream calls, both streamed: a non-streaming retry would mean Claude Code rejected our stream
    assert [r.protocol for r in reqs] == [target, target], why
    assert [r.body.get("stream") for r in reqs] == [True, True], why
    first, second = reqs
    assert "Bash" in offered_tools(target, first.body), why
    # Claude Code's mid-conversation role:"system" message (agent and skills list) is kept, not dropped
    if target == "openai-chat":
        system_texts = [
            str(m.get("content")) for m in first.body["messages"][1:] if m.get("role") in ("system", "developer")
        ]
    else:
        system_texts = [
            json.dumps(it.get("content"))
            for it in first.body["input"]
            if isinstance(it, dict) and it.get("role") in ("system", "developer")
        ]
    assert any("Available agent types" in t for t in system_texts), why
    assert tool_results(target, first.body) == [], why
    assert [t.strip() for t in tool_results(target, second.body)] == [COMMAND_OUTPUT], why

    # the tool call went back to the upstream as the upstream's own shape, arguments intact
    if target == "openai-chat":
        calls = [
            tc for m in second.body["messages"] if m.get("role") == "assistant" for tc in m.get("tool_calls") or []
        ]
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])["command"]) for c in calls] == [
            ("Bash", COMMAND)
        ], why
    else:
        calls = [it for it in second.body["input"] if isinstance(it, dict) and it.get("type") == "function_call"]
        assert [(c["name"], json.loads(c["arguments"])["command"]) for c in calls] == [("Bash", COMMAND)], why

    if thinking:
        turns = _assistant_turns(target, second.body)
        if target == "openai-chat":
            # Chat reasoning_content -> an (unsigned) thinking block for Claude Code -> reasoning_content again
            assert [m.get("reasoning_content") for m in turns] == [THINKING], why
        else:
            # Responses reasoning item -> thinking block whose signature carries id + encrypted_content -> restored
            reasoning = [it for it in turns if it["type"] == "reasoning"]
            assert [it.get("encrypted_content") for it in reasoning] == [ENCRYPTED], why
            assert [it["type"] for it in turns] == ["reasoning", "function_call"], why
