"""Responses over WebSocket through a real mitmdump toward an Anthropic and a Chat upstream: the handshake is
accepted (no more 426), each event of the answer arrives as one message, Codex's prewarm (``generate:
false``) and its incremental turns (``previous_response_id`` + ``store: false`` + only the new items) rebuild
the whole history for the upstream, errors are Responses error events with the HTTP status."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from tests.e2e.conftest import Proxy
from tests.state.conversation import conversation
from tests.state.ws_client import WsClient

from dragoman.demo import FakeUpstream

TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]


@pytest.fixture(scope="module")
def upstream():
    with FakeUpstream(scenarios={"conversation": conversation}, scenario="conversation") as up:
        yield up


@pytest.fixture(scope="module", params=["anthropic", "openai-chat"])
def proxy(request, upstream, tmp_path_factory):
    work = tmp_path_factory.mktemp("ws")
    p = Proxy(request.param, upstream, work, ["--set", f"dragoman_responses_store={work / 'responses.sqlite3'}"])
    yield p
    p.stop()


def bodies_since(up: FakeUpstream, start: int) -> list[dict[str, Any]]:
    with up.lock:
        return [r.body for r in up.requests[start:]]


def turn(c: WsClient, **body: Any) -> list[dict[str, Any]]:
    body.setdefault("model", "gpt-5-codex")
    body.setdefault("tools", TOOLS)
    body.setdefault("store", False)
    return c.turn(body)


def test_codex_style_session_over_websocket(proxy, upstream) -> None:
    c = WsClient(proxy.port)
    try:
        assert c.status == 101
        nonce = uuid.uuid4().hex
        start = len(upstream.requests)
        warm = turn(c, input=[{"role": "user", "content": f"weather? {nonce}"}], generate=False)
        assert [m["type"] for m in warm] == ["response.created", "response.completed"]
        assert len(upstream.requests) == start  # the prewarm costs no upstream call
        first = turn(c, input=[], previous_response_id=warm[-1]["response"]["id"])
        kinds = [m["type"] for m in first]
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert "response.function_call_arguments.delta" in kinds and "response.reasoning_summary_text.delta" in kinds
        assert all(isinstance(m.get("sequence_number"), int) for m in first)  # one message per stream event
        done = first[-1]["response"]
        call = next(o for o in done["output"] if o["type"] == "function_call")
        second = turn(
            c,
            input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}],
            previous_response_id=done["id"],
        )
        assert second[-1]["type"] == "response.completed"
        text = "".join(m["delta"] for m in second if m["type"] == "response.output_text.delta")
        assert text.startswith("It is sunny")
    finally:
        c.close()
    sent = bodies_since(upstream, start)
    assert len(sent) == 2
    last = sent[-1]["messages"]
    roles = [m["role"] for m in last if m["role"] != "system"]
    assert roles == ["user", "assistant", "user"] if proxy.target == "anthropic" else ["user", "assistant", "tool"]
    assert nonce in json.dumps(last[0]) or nonce in json.dumps(last[1])
    if proxy.target == "anthropic":  # the signed thinking went back to the upstream
        assert any(p.get("type") == "thinking" and p["signature"].startswith("sig-") for p in last[1]["content"])


def test_errors_are_responses_error_events(proxy) -> None:
    c = WsClient(proxy.port)
    try:
        unknown = turn(c, input=[], previous_response_id="resp_doesnotexist")
        assert unknown == [
            {
                "type": "error",
                "status": 404,
                "error": {
                    "message": "Previous response with id 'resp_doesnotexist' not found.",
                    "type": "not_found_error",
                    "param": "previous_response_id",
                    "code": "previous_response_not_found",
                },
            }
        ]
        bad = c.turn({"model": "m", "input": 5})
        assert bad[0]["type"] == "error" and bad[0]["status"] == 400
        c.send({"type": "session.update"})
        other = next(c.messages())
        assert other["type"] == "error" and other["error"]["param"] == "type"
        ok = turn(c, input=f"still there? {uuid.uuid4().hex}")  # the connection outlives the errors
        assert ok[-1]["type"] == "response.completed"
    finally:
        c.close()


def test_stored_responses_continue_on_another_connection(proxy) -> None:
    a = WsClient(proxy.port)
    try:
        first = turn(a, input=f"hello {uuid.uuid4().hex}", store=True)[-1]["response"]
        private = turn(a, input=f"hello {uuid.uuid4().hex}")[-1]["response"]  # store: false
    finally:
        a.close()
    b = WsClient(proxy.port)
    try:
        assert turn(b, input="again", previous_response_id=first["id"])[-1]["type"] == "response.completed"
        lost = turn(b, input="again", previous_response_id=private["id"])
        assert lost[0]["type"] == "error" and lost[0]["status"] == 404  # store: false lives with its connection
    finally:
        b.close()
