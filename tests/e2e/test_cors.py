"""Browser clients (issue 11 item 7) through a real mitmdump: a preflight answered by Dragoman, then, on the
same keep-alive connection, a streamed request from the page's origin whose translated stream carries
Access-Control-Allow-Origin and arrives intact; other origins refused; a refused upstream's 502 readable too."""

from __future__ import annotations

import http.client
import json
from types import SimpleNamespace

import pytest

from dragoman import demo as fu
from dragoman.demo import FakeUpstream
from dragoman.sse import SSEDecoder

from .conftest import Proxy
from .test_routes import closed_port

pytestmark = pytest.mark.e2e

APP = "http://localhost:5173"
CORS = ("--set", f"dragoman_cors_origins={APP},https://app.example.com")
BODY = {"model": "claude-test", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
HEADERS = {
    "content-type": "application/json",
    "x-api-key": "sk-browser",
    "anthropic-version": "2023-06-01",
    "anthropic-dangerous-direct-browser-access": "true",
    "x-fake-scenario": "text",
}


def preflight(conn: http.client.HTTPConnection, origin: str) -> tuple[http.client.HTTPResponse, bytes]:
    conn.request(
        "OPTIONS",
        "/v1/messages",
        headers={
            "origin": origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "anthropic-dangerous-direct-browser-access,anthropic-version,"
            "content-type,x-api-key,x-fake-scenario",
        },
    )
    resp = conn.getresponse()
    return resp, resp.read()


def post(conn: http.client.HTTPConnection, origin: str) -> tuple[http.client.HTTPResponse, bytes]:
    conn.request("POST", "/v1/messages", body=json.dumps(BODY), headers={**HEADERS, "origin": origin})
    resp = conn.getresponse()
    return resp, resp.read()


@pytest.mark.parametrize("target", ["openai-chat", "openai-responses"])
def test_preflight_then_streamed_answer_with_cors_headers(proxies, target):
    proxy = proxies(target, CORS)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    try:
        pre, body = preflight(conn, APP)
        assert pre.status == 204 and body == b""
        assert pre.getheader("access-control-allow-origin") == APP
        assert pre.getheader("access-control-allow-methods") == "GET, POST, DELETE, OPTIONS"
        assert "x-api-key" in pre.getheader("access-control-allow-headers")
        assert pre.getheader("access-control-max-age") == "600"
        assert "Origin" in pre.getheader("vary")
        # the same connection: the 204 was framed right
        resp, raw = post(conn, APP)
    finally:
        conn.close()
    assert resp.status == 200 and resp.getheader("content-type").startswith("text/event-stream")
    assert resp.getheader("access-control-allow-origin") == APP
    assert len(resp.headers.get_all("access-control-allow-origin")) == 1
    assert "retry-after" in resp.getheader("access-control-expose-headers")
    dec = SSEDecoder()
    events = [json.loads(e.data) for e in dec.feed(raw) + dec.close() if e.data.strip()]
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    text = "".join(
        e["delta"]["text"] for e in events if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
    )
    assert text == fu.TEXT


def test_whole_answer_through_the_relay_and_models(proxies):
    proxy = proxies("openai-chat", CORS)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    try:
        conn.request(
            "POST", "/v1/messages", body=json.dumps({**BODY, "stream": False}), headers={**HEADERS, "origin": APP}
        )
        resp = conn.getresponse()
        body = json.loads(resp.read())
        conn.request("GET", "/v1/models", headers={"origin": APP, "x-api-key": "sk-browser"})
        models = conn.getresponse()
        listed = json.loads(models.read())
    finally:
        conn.close()
    assert resp.status == 200 and body["content"][0]["text"] == fu.TEXT
    assert resp.getheader("access-control-allow-origin") == APP
    assert models.status == 200 and isinstance(listed["data"], list)
    assert models.getheader("access-control-allow-origin") == APP


def test_other_origins_are_refused_and_sdk_clients_unchanged(proxies):
    proxy = proxies("openai-chat", CORS)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    try:
        pre, _ = preflight(conn, "https://evil.example")
        assert pre.status == 403 and pre.getheader("access-control-allow-origin") is None
        conn.close()
        resp, raw = post(conn, "https://evil.example")
        assert resp.status == 403 and resp.getheader("access-control-allow-origin") is None
        assert json.loads(raw)["error"]["type"] == "permission_error"
        conn.close()
        # no Origin (an SDK, curl): as before, no CORS headers
        conn.request("POST", "/v1/messages", body=json.dumps(BODY), headers=HEADERS)
        plain = conn.getresponse()
        assert b"event: message_stop" in plain.read() and plain.status == 200
        assert plain.getheader("access-control-allow-origin") is None
    finally:
        conn.close()


def test_without_the_option_options_reaches_the_upstream(proxies):
    proxy = proxies("openai-chat")
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    try:
        conn.request("OPTIONS", "/v1/messages", headers={"origin": APP, "access-control-request-method": "POST"})
        resp = conn.getresponse()
        resp.read()
    finally:
        conn.close()
    assert resp.status != 204 and resp.getheader("access-control-allow-origin") is None


def test_refused_upstream_502_is_readable_by_the_page(tmp_path):
    dead = SimpleNamespace(url=f"http://127.0.0.1:{closed_port()}")  # nothing listens there
    proxy = Proxy("openai-chat", dead, tmp_path, list(CORS))
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    try:
        resp, raw = post(conn, "https://app.example.com")
    finally:
        conn.close()
        proxy.stop()
    assert resp.status == 502, raw
    assert json.loads(raw)["type"] == "error"
    assert resp.getheader("access-control-allow-origin") == "https://app.example.com"
    assert resp.getheader("vary") == "Origin"


def test_without_the_option_a_page_cannot_spend_dragomans_key(tmp_path):
    """The default (no dragoman_cors_origins, an upstream key, no client keys): a drive-by page's text/plain POST
    (no preflight needed) and its preflight are refused 403 and the upstream sees nothing; the same POST
    without Origin (an SDK, curl) goes through with Dragoman's key."""
    key = "sk-upstream-e2e-SECRET-41"
    body = json.dumps({**BODY, "stream": False})
    page = {"content-type": "text/plain;charset=UTF-8", "x-fake-scenario": "text"}
    with FakeUpstream() as up:
        proxy = Proxy("openai-chat", up, tmp_path, ["--set", f"dragoman_api_key={key}"])
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
        try:
            refused = []
            for origin in ("https://evil.example", "null"):
                conn.request("POST", "/v1/messages", body=body, headers={**page, "origin": origin})
                resp = conn.getresponse()
                refused.append((origin, resp, json.loads(resp.read())))
            pre, _ = preflight(conn, "https://evil.example")
            seen_before = list(up.requests)
            conn.request("POST", "/v1/messages", body=body, headers=page)
            plain = conn.getresponse()
            answer = json.loads(plain.read())
        finally:
            conn.close()
            proxy.stop()
        log = proxy.log()
        seen_after = list(up.requests)
    for origin, resp, err in refused:
        assert resp.status == 403 and resp.getheader("access-control-allow-origin") is None
        assert err["type"] == "error" and err["error"]["type"] == "permission_error"
        assert repr(origin) in err["error"]["message"]
        assert "--set dragoman_cors_origins=ORIGIN" in err["error"]["message"]
    assert pre.status == 403 and pre.getheader("access-control-allow-origin") is None
    assert seen_before == []  # nothing reached the upstream
    assert plain.status == 200 and answer["content"][0]["text"] == fu.TEXT
    assert len(seen_after) == 1 and seen_after[0].headers["authorization"] == f"Bearer {key}"
    warnings = [line for line in log.splitlines() if "from browser origin" in line]
    assert len(warnings) == 3 and "'https://evil.example'" in warnings[0] and "/v1/messages" in warnings[0]
    assert key not in log
