"""The real Codex CLI (npm, pinned) through Dragoman on Anthropic and Chat upstreams: tool loops.

Codex speaks only Responses (``wire_api = "responses"``, a custom ``[model_providers.dragoman]``). The
request shape depends on the model slug: the default model uses "code mode" (no top-level tools; an
``additional_tools`` input item; the freeform JavaScript tool ``exec``), ``gpt-5.5`` uses classic
top-level tools (``exec_command`` and the freeform ``apply_patch``). Freeform tools reach the upstream as
a function with one string property and must come back to Codex as ``custom_tool_call`` items.
"""

from __future__ import annotations

import json

import pytest
from agent_upstream import COMMAND
from agent_upstream import COMMAND_OUTPUT
from agent_upstream import EXEC_JS
from agent_upstream import FINAL_MARK
from agent_upstream import PATCH_FILE
from agent_upstream import PATCH_LINE
from agent_upstream import PATCH_TEXT
from agent_upstream import SIGNATURE
from agent_upstream import THINKING
from agent_upstream import offered_tools
from agent_upstream import summary
from agent_upstream import tool_results
from npm_clients import explain
from npm_clients import run_codex

pytestmark = [pytest.mark.e2e, pytest.mark.clients]

TARGETS = ["anthropic", "openai-chat"]
MODELS = [pytest.param(None, id="default-code-mode"), pytest.param("gpt-5.5", id="gpt-5.5")]
#: an unknown slug (Codex's fallback metadata: namespaced multi_agent_v1 tools, no apply_patch), the
#: natural choice for someone running Codex on Claude without a model map
CLAUDE_SLUG = "claude-sonnet-4-5"


def assistant_calls(target: str, body: dict) -> list[tuple[str, dict]]:
    """(tool name, parsed arguments) of every tool call in the assistant history of an upstream request."""
    out = []
    for m in body.get("messages") or []:
        if m.get("role") != "assistant":
            continue
        if target == "anthropic":
            content = m.get("content")
            for b in content if isinstance(content, list) else []:
                if b.get("type") == "tool_use":
                    out.append((b["name"], b["input"]))
        else:
            for tc in m.get("tool_calls") or []:
                out.append((tc["function"]["name"], json.loads(tc["function"]["arguments"])))
    return out


def tool_spec(target: str, body: dict, name: str) -> str:
    """The JSON text of the tool ``name`` as offered to the upstream ("" if absent)."""
    for t in body.get("tools") or []:
        if (t.get("name") if target == "anthropic" else (t.get("function") or {}).get("name")) == name:
            return json.dumps(t)
    return ""


def _run(npm_clients, agent, dragoman, tmp_path, target, model, prompt):
    proxy = dragoman(target)
    run = run_codex(
        npm_clients,
        f"http://127.0.0.1:{proxy.port}/v1",
        prompt,
        tmp_path / "work",
        tmp_path / "codex-home",
        model=model,
    )
    reqs = agent.model_requests()
    return run, reqs, explain(run, summary(agent.requests), proxy.log())


@pytest.mark.parametrize("model", [*MODELS, pytest.param(CLAUDE_SLUG, id=CLAUDE_SLUG)])
@pytest.mark.parametrize("target", TARGETS)
def test_codex_shell_tool_loop(target, model, npm_clients, agent, dragoman, tmp_path):
    run, reqs, why = _run(npm_clients, agent, dragoman, tmp_path, target, model, f"run {COMMAND}")

    assert run.returncode == 0, why
    assert FINAL_MARK in run.stdout and COMMAND_OUTPUT in run.stdout, why
    assert [r.protocol for r in reqs] == [target, target], why
    assert [r.body.get("stream") for r in reqs] == [True, True], why
    first, second = reqs
    tools = offered_tools(target, first.body)
    if model is None:
        # code mode: the freeform `exec` from the additional_tools item, as a function with one string
        assert "exec" in tools and "exec_command" not in tools, why
        schema = tools["exec"][1]
        assert schema.get("required") == ["input"] and schema["properties"]["input"]["type"] == "string", why
        assert assistant_calls(target, second.body) == [("exec", {"input": EXEC_JS})], why
    else:
        assert "exec_command" in tools and ("apply_patch" in tools) == (model == "gpt-5.5"), why
        assert [(n, a.get("cmd")) for n, a in assistant_calls(target, second.body)] == [("exec_command", COMMAND)], why
    results = tool_results(target, second.body)
    assert len(results) == 1 and COMMAND_OUTPUT in results[0], why


