"""The real Claude Code and Codex CLI on Gemini's and DeepSeek V4's Chat-compatible endpoints (issue 24): a tool
loop through mitmdump with ``dragoman_profile`` set, against the agent upstream behind each provider's documented
400 (``provider_agent.py``). Without what the profile sends back (Gemini's thought signature on the call,
DeepSeek's ``reasoning_content`` on the assistant tool-call message) the provider refuses the second request,
which is where users met the bug; ``generic`` shows that refusal with the same clients.
"""

from __future__ import annotations

import json

import pytest
from agent_upstream import COMMAND
from agent_upstream import COMMAND_OUTPUT
from agent_upstream import FINAL_MARK
from agent_upstream import THINKING
from agent_upstream import run_claude_loop
from agent_upstream import summary
from npm_clients import explain
from npm_clients import run_codex
from provider_agent import ProviderAgentUpstream

pytestmark = [pytest.mark.e2e, pytest.mark.clients]

CASES = [
    pytest.param("gemini", False, id="gemini"),
    pytest.param("deepseek", True, id="deepseek-thinking"),
    pytest.param("deepseek", False, id="deepseek-plain"),
]


@pytest.fixture(scope="module")
def provider(e2e, tmp_path_factory):
    """``provider(kind, thinking, profile)`` -> (the agent upstream with the provider's rules, mitmdump)."""
    workdir = tmp_path_factory.mktemp("provider-clients")
    started: list = []

    def get(kind: str, thinking: bool, profile: str):
        up = ProviderAgentUpstream(kind, thinking).start()
        proxy = e2e.Proxy("openai-chat", up, workdir, ["--set", f"dragoman_profile={profile}"])
        started.append((up, proxy))
        return up, proxy

    yield get
    for up, proxy in started:
        proxy.stop()
        up.stop()


def _calls_back(body: dict) -> list[dict]:
    return [tc for m in body.get("messages") or [] if m.get("role") == "assistant" for tc in m.get("tool_calls") or []]


def _check_turn_two(kind: str, thinking: bool, up: ProviderAgentUpstream, call: tuple[str, str], why: str) -> None:
    """Turn two was accepted and carried the agent's one call (``call``: tool name, argument holding COMMAND)
    back with what the provider demands."""
    reqs = up.model_requests()
    assert up.refused == [], why
    assert len(reqs) == 2, why
    calls = _calls_back(reqs[1].body)
    name, arg = call
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"]).get(arg)) for c in calls] == [
        (name, COMMAND)
    ], why
    assistant = [m for m in reqs[1].body["messages"] if m.get("role") == "assistant" and m.get("tool_calls")]
    if kind == "gemini":
        # the very signature Gemini issued on the call came back on it
        sigs = [c["extra_content"]["google"]["thought_signature"] for c in calls]
        assert sigs == up.signatures[:1], why
    else:
        assert [m.get("reasoning_content") for m in assistant] == [THINKING if thinking else ""], why


def _claude(npm_clients, up: ProviderAgentUpstream, proxy, tmp_path) -> tuple:
    """Claude Code runs the Bash tool loop through ``proxy``: (run, failure explanation)."""
    run = run_claude_loop(npm_clients, proxy.port, tmp_path)
    return run, explain(run, summary(up.requests) + f"\nrefused: {up.refused}", proxy.log())


@pytest.mark.parametrize("kind, thinking", CASES)
def test_claude_code_tool_loop_on_provider(kind, thinking, npm_clients, provider, tmp_path):
    up, proxy = provider(kind, thinking, kind)
    run, why = _claude(npm_clients, up, proxy, tmp_path)
    assert run.returncode == 0, why
    result = json.loads(run.stdout)
    assert result.get("is_error") is False, why
    assert FINAL_MARK in result["result"] and COMMAND_OUTPUT in result["result"], why
    _check_turn_two(kind, thinking, up, ("Bash", "command"), why)


@pytest.mark.parametrize("kind, thinking", CASES)
def test_codex_tool_loop_on_provider(kind, thinking, npm_clients, provider, tmp_path):
    up, proxy = provider(kind, thinking, kind)
    run = run_codex(
        npm_clients,
        f"http://127.0.0.1:{proxy.port}/v1",
        f"run `{COMMAND}` in the shell and tell me what it printed",
        tmp_path / "work",
        tmp_path / "codex-home",
        model="gpt-5.5",
    )
    why = explain(run, summary(up.requests) + f"\nrefused: {up.refused}", proxy.log())
    assert run.returncode == 0, why
    assert FINAL_MARK in run.stdout and COMMAND_OUTPUT in run.stdout, why
    _check_turn_two(kind, thinking, up, ("exec_command", "cmd"), why)


def test_without_the_profile_claude_code_meets_geminis_400(npm_clients, provider, tmp_path):
    """The same loop with ``dragoman_profile=generic``: Gemini refuses already the first request (Claude Code's
    tool schemas carry ``$schema``, which the gemini profile removes), as users saw it."""
    up, proxy = provider("gemini", False, "generic")
    run, why = _claude(npm_clients, up, proxy, tmp_path)
    assert up.refused and '"$schema"' in up.refused[0], why
    assert len(up.model_requests()) == 1 and FINAL_MARK not in run.stdout, why
    assert json.loads(run.stdout).get("is_error") is True, why
