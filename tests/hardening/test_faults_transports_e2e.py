"""Upstream faults reach the client over every transport (issue 11, item 4), through a real mitmdump.

One explicit-proxy mitmdump (regular mode, ``connection_strategy=lazy``, its CA trusted by the clients) in
front of a raw scripted OpenAI Chat upstream (``rawupstream.py``). The clients speak Anthropic Messages and
OpenAI Responses to the official hosts, three ways:

- ``plain``: HTTP/1.1 in the clear (absolute-form ``POST http://api.anthropic.com/...`` to the proxy);
- ``tls``:   HTTP/1.1 over TLS inside a CONNECT tunnel (the intercepted desktop client);
- ``h2``:    HTTP/2 over TLS inside a CONNECT tunnel (ALPN ``h2``), with the ``h2`` library mitmproxy ships.

A stream whose upstream drops (reset or close), stalls past ``dragoman_idle_timeout`` or ends without its
terminal event ends cleanly (HTTP/1.1 last chunk, HTTP/2 END_STREAM) with ONE error event in the client's
protocol as its last event; a whole answer cut mid-body and a refused upstream connection give a 502 with a
JSON error body in the client's protocol, never mitmproxy's HTML page.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from dataclasses import dataclass

import h2.config
import h2.connection
import h2.events
import pytest

from dragoman import demo as fu
from e2e.test_proxy_mode import RegularProxy
from validators import anthropic as va
from validators import responses as vr

from .rawupstream import RawUpstream
from .rawupstream import response
from .test_faults_e2e import client_body
from .test_faults_e2e import scripts

pytestmark = pytest.mark.e2e

HOSTS = {"anthropic": "api.anthropic.com", "openai-responses": "api.openai.com"}
PATHS = {"anthropic": "/v1/messages", "openai-responses": "/v1/responses"}
STREAMS = {"anthropic": va.validate_stream, "openai-responses": vr.validate_stream}
ERRORS = {"anthropic": va.validate_error_body, "openai-responses": vr.validate_error_body}
TRANSPORTS = ["plain", "tls", "h2"]
CLIENTS = ["anthropic", "openai-responses"]
WHOLE_OK = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
).encode()


def faults(seen):
    if seen.headers.get("x-fault") == "json_drop":  # a whole answer cut mid-body
        whole = response(200, WHOLE_OK)
        return [whole[: len(whole) - 40], ("sleep", 0.1), "close"]
    return scripts(seen)


@dataclass
class Answer:
    status: int
    body: bytes
    #: how the body ended: "end" (clean), "cut" (HTTP/1.1 connection closed early), "reset" (HTTP/2 RST_STREAM)
    ending: str
    content_type: str


@pytest.fixture(scope="module")
def upstream():
    with RawUpstream(faults) as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("transports")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        refused = s.getsockname()[1]  # closed when the block ends: nothing listens there
    routes = workdir / "routes.yaml"
    routes.write_text(
        f"""
upstreams:
  - name: raw
    protocol: openai-chat
    base_url: {upstream.url}/v1
    keys: [key-raw]
  - name: refused
    protocol: openai-chat
    base_url: http://127.0.0.1:{refused}/v1
    keys: [key-refused]
routes:
  - match: "dead-*"
    to: [refused]
  - match: "*"
    to: [raw]
