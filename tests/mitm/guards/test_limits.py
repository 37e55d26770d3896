"""``BodyGate`` (Translate's first half) with taddons/tflow: the request-body caps, answered in the client's
protocol; the size options validated. No network."""

from __future__ import annotations

import gzip
import json

import pytest
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman.mitm.guards.limits import REFUSED_KEY
from dragoman.mitm.relay.relay import FixedAnswer
from dragoman.mitm.translate_addon import Translate

REVERSE = "reverse:http://127.0.0.1:9999"
BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def make_flow(path: str, raw: bytes, headers: dict | None = None, mode: str = REVERSE, host: str = "127.0.0.1"):
    req = http.Request.make("POST", f"http://{host}:9999{path}", raw)
    req.headers.update(headers or {})
    f = tflow.tflow(req=req)
    f.client_conn.proxy_mode = ProxyMode.parse(mode)
    return f


@pytest.fixture
def tr():
    return Translate()


@pytest.fixture
def tctx(tr):
    with taddons.context(tr) as tctx:
        tctx.configure(
            tr, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:9999/v1", dragoman_max_body="1k"
        )
        yield tctx


def error(f: http.HTTPFlow) -> dict:
    assert f.response is not None
    return json.loads(f.response.content)


def test_declared_length_refused_before_the_body_without_relay(tctx, tr):
    f = make_flow("/v1/messages", b"", {"content-length": "5000"})
    tr.gate.requestheaders(f)
    assert f.response is not None and f.response.status_code == 413
    body = error(f)
    assert body["type"] == "error" and body["error"]["type"] == "request_too_large"
    assert "5000 bytes is larger than 1024" in body["error"]["message"]


def test_declared_length_goes_to_the_relay_and_the_body_to_a_sink(tctx, tr):
    tr.relay.port = 4321  # as if running
    f = make_flow("/v1/chat/completions", b"", {"content-length": "5000", "authorization": "Bearer sk-x"})
    tr.gate.requestheaders(f)
    assert f.response is None
    req = f.request
    assert (req.host, req.port) == ("127.0.0.1", 4321) and "authorization" not in req.headers
    assert callable(req.stream) and req.stream(b"x" * 100) == []
    job = tr.relay.jobs[req.path.lstrip("/")]
    assert isinstance(job, FixedAnswer) and job.status == 413
    assert "larger than 1024 bytes" in json.loads(job.body)["error"]["message"]  # Chat's error shape
    assert f.metadata[REFUSED_KEY] == 413


def test_small_length_untouched(tctx, tr):
    f = make_flow("/v1/messages", json.dumps(BODY).encode())
    tr.gate.requestheaders(f)
    tr.gate.request(f)
    assert f.response is None and f.request.path == "/v1/messages"


def test_read_body_beyond_the_cap(tctx, tr):
    f = make_flow("/v1/responses", b"x" * 2000)
    f.request.headers.pop("content-length", None)
    tr.gate.request(f)
    assert f.response.status_code == 413
    assert "2000 bytes is larger than 1024" in error(f)["error"]["message"]


def test_gzip_within_caps_is_inflated_in_place(tctx, tr):
    raw = json.dumps(BODY).encode()
    f = make_flow("/v1/messages", gzip.compress(raw), {"content-encoding": "gzip"})
    tr.gate.request(f)
    assert f.response is None
    assert "content-encoding" not in f.request.headers
    assert f.request.raw_content == raw and f.request.headers["content-length"] == str(len(raw))


def test_gzip_bomb(tctx, tr):
    f = make_flow("/v1/chat/completions", gzip.compress(b"0" * 100_000), {"content-encoding": "gzip"})
    tr.gate.request(f)
    assert f.response.status_code == 413
    assert error(f)["error"]["type"] in ("request_too_large", "invalid_request_error")


def test_bad_gzip_is_400(tctx, tr):
    f = make_flow("/v1/messages", b"garbage", {"content-encoding": "gzip"})
    tr.gate.request(f)
    assert f.response.status_code == 400
    assert error(f)["error"]["type"] == "invalid_request_error"


def test_count_tokens_is_gated(tctx, tr):
    f = make_flow("/v1/messages/count_tokens", b"x" * 2000)
    tr.gate.request(f)
    assert f.response.status_code == 413


def test_other_hosts_and_paths_are_not_gated(tctx, tr):
    other = make_flow("/v1/messages", b"x" * 2000, mode="regular", host="example.com")
    tr.gate.request(other)
    assert other.response is None
    upload = make_flow("/v1/files", b"x" * 2000)
    tr.gate.request(upload)
    assert upload.response is None


def test_dragoman_off_gates_nothing(tr):
    with taddons.context(tr) as tctx:
        tctx.configure(tr, dragoman_max_body="1k")
        f = make_flow("/v1/messages", b"x" * 2000)
        tr.gate.request(f)
        assert f.response is None


@pytest.mark.parametrize(
    "name,value",
    [
        ("dragoman_max_body", "0"),
        ("dragoman_max_body", "lots"),
        ("dragoman_max_sse_event", "-1"),
        ("dragoman_max_inflate_ratio", -1),
    ],
)
def test_bad_options(tr, name, value):
    with taddons.context(tr) as tctx:
        with pytest.raises(exceptions.OptionsError, match=name):
            tctx.configure(tr, **{name: value})


