"""Hostile sizes against a real mitmdump (issue 23, items 3 and 4): a compressed request body inflating
beyond the caps, a body beyond ``dragoman_max_body`` (declared or chunked), an upstream SSE line beyond
``dragoman_max_sse_event``, a tool schema nested deeper than JSON encoders go. Each is answered in the
client's own protocol (413 / 400 / an error event), the upstream never gets the refused request, no
traceback reaches the log, and the refused-or-failed exchange is still recorded where it was translated."""

from __future__ import annotations

import gzip
import http.client
import json
import time
import zlib

import brotli
import pytest

from dragoman.demo import FakeUpstream
from dragoman.demo import Reply
from dragoman.demo import Request
from e2e.conftest import Proxy

pytestmark = pytest.mark.e2e

CANARY = "LIMITS-CANARY-7d1f"
PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}


def body_for(client: str, text: str, **extra) -> dict:
    if client == "anthropic":
        return {"model": "text", "max_tokens": 64, "messages": [{"role": "user", "content": text}], **extra}
    if client == "openai-chat":
        return {"model": "text", "messages": [{"role": "user", "content": text}], **extra}
    return {"model": "text", "input": text, **extra}


def post(proxy: Proxy, path: str, body: bytes, headers: dict[str, str] | None = None, chunked: bool = False):
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=60)
    hdrs = {"content-type": "application/json", "x-api-key": "sk-client", **(headers or {})}
    if chunked:
        conn.putrequest("POST", path)
        for k, v in {**hdrs, "transfer-encoding": "chunked"}.items():
            conn.putheader(k, v)
        conn.endheaders()
        for i in range(0, len(body), 65536):
            piece = body[i : i + 65536]
            conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.send(b"0\r\n\r\n")
    else:
        conn.request("POST", path, body=body, headers=hdrs)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


def error_of(client: str, data: bytes) -> tuple[str, str]:
    """(type, message) of an error body in the client's protocol; asserts the shape."""
    obj = json.loads(data)
    if client == "anthropic":
        assert obj["type"] == "error", obj
    err = obj["error"]
    assert isinstance(err["message"], str) and err["message"], obj
    return err["type"], err["message"]


def big_line_chat(request: Request) -> Reply:
    """A Chat stream whose second event is one 300 KiB data line."""

    def ev(delta: dict, finish: str | None = None) -> bytes:
        obj = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": request.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    events = [ev({"role": "assistant", "content": "Hi"}), ev({"content": "x" * 300_000}), ev({}, "stop")]
    return Reply(events=[*events, b"data: [DONE]\n\n"])


@pytest.fixture(scope="module")
def upstream():
    with FakeUpstream(scenarios={"bigline": big_line_chat}) as up:
        yield up


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("limits")


@pytest.fixture(scope="module")
def capped(upstream, workdir):
    """Chat upstream, small caps so the tests stay cheap: 1 MiB bodies, 64 KiB SSE events, recordings on."""
    proxy = Proxy(
        "openai-chat",
        upstream,
        workdir,
        [
            "--set",
            "dragoman_max_body=1m",
            "--set",
            "dragoman_max_sse_event=64k",
            "--set",
            f"dragoman_record={workdir / 'rec'}",
        ],
    )
    yield proxy
    proxy.stop()


def seen_canary(upstream: FakeUpstream) -> bool:
    with upstream.lock:
        return any(CANARY.encode() in r.raw for r in upstream.requests)


def no_traceback(proxy: Proxy) -> None:
    log = proxy.log()
    assert "Traceback" not in log, log[-3000:]


# -- 3(a): compressed request bodies


def bomb(client: str) -> bytes:
    """A valid request whose text is 8 MiB of zeros: ~8 KiB gzip-compressed, 8x the 1 MiB cap."""
    return json.dumps(body_for(client, CANARY + "0" * (8 << 20))).encode()


@pytest.mark.parametrize("client", list(PATHS))
def test_gzip_bomb_is_413_in_client_shape(capped, upstream, client):
    packed = gzip.compress(bomb(client), 9)
    assert len(packed) < 64 * 1024
    status, _, data = post(capped, PATHS[client], packed, {"content-encoding": "gzip"})
    assert status == 413, data[:300]
    kind, message = error_of(client, data)
    assert kind in ("request_too_large", "invalid_request_error"), kind
    assert "inflates beyond" in message
    assert not seen_canary(upstream)
    no_traceback(capped)


@pytest.mark.parametrize("encoding", ["br", "deflate"])
def test_other_encodings_are_capped(capped, upstream, encoding):
    raw = bomb("anthropic")
    packed = brotli.compress(raw) if encoding == "br" else zlib.compress(raw, 9)
    status, _, data = post(capped, "/v1/messages", packed, {"content-encoding": encoding})
    assert status == 413, data[:300]
    assert error_of("anthropic", data)[0] == "request_too_large"
    assert not seen_canary(upstream)


def test_small_gzip_body_is_inflated_and_translated(capped, upstream):
    raw = json.dumps(body_for("anthropic", "hello " + CANARY[:6])).encode()
    status, _, data = post(capped, "/v1/messages", gzip.compress(raw), {"content-encoding": "gzip"})
    assert status == 200, data[:300]
    assert json.loads(data)["type"] == "message"
    with upstream.lock:
        last = upstream.requests[-1]
    assert "content-encoding" not in {k.lower() for k in last.headers}
    assert last.body["messages"][-1]["content"] == "hello " + CANARY[:6]


def test_broken_gzip_is_400(capped, upstream):
    status, _, data = post(
        capped, "/v1/chat/completions", b"\x1f\x8b\x08garbage" + b"x" * 100, {"content-encoding": "gzip"}
    )
    assert status == 400, data[:300]
    assert "not valid gzip" in error_of("openai-chat", data)[1]
    no_traceback(capped)


