"""The Translate addon and the adapter conventions of issue 30 (taddons/tflow, no network): the headers of a
translated stream, the upstream's request id in the client's own header and the log line, the newest images
kept, and MCP tool names renamed for an Anthropic upstream and back in whole and streamed answers."""

from __future__ import annotations

import gzip
import json
import logging

import pytest
from mitmproxy import exceptions
from mitmproxy import http

from dragoman import demo as fu
from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.translate.images import PLACEHOLDER

from .test_translate_addon import feed_all
from .test_translate_addon import make_flow

UP = "http://127.0.0.1:1/v1"
RID = "req_upstream_0042"


def stream_of(tctx, addon, client, target, headers, body=None, **opts):
    tctx.configure(addon, dragoman_target=target, dragoman_upstream=UP, **opts)
    f = make_flow(client, body=body, stream=body is None)
    addon.request(f)
    assert f.response is None
    f.response = http.Response.make(200, b"", {"content-type": "text/event-stream", **headers})
    addon.responseheaders(f)
    return f


def drain(f, data: bytes, step: int = 1) -> bytes:
    out = feed_all(f.response.stream, [data[i : i + step] for i in range(0, len(data), step)])
    end = f.response.stream(b"")
    return out + (end if isinstance(end, bytes) else b"".join(end))


# -- item 1: the headers of a translated stream ---------------------------------------------------------------


@pytest.mark.parametrize("encoding", [None, "gzip"])
def test_translated_stream_headers(tctx, addon, encoding):
    extra = {"content-length": "999", "cache-control": "private, max-age=60"}
    if encoding:
        extra["content-encoding"] = encoding
    f = stream_of(tctx, addon, "anthropic", "openai-chat", extra)
    h = f.response.headers
    assert h["content-type"] == "text/event-stream; charset=utf-8"
    assert h["cache-control"] == "no-cache"
    assert h["x-accel-buffering"] == "no"
    assert "content-length" not in h and "content-encoding" not in h
    data = b"".join(fu.chat_reply("text", "gpt-x", True, False).events)
    out = drain(f, gzip.compress(data) if encoding else data, 64)
    assert b"message_stop" in out


def test_stream_translated_whole_gets_the_same_headers(tctx, addon):
    """An encoding without an incremental decoder: the SSE body is translated whole, with the same headers."""
    f = stream_of(tctx, addon, "anthropic", "openai-chat", {"content-encoding": "br", "content-length": "5"})
    assert f.response.stream is False
    import brotli

    f.response.raw_content = brotli.compress(b"".join(fu.chat_reply("text", "gpt-x", True, False).events))
    addon.response(f)
    h = f.response.headers
    assert (h["content-type"], h["cache-control"], h["x-accel-buffering"]) == (
        "text/event-stream; charset=utf-8",
        "no-cache",
        "no",
    )
    assert "content-encoding" not in h and b"message_stop" in f.response.content


# -- item 2: request ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "client, target, upstream_header, client_header",
    [
        ("anthropic", "openai-chat", "x-request-id", "request-id"),
        ("anthropic", "openai-responses", "x-request-id", "request-id"),
        ("openai-chat", "anthropic", "request-id", "x-request-id"),
        ("openai-responses", "anthropic", "request-id", "x-request-id"),
    ],
)
def test_request_id_in_streams(tctx, addon, caplog, client, target, upstream_header, client_header):
    f = stream_of(tctx, addon, client, target, {upstream_header: RID})
    h = f.response.headers
    assert h[client_header] == RID and h[upstream_header] == RID
    with caplog.at_level(logging.INFO):
        addon.response(f)
    assert f.metadata[METADATA_KEY]["request_id"] == RID
    assert any(f"request id {RID}" in r.getMessage() and f.id in r.getMessage() for r in caplog.records)


