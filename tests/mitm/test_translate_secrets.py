"""The Translate addon and secrets: which flows a user filter may claim, credentials out of the flow after the
send, configured keys masked in what the client gets (whole answers and streams, every split)."""

from __future__ import annotations

import json

import pytest
from mitmproxy import http
from mitmproxy.proxy import mode_specs
from mitmproxy.test import tflow

from conftest import chunkings

from .test_translate_addon import make_flow
from .test_translate_addon import sse_response

KEY = "sk-configured-SECRET-0123456789"


def regular_flow(url: str, host_header: str) -> http.HTTPFlow:
    body = json.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = http.Request.make("POST", url, body, {"host": host_header, "content-type": "application/json"})
    f = tflow.tflow(req=req)
    f.client_conn.proxy_mode = mode_specs.ProxyMode.parse("regular")
    return f


def test_user_filter_never_claims_a_flow_whose_host_header_names_another_host(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_api_key=KEY, dragoman_match="~d api.example.com")
    forged = regular_flow("http://attacker.example/v1/messages", "api.example.com")
    addon.request(forged)
    assert forged.request.host == "attacker.example"
    assert KEY not in str(forged.request.headers) and forged.id not in addon.flows
    honest = regular_flow("http://api.example.com/v1/messages", "api.example.com")
    addon.request(honest)
    assert honest.id in addon.flows


def test_credentials_leave_the_flow_when_the_answer_begins(tctx, addon):
    tctx.configure(addon, dragoman_target="anthropic", dragoman_upstream="http://127.0.0.1:1", dragoman_api_key=KEY)
    f = make_flow("anthropic", stream=True, headers={"x-goog-api-key": "client-google"})
    addon.request(f)
    assert f.request.headers["x-api-key"] == KEY  # what mitmproxy sends
    assert "x-goog-api-key" not in f.request.headers
    f.response = sse_response()
    addon.responseheaders(f)
    assert "x-api-key" not in f.request.headers
    assert "x-api-key" in f.metadata["dragoman_credentials_removed"]


def test_credentials_leave_the_flow_when_the_upstream_fails(tctx, addon):
    tctx.configure(addon, dragoman_target="anthropic", dragoman_upstream="http://127.0.0.1:1", dragoman_api_key=KEY)
    f = make_flow("anthropic", stream=True)
    addon.request(f)
    f.error = tflow.terr()
    addon.error(f)
    assert KEY not in str(f.request.headers)


@pytest.mark.parametrize("client, target", [("anthropic", "anthropic"), ("openai-chat", "anthropic")])
def test_whole_error_quoting_the_key_is_masked(tctx, addon, client, target):
    tctx.configure(addon, dragoman_target=target, dragoman_upstream="http://127.0.0.1:1", dragoman_api_key=KEY)
    f = make_flow(client)
    addon.request(f)
    err = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"}}
    headers = {"content-type": "application/json", "x-echo": f"got {KEY}"}
    f.response = http.Response.make(401, json.dumps(err).encode(), headers)
    addon.responseheaders(f)
    addon.response(f)
    assert f.response.status_code == 401
    assert KEY not in str(f.response.headers) and "key masked by Dragoman" in f.response.headers["x-echo"]
    assert KEY.encode() not in f.response.content
    assert b"key masked by Dragoman" in f.response.content


UPSTREAM_STREAM = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
    b'"model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    + f'event: error\ndata: {{"type":"error","error":{{"type":"overloaded_error","message":"key {KEY}"}}}}\n\n'.encode()
)


@pytest.mark.parametrize("client", ["anthropic", "openai-chat", "openai-responses"])
@pytest.mark.parametrize("name, pieces", chunkings(UPSTREAM_STREAM, seeds=3))
def test_stream_error_event_quoting_the_key_is_masked(tctx, addon, client, name, pieces):
    tctx.configure(addon, dragoman_target="anthropic", dragoman_upstream="http://127.0.0.1:1", dragoman_api_key=KEY)
    f = make_flow(client, stream=True)
    addon.request(f)
    f.response = sse_response()
    addon.responseheaders(f)
    out = bytearray()
    for piece in [*pieces, b""]:
        r = f.response.stream(piece)
        assert r != b"" or piece == b""
        out += r if isinstance(r, bytes) else b"".join(r)
    assert KEY.encode() not in out
    assert b"key masked by Dragoman" in out
