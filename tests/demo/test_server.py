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
from listen_backlog import listen_backlog
from listen_backlog import somaxconn

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
        # Chat: the two calls' argument deltas interleave; Responses: one item after the other, as the API does
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
        if proto == "openai-chat":
            assert order[:4] == [0, 1, 0, 1]
        else:
            assert order == sorted(order) and set(order) == {0, 1}


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


def test_split_sse_keeps_each_event_with_its_blank_line():
    body = b"event: a\ndata: 1\n\ndata: 2\r\n\r\ndata: [DONE]"
    assert fu.split_sse(body) == [b"event: a\ndata: 1\n\n", b"data: 2\r\n\r\n", b"data: [DONE]"]
    assert b"".join(fu.split_sse(body)) == body and fu.split_sse(b"\n\n") == [b"\n\n"]


def test_answer_hook_sees_every_request_and_picks_raw_replies():
    """``answer`` replaces the scenario choice: it sees headers and body, even a model named like a scenario."""
    events = [b"event: a\ndata: 1\n\n", b"event: b\ndata: 2\n\n", b"event: c\ndata: 3\n\n"]
    seen = []

    def answer(request):
        seen.append((request.protocol, request.model, request.headers.get("x-api-key")))
        key = request.headers.get("x-api-key")
        if key == "limited":
            return fu.Reply(429, {"retry-after": "9"}, body=b'{"error":{"type":"rate_limit_error"}}')
        if key == "gone":
            return fu.Reply(hangup=True)
        if request.stream:
            return fu.Reply(events=events, drop_after=1 if key == "drop" else None)
        return fu.Reply(headers={"content-type": "text/x-raw"}, body=b"raw \x00 bytes")

    with fu.FakeUpstream(answer=answer) as up:
        resp, data = post(up, PATHS["anthropic"], {"model": "text"}, {"x-api-key": "k"})
        assert (resp.status, resp.getheader("content-type"), data) == (200, "text/x-raw", b"raw \x00 bytes")
        resp, data = post(up, PATHS["openai-chat"], {"model": "m"}, {"x-api-key": "limited"})
        assert (resp.status, resp.getheader("retry-after")) == (429, "9")
        assert json.loads(data) == {"error": {"type": "rate_limit_error"}}
        resp, data = post(up, PATHS["openai-responses"], {"model": "m", "stream": True}, {"x-api-key": "k"})
        assert data == b"".join(events) and not getattr(resp, "incomplete", False)
        resp, data = post(up, PATHS["openai-responses"], {"model": "m", "stream": True}, {"x-api-key": "drop"})
        assert data == events[0] and resp.incomplete
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            post(up, PATHS["anthropic"], {"model": "m"}, {"x-api-key": "gone"})
        assert seen == [
            ("anthropic", "text", "k"),
            ("openai-chat", "m", "limited"),
            ("openai-responses", "m", "k"),
            ("openai-responses", "m", "drop"),
            ("anthropic", "m", "gone"),
        ]
        assert len(up.requests) == 5  # the hung-up request is recorded too


def test_hundreds_of_clients_connecting_at_once():
    """Every connection is accepted and answered while 300 clients hold theirs open (the listen backlog)."""
    body = json.dumps({"model": "m"}).encode()
    req = b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    with fu.FakeUpstream() as up:
        socks = [socket.create_connection(("127.0.0.1", up.port), timeout=30) for _ in range(300)]
        try:
            for s in socks:
                s.sendall(req)
            answers = []
            for s in socks:
                out = b""
                while part := s.recv(65536):
                    out += part
                answers.append(out)
        finally:
            for s in socks:
                s.close()
    assert len(answers) == 300 and all(a.startswith(b"HTTP/1.1 200 OK\r\n") for a in answers)
    assert len(up.requests) == 300


def _loop(first: list, thinking: dict | None = None) -> dict:
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "time?"},
            {"role": "assistant", "content": [*first, {"type": "tool_use", "id": "t1", "name": "now", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "12:00"}]},
        ],
    }
    if thinking is not None:
        body["thinking"] = thinking
    return body


def test_anthropic_fake_rejects_a_thinking_tool_loop_without_its_thinking_block(fake):
    """As the real API: thinking enabled + the answered assistant turn not starting with thinking -> 400."""
    on = {"type": "enabled", "budget_tokens": 1024}
    resp, data = post(fake, PATHS["anthropic"], _loop([{"type": "text", "text": "checking"}], on))
    err = json.loads(data)["error"]
    assert resp.status == 400 and err["type"] == "invalid_request_error"
    assert err["message"].startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`"
    )
    signed = [{"type": "thinking", "thinking": "hm", "signature": "sig"}]
    for body in (_loop([], None), _loop(signed, on), _loop([{"type": "redacted_thinking", "data": "x"}], on)):
        resp, _ = post(fake, PATHS["anthropic"], body)
        assert resp.status == 200


def test_anthropic_fake_rejects_tool_ids_the_api_rejects(fake):
    resp, data = post(fake, PATHS["anthropic"], _loop([]) | {"messages": _loop([])["messages"][:1]})
    assert resp.status == 200
    body = _loop([])
    body["messages"][1]["content"][0]["id"] = body["messages"][2]["content"][0]["tool_use_id"] = "functions.now:0"
    resp, data = post(fake, PATHS["anthropic"], body)
    assert resp.status == 400
    assert json.loads(data)["error"]["message"] == (
        "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    )


def test_the_listen_backlog_is_the_one_asked_for():
    """asyncio's ``start_server`` listens again on the socket it is given (backlog 100 unless told): a burst of
    500 upstream connections overflowed it and waited for SYN-ACK retries of 1, 2, 4 s (issue 31's burst bench)."""
    with fu.FakeUpstream(backlog=2048) as up:
        assert listen_backlog(up.port) == min(2048, somaxconn())
