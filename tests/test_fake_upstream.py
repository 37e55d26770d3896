"""The fake upstream: every protocol x scenario answers well-formed bytes (checked with the real codecs' SSE decoder)."""

from __future__ import annotations

import http.client
import json

import pytest

from dragoman import fake_upstream as fu
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