# -- 3(b): the largest request body


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("client", list(PATHS))
def test_oversized_body_is_413_in_client_shape(capped, upstream, client, chunked):
    raw = json.dumps(body_for(client, CANARY + "y" * (2 << 20))).encode()
    status, _, data = post(capped, PATHS[client], raw, chunked=chunked)
    assert status == 413, data[:300]
    kind, message = error_of(client, data)
    assert "larger than 1048576 bytes" in message
    assert not seen_canary(upstream)
    no_traceback(capped)


@pytest.mark.parametrize("stream", [False, True])
def test_chunked_body_under_the_cap_is_translated(capped, upstream, stream):
    """A chunked body is collected under the cap (not by mitmproxy) and then translated as usual."""
    raw = json.dumps(body_for("anthropic", "chunked " + CANARY[:6], stream=stream) | {"pad": "p" * 300_000}).encode()
    status, _, data = post(capped, "/v1/messages", raw, chunked=True)
    assert status == 200, data[:300]
    assert (b"event: message_stop" in data) if stream else (json.loads(data)["type"] == "message")
    with upstream.lock:
        last = upstream.requests[-1]
    assert last.body["messages"][-1]["content"] == "chunked " + CANARY[:6]


def test_chunked_body_refused_by_another_addon_answers_through_the_relay(capped):
    status, _, data = post(capped, "/v1/chat/completions", b"{not json", chunked=True)
    assert status == 400, data[:300]
    assert "not valid JSON" in error_of("openai-chat", data)[1]


def test_body_under_the_cap_passes(capped):
    raw = json.dumps(body_for("openai-responses", "z" * (512 << 10))).encode()
    status, _, data = post(capped, "/v1/responses", raw)
    assert status == 200, data[:300]
    assert json.loads(data)["object"] == "response"


# -- 3(c): an upstream SSE line beyond the cap


def test_long_sse_line_ends_the_stream_with_an_error_event(capped):
    raw = json.dumps(body_for("anthropic", "go", stream=True, model="bigline")).encode()
    status, headers, data = post(capped, "/v1/messages", raw)
    assert status == 200
    text = data.decode()
    assert "event: message_start" in text
    assert "event: error" in text, text[-500:]
    error = json.loads(text.split("event: error\ndata: ", 1)[1].split("\n", 1)[0])
    assert "dragoman_max_sse_event" in error["error"]["message"]
    assert "x" * 1000 not in text  # the long line never reached the client
    no_traceback(capped)


def test_long_sse_line_error_in_responses_shape(capped):
    raw = json.dumps(body_for("openai-responses", "go", stream=True, model="bigline")).encode()
    status, _, data = post(capped, PATHS["openai-responses"], raw)
    assert status == 200
    text = data.decode()
    assert "event: error" in text, text[-500:]
    assert "dragoman_max_sse_event" in text
    assert "x" * 1000 not in text


def test_long_sse_line_passes_through_untouched_to_a_same_protocol_client(capped):
    """Chat client, Chat upstream: bytes pass through as they come (nothing is buffered to cap)."""
    raw = json.dumps(body_for("openai-chat", "go", stream=True, model="bigline")).encode()
    status, _, data = post(capped, PATHS["openai-chat"], raw)
    assert status == 200
    assert b"x" * 300_000 in data and data.endswith(b"data: [DONE]\n\n")


# -- 4: nesting deeper than the encoders go


def deep_schema(depth: int) -> str:
    return '{"type":"object","properties":{"a":' * depth + '{"type":"string"}' + "}}" * depth


@pytest.mark.parametrize("stream", [False, True], ids=["whole-relayed", "stream-direct"])
@pytest.mark.parametrize("depth", [300, 2000])
def test_deep_tool_schema_is_400_and_recorded(capped, workdir, depth, stream):
    marker = f"deep-{depth}-{stream}-{CANARY}"
    head = json.dumps(body_for("anthropic", marker, stream=stream))[:-1]
    tools = '"tools":[{"name":"t","description":"d","input_schema":' + deep_schema(depth) + "}]"
    status, _, data = post(capped, "/v1/messages", (head + "," + tools + "}").encode())
    assert status == 400, data[:300]
    kind, message = error_of("anthropic", data)
    assert kind == "invalid_request_error"
    assert "deep" in message or "depth" in message, message
    no_traceback(capped)
    deadline = time.monotonic() + 10  # the Recorder writes on its own thread, just after the answer
    while True:
        recorded = [
            p
            for p in (workdir / "rec").rglob("*.json")
            if not p.name.startswith(".") and marker in p.read_text(errors="replace")
        ]
        if recorded or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert recorded, f"no recording holds the deep request; log:\n{capped.log()[-2000:]}"


@pytest.mark.parametrize("depth", [200, 450])
def test_deep_count_tokens_is_answered_without_a_traceback(capped, depth):
    head = json.dumps(body_for("anthropic", "count me"))[:-1]
    tools = '"tools":[{"name":"t","description":"d","input_schema":' + deep_schema(depth) + "}]"
    status, _, data = post(capped, "/v1/messages/count_tokens", (head + "," + tools + "}").encode())
    assert status in (200, 400), data[:300]
    if status == 200:
        assert json.loads(data)["input_tokens"] > 0
    else:
        assert error_of("anthropic", data)[0] == "invalid_request_error"
    no_traceback(capped)


def test_proxy_still_serves_after_the_hostile_requests(capped):
    raw = json.dumps(body_for("openai-chat", "still there?")).encode()
    status, _, data = post(capped, "/v1/chat/completions", raw)
    assert status == 200, data[:300]
    assert json.loads(data)["object"] == "chat.completion"