"""
    )
    p = RegularProxy(workdir, f"dragoman_config={routes}", "dragoman_idle_timeout=1")
    yield p
    p.stop()


def request_body(client: str, stream: bool, model: str) -> bytes:
    body = client_body(client, stream)
    body["model"] = model
    return json.dumps(body).encode()


def tls_context(proxy: RegularProxy, alpn: list[str]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(proxy.ca))
    ctx.set_alpn_protocols(alpn)
    return ctx


def call_http1(proxy: RegularProxy, transport: str, client: str, fault: str, stream: bool, model: str) -> Answer:
    host, path = HOSTS[client], PATHS[client]
    if transport == "plain":
        conn: http.client.HTTPConnection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=20)
        target = f"http://{host}{path}"
    else:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", proxy.port, timeout=20, context=tls_context(proxy, ["http/1.1"])
        )
        conn.set_tunnel(host, 443)
        target = path
    headers = {
        "content-type": "application/json",
        "x-fault": fault,
        "x-api-key": "sk-client",
        "authorization": "Bearer sk-client",
    }
    conn.request("POST", target, request_body(client, stream, model), headers)
    resp = conn.getresponse()
    if transport == "tls":
        assert isinstance(conn.sock, ssl.SSLSocket)
    try:
        body, ending = resp.read(), "end"
    except http.client.IncompleteRead as e:
        body, ending = e.partial, "cut"
    conn.close()
    return Answer(resp.status, body, ending, resp.headers.get("content-type", ""))


def call_h2(proxy: RegularProxy, client: str, fault: str, stream: bool, model: str) -> Answer:
    host, path = HOSTS[client], PATHS[client]
    raw = socket.create_connection(("127.0.0.1", proxy.port), timeout=20)
    raw.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nhost: {host}:443\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        got = raw.recv(4096)
        assert got, "the proxy closed the CONNECT tunnel"
        head += got
    assert head.split(b" ", 2)[1] == b"200", head
    sock = tls_context(proxy, ["h2"]).wrap_socket(raw, server_hostname=host)
    assert sock.selected_alpn_protocol() == "h2", "mitmproxy did not negotiate HTTP/2 with the client"
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    body = request_body(client, stream, model)
    sid = conn.get_next_available_stream_id()
    conn.send_headers(
        sid,
        [
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", host),
            (":path", path),
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
            ("x-fault", fault),
            ("x-api-key", "sk-client"),
            ("authorization", "Bearer sk-client"),
        ],
    )
    conn.send_data(sid, body, end_stream=True)
    sock.sendall(conn.data_to_send())
    status, ctype, out, ending = 0, "", bytearray(), ""
    try:
        while not ending:
            data = sock.recv(65536)
            if not data:
                ending = "cut"
                break
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    hd = dict(ev.headers)
                    status, ctype = int(hd[":status"]), hd.get("content-type", "")
                elif isinstance(ev, h2.events.DataReceived):
                    out += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    ending = "end"
                elif isinstance(ev, h2.events.StreamReset):
                    ending = "reset"
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    ending = ending or "cut"
            sock.sendall(conn.data_to_send())
    finally:
        sock.close()
    return Answer(status, bytes(out), ending, ctype)


def call(proxy: RegularProxy, transport: str, client: str, fault: str, stream: bool = True, model: str = "m") -> Answer:
    if transport == "h2":
        return call_h2(proxy, client, fault, stream, model)
    return call_http1(proxy, transport, client, fault, stream, model)


def explain(proxy: RegularProxy, a: Answer) -> str:
    return f"status {a.status}, ending {a.ending}, body tail {a.body[-300:]!r}\n--- mitmdump log ---\n{proxy.log()}"


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_clean_stream(proxy, transport, client):
    a = call(proxy, transport, client, "ok")
    assert a.status == 200 and a.ending == "end", explain(proxy, a)
    s = STREAMS[client](a.body)
    assert s.error is None and s.text == fu.TEXT


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("fault", ["reset", "close", "stall", "no_terminal"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stream_fault_ends_with_one_error_event(proxy, transport, fault, client):
    t0 = time.monotonic()
    a = call(proxy, transport, client, fault)
    elapsed = time.monotonic() - t0
    assert a.status == 200, explain(proxy, a)
    assert a.ending == "end", f"the client's stream was not ended cleanly: {explain(proxy, a)}"
    s = STREAMS[client](a.body)  # strict: the error is the last event, nothing after it
    assert s.error is not None, explain(proxy, a)
    assert s.text.startswith("Hello")  # what arrived before the fault was delivered
    if fault == "stall":
        assert "dragoman_idle_timeout" in json.dumps(s.error)
        assert elapsed > 0.9
    assert elapsed < 8


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("case", ["json_drop", "refused"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream-asked"])
def test_whole_answer_fault_is_a_json_502_in_the_clients_protocol(proxy, transport, client, case, stream):
    """``stream-asked``: a streamed request answered by a whole JSON body that is cut (or never answered)."""
    model = "dead-m" if case == "refused" else "m"
    a = call(proxy, transport, client, case, stream=stream, model=model)
    assert a.status == 502, explain(proxy, a)
    assert a.ending == "end", explain(proxy, a)
    assert a.content_type.startswith("application/json"), explain(proxy, a)
    assert b"<html" not in a.body.lower()
    err = ERRORS[client](a.body)
    assert err, a.body


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_refused_stream_request_is_a_json_502(proxy, transport):
    a = call(proxy, transport, "anthropic", "ok", stream=True, model="dead-m")
    assert a.status == 502 and a.content_type.startswith("application/json"), explain(proxy, a)
    message = va.validate_error_body(a.body)["message"]
    assert "upstream" in message and "127.0.0.1" in message, message  # says what failed, where
