"""``dragoman_strict`` reaches the stream decoders through ``Context.strict`` (issue 7, item 1).

The Translate addon is driven with taddons/tflow: an upstream stream with an event type no protocol
defines is translated as if the event were absent with the option off, and ends with exactly one error
frame naming the event type with the option on.
"""

from __future__ import annotations

import json

import pytest
from mitmproxy import http
from mitmproxy.proxy import mode_specs
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman import demo as fu
from dragoman.mitm.translate_addon import Translate
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr

PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}
BODIES = {
    "anthropic": {"model": "m", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    "openai-chat": {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    "openai-responses": {"model": "m", "stream": True, "input": "hi"},
}
VALIDATE = {"anthropic": va.validate_stream, "openai-chat": vc.validate_stream, "openai-responses": vr.validate_stream}
UNKNOWN = b'event: future_event_type\ndata: {"type":"future_event_type","sequence_number":0}\n\n'


def upstream_stream(target: str) -> bytes:
    """The fake upstream's text answer with an unknown event type before the second event."""
    if target == "anthropic":
        events = list(fu.anthropic_reply("text", "m", True).events)
    else:
        events = list(fu.responses_reply("text", "m", True).events)
    return b"".join([events[0], UNKNOWN, *events[1:]])


def run_flow(addon: Translate, tctx, strict: bool, client: str, target: str) -> bytes:
    tctx.configure(addon, dragoman_target=target, dragoman_upstream="http://up.example/v1", dragoman_strict=strict)
    req = http.Request.make(
        "POST",
        f"http://proxy.example:8080{PATHS[client]}",
        json.dumps(BODIES[client]).encode(),
        {"content-type": "application/json"},
    )
    f = tflow.tflow(req=req)
    f.client_conn.proxy_mode = mode_specs.ProxyMode.parse("reverse:http://up.example")
    addon.request(f)
    state = addon.flows.get(f.id)
    assert state is not None and state.ctx.strict is strict
    f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    addon.responseheaders(f)
    fn = f.response.stream
    assert callable(fn)
    data = upstream_stream(target)
    out = bytearray()
    for piece in [data[i : i + 53] for i in range(0, len(data), 53)] + [b""]:
        r = fn(piece)
        out += r if isinstance(r, bytes) else b"".join(r)
    addon.response(f)
    return bytes(out)


# Chat has no event types; same protocol on both sides passes bytes through untouched
PAIRS = [(c, t) for t in ("anthropic", "openai-responses") for c in PATHS if c != t]


@pytest.mark.parametrize("client, target", PAIRS, ids=[f"{t}->{c}" for c, t in PAIRS])
def test_dragoman_strict_turns_unknown_upstream_events_into_one_error(client, target):
    addon = Translate()
    with taddons.context(addon) as tctx:  # one context: its log handler lives as long as the test
        lenient = VALIDATE[client](run_flow(addon, tctx, False, client, target), strict=True)
        out = run_flow(addon, tctx, True, client, target)
    assert lenient.error is None and lenient.text == fu.TEXT
    strict = VALIDATE[client](out, strict=True)
    assert strict.error is not None, out.decode()[-500:]
    assert "future_event_type" in json.dumps(strict.error)
