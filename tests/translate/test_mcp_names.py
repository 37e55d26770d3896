"""MCP tool names for an Anthropic upstream (``dragoman_mcp_prefix``, issue 30 item 5): ``mcp_x`` goes up as
``mcp__x`` in definitions, tool_choice and history, and comes back as ``mcp_x`` in whole and streamed answers,
over every chunking of the stream; a client's own ``mcp__`` names are never touched."""

from __future__ import annotations

import json
import random

import pytest

from dragoman.demo import anthropic_reply
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.translate.mcp_names import HOLD_LIMIT
from dragoman.translate.mcp_names import McpNameStream
from dragoman.translate.mcp_names import rename_request
from dragoman.translate.mcp_names import rename_response
from dragoman.translate.plan import Plan
from dragoman.translate.request import decode_client_request
from dragoman.translate.request import encode_upstream_request

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES
SCHEMA = {"type": "object", "properties": {}}


def request() -> dict:
    return {
        "model": "claude-x",
        "max_tokens": 64,
        "tools": [
            {"name": "mcp_browser_click", "input_schema": SCHEMA},
            {"name": "mcp__fs__read", "input_schema": SCHEMA},
            {"name": "bash", "input_schema": SCHEMA},
        ],
        "tool_choice": {"type": "tool", "name": "mcp_browser_click"},
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "mcp_browser_click",
                        "input": {"note": "mcp_browser_click"},
                    },
                    {"type": "tool_use", "id": "t2", "name": "mcp_old_tool", "input": {}},
                    {"type": "tool_use", "id": "t3", "name": "mcp__fs__read", "input": {}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        ],
    }


def test_request_renamed_in_definitions_choice_and_history():
    body, back = rename_request(json.dumps(request()).encode())
    sent = json.loads(body)
    assert [t["name"] for t in sent["tools"]] == ["mcp__browser_click", "mcp__fs__read", "bash"]
    assert sent["tool_choice"] == {"type": "tool", "name": "mcp__browser_click"}
    calls = sent["messages"][1]["content"]
    assert [c["name"] for c in calls] == ["mcp__browser_click", "mcp__old_tool", "mcp__fs__read"]
    assert calls[0]["input"] == {"note": "mcp_browser_click"}  # only names, never the arguments
    assert back == {"mcp__browser_click": "mcp_browser_click", "mcp__old_tool": "mcp_old_tool"}


def test_nothing_to_rename_keeps_the_bytes():
    raw = json.dumps({"model": "m", "tools": [{"name": "mcp__a__b"}, {"name": "bash"}], "messages": []}).encode()
    assert rename_request(raw) == (raw, {})
    plain = b'{"model":"m","messages":[]}'
    assert rename_request(plain) == (plain, {})


def test_a_rename_that_would_collide_is_not_made():
    raw = json.dumps({"model": "m", "tools": [{"name": "mcp_a"}, {"name": "mcp__a"}, {"name": "mcp_b"}]}).encode()
    body, back = rename_request(raw)
    assert [t["name"] for t in json.loads(body)["tools"]] == ["mcp_a", "mcp__a", "mcp__b"]
    assert back == {"mcp__b": "mcp_b"}


def test_whole_answer_renamed_back():
    back = {"mcp__browser_click": "mcp_browser_click"}
    answer = {
        "content": [
            {"type": "text", "text": "calling mcp__browser_click"},
            {"type": "tool_use", "id": "t", "name": "mcp__browser_click", "input": {"x": "mcp__browser_click"}},
            {"type": "tool_use", "id": "u", "name": "mcp__fs__read", "input": {}},
        ]
    }
    out = json.loads(rename_response(json.dumps(answer).encode(), back))
    assert [b.get("name") for b in out["content"]] == [None, "mcp_browser_click", "mcp__fs__read"]
    assert out["content"][0]["text"] == "calling mcp__browser_click"
    assert out["content"][1]["input"] == {"x": "mcp__browser_click"}
    same = b'{"content":[]}'
    assert rename_response(same, back) is same and rename_response(b"not json mcp__browser_click", back)


# -- streams ----------------------------------------------------------------------------------------------

BACK = {"mcp__browser_click": "mcp_browser_click"}