ANTHROPIC_429 = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
CHAT_429 = {"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}


@pytest.mark.parametrize("status", [200, 429])
@pytest.mark.parametrize(
    "client, target, upstream_header, client_header",
    [
        ("anthropic", "openai-chat", "x-request-id", "request-id"),
        ("openai-chat", "anthropic", "request-id", "x-request-id"),
    ],
)
def test_request_id_in_json_and_error_answers(
    tctx, addon, caplog, status, client, target, upstream_header, client_header
):
    tctx.configure(addon, dragoman_target=target, dragoman_upstream=UP)
    f = make_flow(client)
    addon.request(f)
    if status == 200:
        reply = fu.chat_reply if target == "openai-chat" else fu.anthropic_reply
        body = reply("text", "m", False, False) if target == "openai-chat" else reply("text", "m", False)
        payload = json.dumps(body.json_body).encode()
    else:
        payload = json.dumps(CHAT_429 if target == "openai-chat" else ANTHROPIC_429).encode()
    f.response = http.Response.make(status, payload, {"content-type": "application/json", upstream_header: RID})
    addon.responseheaders(f)
    with caplog.at_level(logging.INFO):
        addon.response(f)
    assert f.response.status_code == status
    assert f.response.headers[client_header] == RID
    if status == 429 and client == "anthropic":
        assert json.loads(f.response.content)["request_id"] == RID  # Anthropic error bodies name it too
    assert any(f"request id {RID}" in r.getMessage() for r in caplog.records)


def test_no_request_id_no_header(tctx, addon):
    f = stream_of(tctx, addon, "anthropic", "openai-chat", {})
    assert "request-id" not in f.response.headers and "x-request-id" not in f.response.headers


# -- item 4: the newest images ------------------------------------------------------------------------------


def image_request(n: int) -> dict:
    content = [{"type": "text", "text": "look"}]
    content += [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": f"AAA{i}"}} for i in range(n)
    ]
    return {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": content}]}


@pytest.mark.parametrize("target", ["anthropic", "openai-chat"])
def test_keep_images_option(tctx, addon, target, caplog):
    tctx.configure(addon, dragoman_target=target, dragoman_upstream=UP, dragoman_keep_images=2)
    f = make_flow("anthropic", body=image_request(5))
    addon.request(f)
    sent = f.request.get_content()
    assert sent.count(PLACEHOLDER.encode()) == 3
    assert b"AAA0" not in sent and b"AAA2" not in sent and b"AAA3" in sent and b"AAA4" in sent
    f.response = http.Response.make(500, b"{}", {"content-type": "application/json"})
    with caplog.at_level(logging.WARNING):
        addon.response(f)
    dropped = f.metadata[METADATA_KEY]["dropped"]
    assert any("3 replaced" in d for d in dropped), dropped
    assert any("dropped" in r.getMessage() and "3 replaced" in r.getMessage() for r in caplog.records)


def test_keep_images_off_by_default_and_validated(tctx, addon):
    tctx.configure(addon, dragoman_target="anthropic", dragoman_upstream=UP)
    raw = json.dumps(image_request(5)).encode()
    f = make_flow("anthropic", body=raw)
    addon.request(f)
    assert f.request.get_content() == raw
    with pytest.raises(exceptions.OptionsError, match="dragoman_keep_images"):
        tctx.options.update(dragoman_keep_images=-2)


# -- item 5: MCP names through the addon ----------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {}}


def mcp_request(client: str) -> dict:
    if client == "anthropic":
        tools = [
            {"name": "mcp_browser_click", "input_schema": SCHEMA},
            {"name": "mcp__fs__read", "input_schema": SCHEMA},
        ]
        return {"model": "claude-x", "max_tokens": 64, "tools": tools, "messages": [{"role": "user", "content": "go"}]}
    tools = [
        {"type": "function", "function": {"name": "mcp_browser_click", "parameters": SCHEMA}},
        {"type": "function", "function": {"name": "mcp__fs__read", "parameters": SCHEMA}},
    ]
    return {"model": "gpt-x", "tools": tools, "messages": [{"role": "user", "content": "go"}]}


def upstream_tool_stream() -> bytes:
    raw = b"".join(fu.anthropic_reply("tools", "m", True).events)
    return raw.replace(b'"get_weather"', b'"mcp__browser_click"').replace(b'"get_time"', b'"mcp__fs__read"')


@pytest.mark.parametrize("client", ["anthropic", "openai-chat"])
@pytest.mark.parametrize("step", [1, 7, 4096])
def test_mcp_names_streamed(tctx, addon, client, step):
    body = dict(mcp_request(client), stream=True)
    f = stream_of(tctx, addon, client, "anthropic", {}, body=body, dragoman_mcp_prefix=True)
    sent = json.loads(f.request.get_content())
    assert [t["name"] for t in sent["tools"]] == ["mcp__browser_click", "mcp__fs__read"]
    out = drain(f, upstream_tool_stream(), step)
    assert b"mcp_browser_click" in out and b"mcp__browser_click" not in out
    assert b"mcp__fs__read" in out


@pytest.mark.parametrize("client", ["anthropic", "openai-chat"])
def test_mcp_names_whole(tctx, addon, client):
    tctx.configure(addon, dragoman_target="anthropic", dragoman_upstream=UP, dragoman_mcp_prefix=True)
    f = make_flow(client, body=mcp_request(client))
    addon.request(f)
    answer = fu.anthropic_reply("tools", "m", False).json_body
    raw = json.dumps(answer).replace('"get_weather"', '"mcp__browser_click"').replace('"get_time"', '"mcp__fs__read"')
    f.response = http.Response.make(200, raw.encode(), {"content-type": "application/json"})
    addon.responseheaders(f)
    addon.response(f)
    out = f.response.content
    assert b'"mcp_browser_click"' in out and b"mcp__browser_click" not in out and b'"mcp__fs__read"' in out


def test_mcp_names_untouched_when_off(tctx, addon):
    tctx.configure(addon, dragoman_target="anthropic", dragoman_upstream=UP)
    raw = json.dumps(mcp_request("anthropic")).encode()
    f = make_flow("anthropic", body=raw)
    addon.request(f)
    assert f.request.get_content() == raw
