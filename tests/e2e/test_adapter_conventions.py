"""The adapter conventions of issue 30 through real mitmdump and the official SDKs: translated streams are marked
for proxies in front (``x-accel-buffering: no``, ``cache-control: no-cache``, the SSE content type), the upstream's
request id reaches each SDK's ``_request_id`` / ``request_id`` (streams, JSON answers, errors) and the flow's log
line, and MCP tool names renamed for an Anthropic upstream come back as the client named them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from dragoman.demo import FakeUpstream
from dragoman.demo.agent import offered_tools
from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.render import render
from dragoman.demo.scenarios import SCENARIOS
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request

from .conftest import Proxy

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

pytestmark = pytest.mark.e2e

ANTHROPIC_ID = "req_011CUpstreamAnthropic"
OPENAI_ID = "req_upstream_openai_42"
SEEN: list[dict] = []


def _answer(req: Request) -> Reply:
    """The demo's scenarios, answered with the request id header of the upstream's own protocol."""
    SEEN.append(req.body)
    name = req.headers.get("x-fake-scenario") or "text"
    if name == "call-offered":
        # one call of every offered tool, by the name the upstream got
        names = list(offered_tools(req.protocol, req.body))
        calls = tuple(Call(f"call_{i}", n, ('{"a"', ": 1}"), item_id=f"fc_{i}") for i, n in enumerate(names))
        reply = render(req, Answer(calls=calls))
    else:
        reply = SCENARIOS[name](req)
    if req.protocol == "anthropic":
        reply.headers["request-id"] = ANTHROPIC_ID
    else:
        reply.headers["x-request-id"] = OPENAI_ID
    return reply


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(answer=_answer) as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    started: dict[tuple[str, tuple[str, ...]], Proxy] = {}
    workdir = tmp_path_factory.mktemp("conventions")

    def get(target: str, *extra: str) -> Proxy:
        if (target, extra) not in started:
            started[(target, extra)] = Proxy(target, upstream, workdir, list(extra))
        return started[(target, extra)]

    yield get
    for p in started.values():
        p.stop()


def _anthropic(p: Proxy, scenario: str = "text"):
    return anthropic.Anthropic(
        base_url=p.base_url("anthropic"),
        api_key="test-key",
        max_retries=0,
        default_headers={"x-fake-scenario": scenario},
    )


def _openai(p: Proxy, scenario: str = "text"):
    return openai.OpenAI(
        base_url=p.base_url("openai"), api_key="test-key", max_retries=0, default_headers={"x-fake-scenario": scenario}
    )


MSG = [{"role": "user", "content": "hi"}]


def _assert_stream_headers(headers) -> None:
    assert headers["content-type"] == "text/event-stream; charset=utf-8"
    assert headers["cache-control"] == "no-cache"
    assert headers["x-accel-buffering"] == "no"
    assert "content-length" not in headers and "content-encoding" not in headers


# -- item 1 and 2: an Anthropic client on a Chat upstream --------------------------------------------------


def test_anthropic_sdk_stream_headers_and_request_id(proxy):
    p = proxy("openai-chat")
    with _anthropic(p).messages.stream(model="claude-x", max_tokens=64, messages=MSG) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
        _assert_stream_headers(stream.response.headers)
        assert stream.request_id == OPENAI_ID
    assert text and final.content[0].text == text
    assert f"request id {OPENAI_ID}" in p.log()


def test_anthropic_sdk_json_and_error_request_id(proxy):
    p = proxy("openai-chat")
    msg = _anthropic(p).messages.create(model="claude-x", max_tokens=64, messages=MSG)
    assert msg._request_id == OPENAI_ID
    with pytest.raises(anthropic.RateLimitError) as err:
        _anthropic(p, "error429").messages.create(model="claude-x", max_tokens=64, messages=MSG)
    assert err.value.request_id == OPENAI_ID
    assert err.value.response.headers["x-request-id"] == OPENAI_ID  # the upstream's own header is kept too


# -- item 1 and 2: OpenAI clients on an Anthropic upstream ---------------------------------------------------


def test_openai_chat_sdk_stream_json_and_error_request_id(proxy):
    p = proxy("anthropic")
    client = _openai(p)
    stream = client.chat.completions.create(model="gpt-x", messages=MSG, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text
    _assert_stream_headers(stream.response.headers)
    assert stream.response.headers["x-request-id"] == ANTHROPIC_ID
    done = client.chat.completions.create(model="gpt-x", messages=MSG)
    assert done._request_id == ANTHROPIC_ID
    with pytest.raises(openai.RateLimitError) as err:
        _openai(p, "error429").chat.completions.create(model="gpt-x", messages=MSG)
    assert err.value.request_id == ANTHROPIC_ID
    assert f"request id {ANTHROPIC_ID}" in p.log()


def test_openai_responses_sdk_stream_and_json_request_id(proxy):
    p = proxy("anthropic")
    client = _openai(p)
    with client.responses.stream(model="gpt-x", input="hi") as stream:
        final = stream.get_final_response()
        _assert_stream_headers(stream._raw_stream.response.headers)  # noqa: SLF001 - the SDK's only handle on it
    assert final.output_text
    resp = client.responses.create(model="gpt-x", input="hi")
    assert resp._request_id == ANTHROPIC_ID


def test_same_protocol_stream_is_marked_unbuffered_and_keeps_its_id(proxy):
    p = proxy("anthropic")
    with _anthropic(p).messages.stream(model="claude-x", max_tokens=64, messages=MSG) as stream:
        assert "".join(stream.text_stream)
        assert stream.response.headers["x-accel-buffering"] == "no"
        assert stream.request_id == ANTHROPIC_ID


# -- item 5: MCP tool names for an Anthropic upstream ---------------------------------------------------------

MCP_TOOLS = [
    {"name": "mcp_browser_click", "description": "click", "input_schema": {"type": "object", "properties": {}}},
    {"name": "mcp__fs__read", "description": "read", "input_schema": {"type": "object", "properties": {}}},
]


@pytest.mark.parametrize("stream", [False, True])
def test_mcp_names_go_up_with_two_underscores_and_come_back(proxy, stream):
    p = proxy("anthropic", "--set", "dragoman_mcp_prefix=true")
    SEEN.clear()
    client = _anthropic(p, "call-offered")
    tools = [dict(t) for t in MCP_TOOLS]
    if stream:
        with client.messages.stream(model="claude-x", max_tokens=64, messages=MSG, tools=tools) as s:
            msg = s.get_final_message()
    else:
        msg = client.messages.create(model="claude-x", max_tokens=64, messages=MSG, tools=tools)
    sent = [t["name"] for t in SEEN[-1]["tools"]]
    assert sent == ["mcp__browser_click", "mcp__fs__read"]
    # the upstream called both by the names it got; the client sees its own names again
    assert [b.name for b in msg.content if b.type == "tool_use"] == ["mcp_browser_click", "mcp__fs__read"]


def test_mcp_names_untouched_when_off(proxy):
    p = proxy("anthropic")
    SEEN.clear()
    msg = _anthropic(p, "call-offered").messages.create(
        model="claude-x", max_tokens=64, messages=MSG, tools=[dict(t) for t in MCP_TOOLS]
    )
    assert [t["name"] for t in SEEN[-1]["tools"]] == ["mcp_browser_click", "mcp__fs__read"]
    assert [b.name for b in msg.content if b.type == "tool_use"] == ["mcp_browser_click", "mcp__fs__read"]


def test_openai_client_mcp_names_on_an_anthropic_upstream(proxy):
    p = proxy("anthropic", "--set", "dragoman_mcp_prefix=true")
    SEEN.clear()
    tools = [
        {"type": "function", "function": {"name": "mcp_browser_click", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "mcp__fs__read", "parameters": {"type": "object"}}},
    ]
    stream = _openai(p, "call-offered").chat.completions.create(model="gpt-x", messages=MSG, tools=tools, stream=True)
    names = [
        tc.function.name for c in stream if c.choices for tc in c.choices[0].delta.tool_calls or [] if tc.function.name
    ]
    assert [t["name"] for t in SEEN[-1]["tools"]] == ["mcp__browser_click", "mcp__fs__read"]
    assert names == ["mcp_browser_click", "mcp__fs__read"]
    assert json.dumps(SEEN[-1]).count("mcp_browser_click") == 0