def upstream_stream(crlf: bool = False) -> bytes:
    """A real fake-upstream Anthropic stream with two tool calls, renamed as the upstream saw them."""
    events = anthropic_reply("tools", "claude-x", True).events
    raw = b"".join(events).replace(b'"get_weather"', b'"mcp__browser_click"').replace(b'"get_time"', b'"mcp__fs__read"')
    # text that quotes the name, and arguments that contain it, must stay as they are
    raw = raw.replace(b'"partial_json":"{\\"city\\""', b'"partial_json":"{\\"mcp__browser_click\\""')
    assert raw.count(b"mcp__browser_click") == 2 and raw.count(b"mcp__fs__read") == 1
    return raw.replace(b"\n", b"\r\n") if crlf else raw


def expected(raw: bytes) -> bytes:
    start = b'"content_block":{"type":"tool_use","id":"call_weather_1","name":"mcp__browser_click"'
    assert raw.count(start) == 1
    return raw.replace(start, start.replace(b"mcp__browser_click", b"mcp_browser_click"))


def run(pieces: list[bytes]) -> bytes:
    s = McpNameStream(BACK)
    return b"".join(s.feed(p) for p in pieces) + s.close()


@pytest.mark.parametrize("crlf", [False, True])
def test_stream_every_single_split_and_byte_by_byte(crlf):
    raw = upstream_stream(crlf)
    want = expected(raw)
    assert run([raw]) == want
    assert run([raw[i : i + 1] for i in range(len(raw))]) == want
    for i in range(len(raw) + 1):
        assert run([raw[:i], raw[i:]]) == want, i


def test_stream_every_two_splits_around_the_tool_call_start():
    raw = upstream_stream()
    want = expected(raw)
    at = raw.index(b"event: content_block_start")
    window = range(max(0, at - 40), min(len(raw), at + 260))
    for i in window:
        for j in window:
            if i < j:
                assert run([raw[:i], raw[i:j], raw[j:]]) == want, (i, j)


def test_stream_random_chunkings():
    raw = upstream_stream()
    want = expected(raw)
    rng = random.Random(30)
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(1, 40)))
        pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
        assert run(pieces) == want


def test_stream_other_events_pass_byte_for_byte_and_memory_stays_small():
    big = b"event: content_block_delta\ndata: " + b"x" * (HOLD_LIMIT * 3) + b"\n\n"
    start = b'event: content_block_start\ndata: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"mcp__browser_click","input":{}}}\n\n'
    s = McpNameStream(BACK)
    out = bytearray()
    for i in range(0, len(big), 1000):
        out += s.feed(big[i : i + 1000])
        assert len(s._buf) <= HOLD_LIMIT + 1000  # noqa: SLF001 - the bound is the point
    out += s.feed(start) + s.close()
    assert bytes(out) == big + start.replace(b"mcp__browser_click", b"mcp_browser_click")


def test_client_own_double_underscore_names_untouched_in_streams():
    raw = upstream_stream()
    out = run([raw])
    assert out.count(b'"name":"mcp__fs__read"') == 1


# -- through the translation layer --------------------------------------------------------------------------


@pytest.mark.parametrize("client", [A, C, R])
def test_encode_sets_the_way_back_only_for_an_anthropic_upstream(client):
    tools = {
        A: [{"name": "mcp_x", "input_schema": SCHEMA}],
        C: [{"type": "function", "function": {"name": "mcp_x", "parameters": SCHEMA}}],
        R: [{"type": "function", "name": "mcp_x", "parameters": SCHEMA}],
    }[client]
    body = {
        A: {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
        C: {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        R: {"model": "m", "input": "hi"},
    }[client]
    raw = json.dumps({**body, "tools": tools}).encode()
    for upstream in (A, C, R):
        cr = decode_client_request(raw, client)
        ctx = Context(mcp_prefix=True)
        out = encode_upstream_request(cr, Plan(client, upstream), ctx, "m")
        if upstream is A:
            assert b'"mcp__x"' in out and ctx.extra["mcp_names"] == {"mcp__x": "mcp_x"}
        else:
            assert b'"mcp__x"' not in out and "mcp_names" not in ctx.extra
        off = Context()
        assert b'"mcp__x"' not in encode_upstream_request(
            decode_client_request(raw, client), Plan(client, upstream), off, "m"
        )
