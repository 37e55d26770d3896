"""Upstream and client faults through a real mitmdump (issue 7, items 2 and 3).

A raw-socket scripted upstream (``rawupstream.py``) speaks OpenAI Chat SSE; the clients speak
Anthropic Messages and OpenAI Responses over plain HTTP/1.1 (stdlib ``http.client``), and every answer
is checked with the strict validators: each fault ends in ONE error in the client's own protocol,
with the upstream status preserved where there is one.
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import time
import zlib

import pytest

from dragoman import demo as fu
from e2e.conftest import Proxy
from validators import anthropic as va
from validators import responses as vr

from .rawupstream import RawUpstream
from .rawupstream import chunk
from .rawupstream import response
from .rawupstream import sse_head

pytestmark = pytest.mark.e2e

CHAT_EVENTS = fu.chat_reply("text", "m", True, False).events  # role, 6 text deltas, finish, [DONE]
STREAM_OK = b"".join(CHAT_EVENTS)
CLIENTS = {
    "anthropic": ("/v1/messages", va.validate_stream, va.validate_error_body),
    "openai-responses": ("/v1/responses", vr.validate_stream, vr.validate_error_body),
}


def client_body(client: str, stream: bool = True) -> dict:
    if client == "anthropic":
        return {"model": "m", "max_tokens": 50, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
    return {"model": "m", "stream": stream, "input": "hi"}


def scripts(seen):
    """The fault is chosen by the client's ``x-fault`` header (mitmproxy forwards it)."""
    fault = seen.headers.get("x-fault", "ok")
    head = sse_head()
    first = [chunk(e) for e in CHAT_EVENTS[:3]]
    if fault == "ok":
        return [head, *[chunk(e) for e in CHAT_EVENTS], b"0\r\n\r\n"]
    if fault == "reset":
        return [head, *first, ("sleep", 0.1), "reset"]
    if fault == "close":
        return [head, *first, ("sleep", 0.1), "close"]
    if fault == "stall":
        return [head, *first, "wait_closed"]
    if fault == "keepalive_then_stall":  # upstream comments keep it alive past the timeout, then silence
        return [
            head,
            *first,
            *[x for _ in range(6) for x in (chunk(b": keepalive\n\n"), ("sleep", 0.3))],
            "wait_closed",
        ]
    if fault == "no_terminal":
        return [head, *[chunk(e) for e in CHAT_EVENTS[:5]], b"0\r\n\r\n"]
    if fault == "gzip":
        z = zlib.compressobj(wbits=31)
        parts = [z.compress(e) + z.flush(zlib.Z_SYNC_FLUSH) for e in CHAT_EVENTS] + [z.flush()]
        return [sse_head("content-encoding: gzip\r\n"), *[chunk(p) for p in parts if p], b"0\r\n\r\n"]
    if fault == "brotli":
        import brotli

        return [response(200, brotli.compress(STREAM_OK), "text/event-stream", "content-encoding: br\r\n")]
    if fault == "text_plain":
        return [response(200, STREAM_OK, "text/plain")]
    if fault == "no_ctype":
        return [b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(STREAM_OK), STREAM_OK)]
    if fault == "json_error_200":
        body = json.dumps({"error": {"message": "quota exhausted", "type": "insufficient_quota", "code": None}})
        return [response(200, body.encode())]
    if fault in ("html502", "html503"):
        status = int(fault[4:])
        page = b"<html><head><title>%d Bad Gateway</title></head><body>nginx</body></html>" % status
        return [response(status, page, "text/html", "retry-after: 3\r\n" if status == 503 else "")]
    if fault == "slow_forever":
        return [head, chunk(CHAT_EVENTS[0]), ("until_closed", 0.05, chunk(CHAT_EVENTS[1]))]
    raise AssertionError(fault)


@pytest.fixture(scope="module")
def upstream():
    with RawUpstream(scripts) as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    p = Proxy("openai-chat", upstream, tmp_path_factory.mktemp("faults"), ["--set", "dragoman_idle_timeout=1"])
    yield p
    p.stop()


def call(proxy: Proxy, client: str, fault: str, stream: bool = True, timeout: float = 20):
    path = CLIENTS[client][0]
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    t0 = time.monotonic()
    conn.request(
        "POST", path, json.dumps(client_body(client, stream)), {"content-type": "application/json", "x-fault": fault}
    )
    resp = conn.getresponse()
    try:
        body, err = resp.read(), None
    except http.client.IncompleteRead as e:
        body, err = e.partial, e
    conn.close()
    return resp.status, resp.headers, body, err, time.monotonic() - t0