def test_option_values(tr):
    with taddons.context(tr) as tctx:
        assert (tr.max_body, tr.max_sse_event, tr.max_inflate_ratio) == (64 << 20, 8 << 20, 100)
        tctx.configure(tr, dragoman_max_body="2m", dragoman_max_sse_event="512k", dragoman_max_inflate_ratio=0)
        assert (tr.max_body, tr.max_sse_event, tr.max_inflate_ratio) == (2 << 20, 512 << 10, 0)


# -- a chunked body, held under the cap (``held``)


def chunked_flow(path: str = "/v1/messages"):
    f = make_flow(path, b"")
    f.request.headers.pop("content-length", None)
    f.request.headers["transfer-encoding"] = "chunked"
    f.request.raw_content = None
    return f


def test_chunked_body_is_held_and_restored(tctx, tr):
    tr.relay.port = 4321
    f = chunked_flow()
    tr.gate.requestheaders(f)
    token = tr.gate.held.token(f)
    assert token and f.request.path == "/" + token and (f.request.host, f.request.port) == ("127.0.0.1", 4321)
    raw = json.dumps(BODY).encode()
    assert f.request.stream(raw[:10]) == [] and f.request.stream(raw[10:]) == [] and f.request.stream(b"") == []
    tr.gate.request(f)
    assert f.response is None and f.request.path == "/v1/messages" and f.request.port == 9999
    assert f.request.raw_content == raw and not f.request.stream
    f.request.headers["content-length"] = "0"  # as a later addon's content setter might leave it
    tr.gate.after.request(f)
    assert f.request.headers["transfer-encoding"] == "chunked" and "content-length" not in f.request.headers
    assert tr.gate.held.token(f) is None


def test_chunked_body_beyond_the_cap_keeps_nothing(tctx, tr):
    tr.relay.port = 4321
    f = chunked_flow("/v1/chat/completions")
    tr.gate.requestheaders(f)
    held = tr.gate.held.held[f.id]
    for _ in range(3):
        f.request.stream(b"x" * 600)
    assert held.over and not held.buf
    tr.gate.request(f)
    assert f.response.status_code == 413
    token = tr.gate.held.token(f)
    tr.gate.after.request(f)  # the answer goes out through the relay connection
    assert f.response is None
    job = tr.relay.jobs[token]
    assert isinstance(job, FixedAnswer) and job.status == 413 and b"larger than 1024 bytes" in job.body


def test_chunked_body_not_held_without_relay_or_for_other_paths(tctx, tr):
    f = chunked_flow()
    tr.gate.requestheaders(f)  # relay not running
    assert tr.gate.held.token(f) is None
    tr.relay.port = 4321
    g = chunked_flow("/v1/messages/count_tokens")
    tr.gate.requestheaders(g)
    assert tr.gate.held.token(g) is None


def test_held_flow_that_fails_is_forgotten(tctx, tr):
    tr.relay.port = 4321
    f = chunked_flow()
    tr.gate.requestheaders(f)
    token = tr.gate.held.token(f)
    tr.gate.error(f)
    assert tr.gate.held.token(f) is None and token not in tr.relay.jobs


def test_flows_chosen_by_dragoman_match_are_gated_too(tr):
    with taddons.context(tr) as tctx:
        tctx.configure(
            tr,
            dragoman_target="openai-chat",
            dragoman_upstream="http://127.0.0.1:9999/v1",
            dragoman_max_body="1k",
            dragoman_match="~d llm.example.com",
        )
        f = make_flow("/v1/messages", b"x" * 2000, mode="regular", host="llm.example.com")
        tr.gate.request(f)
        assert f.response is not None and f.response.status_code == 413


# -- request heads (issue 29, 4) ------------------------------------------------------------------------------


def big_head_flow(path: str, count: int, size: int):
    headers = {f"x-pad-{i:05d}": "v" * size for i in range(count)}
    return make_flow(path, json.dumps(BODY).encode(), headers)


@pytest.mark.parametrize(
    "path, shape", [("/v1/messages", "anthropic"), ("/v1/chat/completions", "openai"), ("/v1/responses", "openai")]
)
def test_a_head_over_the_relay_limit_is_431_in_the_clients_shape(tctx, tr, path, shape):
    f = big_head_flow(path, 200, 6000)  # 1.2 MB of headers
    tr.gate.requestheaders(f)
    assert f.response is None and tr.gate.held.token(f) is None  # not sent to the relay (not held)
    tr.gate.request(f)
    assert f.response is not None and f.response.status_code == 431
    body = error(f)
    message = body["error"]["message"]
    assert "is larger than Dragoman's limit of 1048576 bytes" in message
    assert f"({len(f.request.headers)} headers)" in message
    if shape == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["type"] == "invalid_request_error" and "param" in body["error"]


def test_thousands_of_headers_under_the_limit_pass(tctx, tr):
    f = big_head_flow("/v1/messages", 2500, 20)  # 2,500 headers, ~90 KB: mitmproxy reads them, so does the relay
    tr.gate.requestheaders(f)
    tr.gate.request(f)
    assert f.response is None


def test_head_size_counts_the_wire_bytes():
    from dragoman.mitm.relay import http1

    fields = [(b"host", b"a"), (b"x-k", b"vv")]
    wire = b"POST / HTTP/1.1\r\nhost: a\r\nx-k: vv\r\n\r\n"
    assert http1.head_size(len("POST / HTTP/1.1"), fields) == len(wire)
    assert http1.MAX_HEAD > http1.HEAD_LIMIT
