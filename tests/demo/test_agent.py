"""The ``agent`` scenario: one tool call picked from the tools offered, then a final text after the tool ran."""

from __future__ import annotations

import json

import pytest

from dragoman.demo import agent as ag
from dragoman.demo.wire import ANTHROPIC
from dragoman.demo.wire import CHAT
from dragoman.demo.wire import RESPONSES
from dragoman.demo.wire import Request
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr

STREAM = {ANTHROPIC: va.validate_stream, CHAT: vc.validate_stream, RESPONSES: vr.validate_stream}
WHOLE = {ANTHROPIC: va.validate_message, CHAT: vc.validate_completion, RESPONSES: vr.validate_response}
SCHEMA = {"type": "object", "properties": {"cmd": {"type": "string"}}}

#: a first request offering ``exec_command`` (and an unrelated tool), and its follow-up carrying the tool's output
TURNS = {
    ANTHROPIC: (
        {"tools": [{"name": "Read", "input_schema": {}}, {"name": "exec_command", "input_schema": SCHEMA}]},
        {
            "messages": [
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "dragoman-ok\n"}]}
            ]
        },
    ),
    CHAT: (
        {"tools": [{"type": "function", "function": {"name": "exec_command", "parameters": SCHEMA}}]},
        {"messages": [{"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "dragoman-ok"}]}]},
    ),
    RESPONSES: (
        {
            "tools": [
                {"type": "namespace", "tools": [{"type": "function", "name": "exec_command", "parameters": SCHEMA}]}
            ]
        },
        {"input": [{"type": "function_call_output", "call_id": "c", "output": "dragoman-ok"}]},
    ),
}


def run(agent, protocol, body, stream):
    reply = agent(Request.of(protocol, {"model": "m", "stream": stream, **body}))
    if stream:
        return STREAM[protocol](b"".join(reply.events))
    return WHOLE[protocol](reply.json_body)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("protocol", list(TURNS))
def test_tool_loop(protocol, stream):
    agent = ag.Agent(thinking=True)
    first, second = TURNS[protocol]
    got = run(agent, protocol, first, stream)
    assert [(c.name, c.parsed()) for c in got.tool_calls] == [("exec_command", {"cmd": ag.COMMAND})]
    assert got.stop_reason in ("tool_use", "tool_calls", "completed")
    if protocol == ANTHROPIC:
        assert got.thinking == ag.THINKING and got.signatures == [ag.SIGNATURE]
    elif protocol == CHAT:
        assert got.thinking == ag.THINKING
    else:
        assert got.thinking == ag.REASONING_SUMMARY
    got = run(agent, protocol, second, stream)
    assert got.text == f"{ag.FINAL_MARK}: the tool printed {ag.COMMAND_OUTPUT}"
    assert not got.tool_calls and not got.thinking


def test_ids_are_fresh_per_answer():
    agent = ag.Agent()
    a, b = (agent(Request.of(CHAT, {"stream": False, **TURNS[CHAT][0]})).json_body for _ in range(2))
    assert a["id"] != b["id"]
    assert a["choices"][0]["message"]["tool_calls"][0]["id"] != b["choices"][0]["message"]["tool_calls"][0]["id"]


def test_custom_tool_in_responses_is_a_custom_tool_call():
    body = {"tools": [{"type": "custom", "name": "apply_patch"}]}
    got = run(ag.Agent(patch=True), RESPONSES, body, True)
    assert [(c.kind, c.name, c.arguments) for c in got.tool_calls] == [("custom", "apply_patch", ag.PATCH_TEXT)]


def test_choose_call():
    fn = ("function", {})
    one_string = ("function", {"properties": {"patch": {"type": "string"}}})
    assert ag.choose_call({"apply_patch": one_string, "Bash": fn}, patch=True) == ag.Choice(
        "apply_patch", json.dumps({"patch": ag.PATCH_TEXT})
    )
    bash = ag.choose_call({"apply_patch": one_string, "Bash": fn}, patch=False)
    assert bash is not None and bash.name == "Bash" and json.loads(bash.arguments)["command"] == ag.COMMAND
    assert ag.choose_call({"shell": fn}, False) == ag.Choice(
        "shell", json.dumps({"command": ["bash", "-lc", ag.COMMAND]})
    )
    assert ag.choose_call({"exec": ("custom", {})}, False) == ag.Choice("exec", ag.EXEC_JS, custom=True)
    assert ag.choose_call({"Read": fn}, False) is None


def test_no_usable_tool_says_so():
    got = run(ag.Agent(), ANTHROPIC, {"tools": [{"name": "Read", "input_schema": {}}]}, False)
    assert got.text == "no usable tool offered; tools were ['Read']" and not got.tool_calls


def test_offered_tools_and_results_per_protocol():
    body = {
        "tools": [{"type": "namespace", "tools": [{"type": "function", "name": "a", "parameters": SCHEMA}]}],
        "input": [{"type": "additional_tools", "tools": [{"type": "custom", "name": "b"}]}],
    }
    assert ag.offered_tools(RESPONSES, body) == {"a": ("function", SCHEMA), "b": ("custom", {})}
    assert ag.offered_tools(ANTHROPIC, {"tools": [{"type": "web_search_20250305", "name": "web"}]}) == {}
    assert ag.tool_results(CHAT, TURNS[CHAT][1]) == ["dragoman-ok"]
    assert ag.tool_results(ANTHROPIC, TURNS[ANTHROPIC][1]) == ["dragoman-ok\n"]
