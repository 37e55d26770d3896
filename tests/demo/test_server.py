"""The fake upstream's server: every protocol x scenario over HTTP (checked with the real codecs' SSE decoder), keep-alive,
request bodies, the request log, faults and errors."""

from __future__ import annotations

import http.client
import json
import socket

import pytest

from dragoman import demo as fu
from dragoman.demo.wire import frame
from dragoman.sse.decoder import SSEDecoder

PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}


@pytest.fixture(scope="module")
def fake():
    with fu.FakeUpstream(stall=0.2) as up:
        yield up


def post(fake, path, body, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    try:
        data = resp.read()
    except http.client.IncompleteRead as e:
        data = e.partial
        resp.incomplete = True
    conn.close()
    return resp, data


def events(data: bytes):
    dec = SSEDecoder()
    return dec.feed(data) + dec.close()


@pytest.mark.parametrize("proto", list(PATHS))
@pytest.mark.parametrize("scenario", ["text", "thinking", "tools", "stall"])
def test_streams_are_well_formed(fake, proto, scenario):
    resp, data = post(fake, PATHS[proto], {"model": "m", "stream": True}, {"x-fake-scenario": scenario})
    assert resp.status == 200
    assert resp.getheader("content-type").startswith("text/event-stream")
    evs = events(data)
    assert evs
    for ev in evs:
        if ev.data != "[DONE]":
            json.loads(ev.data)
    if proto == "openai-chat":
        assert evs[-1].data == "[DONE]"
    elif proto == "anthropic":
        assert evs[-1].event == "message_stop"
    else:
        assert evs[-1].event == "response.completed"
    if scenario == "tools" and proto != "anthropic":
        # the two calls' argument deltas interleave
        order = []
        for ev in evs:
            obj = json.loads(ev.data) if ev.data != "[DONE]" else {}
            if proto == "openai-chat":
                for ch in obj.get("choices", []):
                    for tc in ch["delta"].get("tool_calls") or []:
                        if tc.get("function", {}).get("arguments"):
                            order.append(tc["index"])
            elif obj.get("type") == "response.function_call_arguments.delta":
                order.append(obj["output_index"])
        assert order[:4] == [0, 1, 0, 1]


@pytest.mark.parametrize("proto", list(PATHS))
def test_json_and_429(fake, proto):
    resp, data = post(fake, PATHS[proto], {"model": "tools"})
    assert resp.status == 200 and json.loads(data)
    resp, data = post(fake, PATHS[proto], {"model": "m"}, {"x-fake-scenario": "error429"})
    assert resp.status == 429
    assert resp.getheader("retry-after") == "7"
    assert fu.ERROR_429_MESSAGE in data.decode()


@pytest.mark.parametrize("proto", list(PATHS))
def test_midstream_error_and_drop(fake, proto):
    _, data = post(fake, PATHS[proto], {"model": "m", "stream": True}, {"x-fake-scenario": "midstream_error"})
    assert fu.MIDSTREAM_ERROR_MESSAGE in events(data)[-1].data
    resp, data = post(fake, PATHS[proto], {"model": "m", "stream": True}, {"x-fake-scenario": "drop"})
    assert getattr(resp, "incomplete", False)
    assert b"Hello" in data


def test_requests_are_recorded_and_unknown_paths_404(fake):
    resp, _ = post(fake, "/v1/other", {"model": "m"}, {"x-test-id": "rec-1"})
    assert resp.status == 404
    assert any(r.headers.get("x-test-id") == "rec-1" and r.path == "/v1/other" for r in fake.requests)


def test_unknown_scenario_rejected():
    with pytest.raises(ValueError, match="unknown scenario"):
        fu.FakeUpstream(scenario="nope")


def raw_exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes, read until the server closes (the last request says ``connection: close``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_keep_alive_chunked_body_and_expect_continue(fake):
    body = json.dumps({"model": "m", "stream": False}).encode()
    first = b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    second = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nexpect: 100-continue\r\n"
        b"connection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    )
    out = raw_exchange(fake.port, first + second)
    assert out.count(b"HTTP/1.1 200 OK\r\n") == 2 and b"HTTP/1.1 100 Continue\r\n\r\n" in out
    assert b'"type": "message"' in out and b'"object": "chat.completion"' in out
    assert [r.body for r in fake.requests[-2:]] == [{"model": "m", "stream": False}] * 2


def test_get_head_and_unsupported_methods(fake):
    out = raw_exchange(
        fake.port, b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\nHEAD / HTTP/1.1\r\nconnection: close\r\n\r\n"
    )
    get, head = out.split(b"HTTP/1.1 200 OK\r\n")[1:]
    assert get.endswith(b"content-length: 2\r\n\r\nok") and head.endswith(b"content-length: 0\r\n\r\n")
    assert raw_exchange(fake.port, b"PUT / HTTP/1.1\r\nconnection: close\r\n\r\n").startswith(b"HTTP/1.1 501 ")
    assert raw_exchange(fake.port, b"nonsense\r\n\r\n").startswith(b"HTTP/1.1 400 ")


def test_unknown_scenario_header_is_a_clear_400(fake):
    resp, data = post(fake, PATHS["anthropic"], {"model": "m"}, {"x-fake-scenario": "nope"})
    assert resp.status == 400 and "unknown scenario 'nope'" in json.loads(data)["error"]["message"]


def test_registered_scenarios_framed_replies_failures_and_the_log(tmp_path):
    def boom(request):
        raise RuntimeError("scenario bug")

    def framed(request):
        return fu.Reply(headers={"x-request-id": "r1"}, framed=frame([b"data: 1\n\n", b"data: 2\n\n"]))

    log = tmp_path / "log.jsonl"
    with fu.FakeUpstream(scenario="framed", scenarios={"framed": framed, "boom": boom}, log_path=log) as up:
        resp, data = post(up, "/v1/responses?x=1", {"model": "m", "stream": True})
        assert resp.status == 200 and resp.getheader("x-request-id") == "r1"
        assert data == b"data: 1\n\ndata: 2\n\n"
        resp, data = post(up, PATHS["openai-chat"], {"model": "boom"})
        assert resp.status == 500 and "scenario bug" in data.decode()
        resp, _ = post(up, PATHS["openai-chat"], {"model": "text"})  # still serving
        assert resp.status == 200
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        assert [(x["path"], x["protocol"], x["body"]["model"]) for x in lines] == [
            ("/v1/responses?x=1", "openai-responses", "m"),
            ("/v1/chat/completions", "openai-chat", "boom"),
            ("/v1/chat/completions", "openai-chat", "text"),
        ]
        assert len(up.requests) == 3


def test_no_log_when_record_is_off_and_stop_ends_idle_connections():
    up = fu.FakeUpstream(record=False).start()
    conn = http.client.HTTPConnection("127.0.0.1", up.port, timeout=10)
    conn.request("POST", PATHS["anthropic"], json.dumps({"model": "m"}))
    assert conn.getresponse().read()  # the connection stays open (keep-alive)
    up.stop()
    assert up.requests == [] and not up._thread.is_alive()
    conn.close()