@pytest.mark.parametrize("target", TARGETS)
def test_codex_apply_patch_creates_file(target, npm_clients, agent, dragoman, tmp_path):
    agent.reset(patch=True, log_path=tmp_path / "upstream.jsonl")
    run, reqs, why = _run(npm_clients, agent, dragoman, tmp_path, target, "gpt-5.5", f"create the file {PATCH_FILE}")

    assert run.returncode == 0, why
    assert (tmp_path / "work" / PATCH_FILE).read_text() == PATCH_LINE + "\n", why
    assert FINAL_MARK in run.stdout, why
    assert len(reqs) == 2, why
    # the lark grammar is apply_patch's only spec of the patch format: it must reach the model
    assert "begin_patch" in tool_spec(target, reqs[0].body, "apply_patch"), why
    # the freeform call went back to the upstream with the raw patch as its one string argument
    assert assistant_calls(target, reqs[1].body) == [("apply_patch", {"input": PATCH_TEXT})], why
    results = tool_results(target, reqs[1].body)
    assert len(results) == 1 and PATCH_FILE in results[0], why


@pytest.mark.parametrize("model", MODELS)
def test_codex_thinking_signature_round_trip(model, npm_clients, agent, dragoman, tmp_path):
    """Codex -> Dragoman -> Anthropic (signed thinking) -> Dragoman -> Codex (reasoning item with
    encrypted_content) -> Dragoman -> Anthropic: the upstream gets the original thinking block back."""
    agent.reset(thinking=True, log_path=tmp_path / "upstream.jsonl")
    run, reqs, why = _run(npm_clients, agent, dragoman, tmp_path, "anthropic", model, f"run {COMMAND}")

    assert run.returncode == 0, why
    assert FINAL_MARK in run.stdout and COMMAND_OUTPUT in run.stdout, why
    assert len(reqs) == 2, why
    assert reqs[0].body.get("thinking", {}).get("type") == "enabled", why
    assistant = [m for m in reqs[1].body["messages"] if m.get("role") == "assistant"]
    assert len(assistant) == 1, why
    blocks = assistant[0]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "tool_use"], why
    assert blocks[0] == {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE}, why

    # a new Codex process resumes the session from its rollout file: the next turn still carries it
    proxy = dragoman("anthropic")
    run2 = run_codex(
        npm_clients,
        f"http://127.0.0.1:{proxy.port}/v1",
        "say it again",
        tmp_path / "work",
        tmp_path / "codex-home",
        model=model,
        resume=True,
    )
    reqs = agent.model_requests()
    why = explain(run2, summary(agent.requests), proxy.log())
    assert run2.returncode == 0, why
    assert FINAL_MARK in run2.stdout, why
    assert len(reqs) == 3, why
    history = [
        b
        for m in reqs[2].body["messages"]
        if m.get("role") == "assistant"
        for b in m["content"]
        if b.get("type") == "thinking"
    ]
    assert history == [{"type": "thinking", "thinking": THINKING, "signature": SIGNATURE}], why


@pytest.mark.parametrize("model", MODELS)
def test_codex_chat_reasoning_round_trip(model, npm_clients, agent, dragoman, tmp_path):
    """Chat ``reasoning_content`` -> a Codex reasoning item -> ``reasoning_content`` on the next request."""
    agent.reset(thinking=True, log_path=tmp_path / "upstream.jsonl")
    run, reqs, why = _run(npm_clients, agent, dragoman, tmp_path, "openai-chat", model, f"run {COMMAND}")

    assert run.returncode == 0, why
    assert FINAL_MARK in run.stdout and COMMAND_OUTPUT in run.stdout, why
    assert len(reqs) == 2, why
    assistant = [m for m in reqs[1].body["messages"] if m.get("role") == "assistant"]
    assert [m.get("reasoning_content") for m in assistant] == [THINKING], why