@pytest.mark.parametrize("client", CLIENTS)
def test_clean_stream_is_translated(proxy, client):
    status, headers, body, err, _ = call(proxy, client, "ok")
    assert status == 200 and err is None
    s = CLIENTS[client][1](body)
    assert s.error is None and s.text == fu.TEXT


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("fault", ["reset", "close", "no_terminal"])
def test_upstream_dies_mid_stream_gives_one_error_event(proxy, client, fault):
    status, _, body, err, elapsed = call(proxy, client, fault)
    assert status == 200
    assert err is None, f"the client's body was cut off instead of ending with an error event: {body[-300:]!r}"
    s = CLIENTS[client][1](body)
    assert s.error is not None, body[-400:]
    assert s.text.startswith("Hello")  # what arrived before the fault was delivered
    assert elapsed < 5


@pytest.mark.parametrize("client", CLIENTS)
def test_idle_upstream_times_out_with_error_and_closed_upstream(proxy, upstream, client):
    status, _, body, err, elapsed = call(proxy, client, "stall")
    assert status == 200 and err is None, body[-300:]
    s = CLIENTS[client][1](body)
    assert s.error is not None
    assert "dragoman_idle_timeout" in json.dumps(s.error)
    assert 0.9 < elapsed < 4, elapsed
    seen = [x for x in upstream.seen if x.headers.get("x-fault") == "stall"][-1]
    for _ in range(50):
        if seen.closed_at is not None:
            break
        time.sleep(0.05)
    assert seen.closed_at is not None, "the upstream connection was not closed"


def test_upstream_keepalive_comments_reset_the_idle_timer_but_not_forever(proxy):
    status, _, body, err, elapsed = call(proxy, "anthropic", "keepalive_then_stall")
    assert status == 200 and err is None
    s = va.validate_stream(body)
    assert s.error is not None and "dragoman_idle_timeout" in json.dumps(s.error)
    assert elapsed > 1.8, elapsed  # 6 comments 0.3 s apart kept it alive past the 1 s timeout
    assert b"keepalive" not in body  # upstream comments are not forwarded as content


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("fault", ["gzip", "brotli"])
def test_compressed_sse_is_translated(proxy, client, fault):
    status, headers, body, err, _ = call(proxy, client, fault)
    assert status == 200 and err is None
    assert "content-encoding" not in headers
    s = CLIENTS[client][1](body)
    assert s.error is None and s.text == fu.TEXT


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    "fault, want_status, needle",
    [
        ("text_plain", 502, None),
        ("no_ctype", 502, None),
        ("json_error_200", None, "quota exhausted"),
        ("html502", 502, None),
        ("html503", 503, None),
    ],
)
def test_wrong_answers_become_client_errors_with_status(proxy, client, fault, want_status, needle):
    status, headers, body, err, _ = call(proxy, client, fault)
    assert err is None
    assert status >= 400, (status, body[:300])
    if want_status is not None:
        assert status == want_status, (status, body[:300])
    e = CLIENTS[client][2](body)
    if needle:
        assert needle in json.dumps(e)
    assert b"<html" not in body
    if fault == "html503":
        assert headers.get("retry-after") == "3"


def test_client_disconnect_closes_upstream_promptly(proxy, upstream):
    """The client reads the first bytes and hangs up; the upstream must see its connection closed."""
    s = socket.create_connection(("127.0.0.1", proxy.port))
    body = json.dumps(client_body("anthropic")).encode()
    s.sendall(
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-fault: slow_forever\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    got = b""
    while b"content_block_delta" not in got:
        got += s.recv(65536)
    t_close = time.monotonic()
    s.close()
    seen = None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        cand = [x for x in upstream.seen if x.headers.get("x-fault") == "slow_forever"]
        if cand and cand[-1].closed_at is not None:
            seen = cand[-1]
            break
        time.sleep(0.02)
    assert seen is not None, "the upstream kept streaming to nobody for 10 s"
    took = seen.closed_at - t_close
    print(f"\nupstream saw the close {took * 1000:.0f} ms after the client hung up")
    assert took < 2.0


def test_gzip_helper_roundtrip():
    # the gzip scenario's framing is itself valid gzip (guards the fixture, not Dragoman)
    z = zlib.compressobj(wbits=31)
    data = b"".join(z.compress(e) + z.flush(zlib.Z_SYNC_FLUSH) for e in CHAT_EVENTS) + z.flush()
    assert gzip.decompress(data) == STREAM_OK
