"""Every built-in scenario, in every protocol, checked by the independent validators (tests/validators).

The streamed and the whole form of one scenario must tell the same thing (text, thinking, tool calls,
stop reason); the fault scenarios must break where they say they do.
"""

from __future__ import annotations

import json

import pytest

from dragoman.demo import scenarios as sc
from dragoman.demo.wire import ANTHROPIC
from dragoman.demo.wire import CHAT
from dragoman.demo.wire import MIDSTREAM_ERROR_MESSAGE
from dragoman.demo.wire import RESPONSES
from dragoman.demo.wire import Request
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr

VALIDATORS = {
    ANTHROPIC: (va.validate_stream, va.validate_message, va.validate_error_body),
    CHAT: (vc.validate_stream, vc.validate_completion, vc.validate_error_body),
    RESPONSES: (vr.validate_stream, vr.validate_response, vr.validate_error_body),
}
PROTOCOLS = list(VALIDATORS)
WHOLE = ["text", "thinking", "tools", "length", "custom"]


def essence(summary):
    calls = [(c.name, c.parsed()) for c in summary.tool_calls]
    return summary.text, summary.thinking, calls, summary.stop_reason


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", WHOLE)
def test_stream_and_whole_body_agree(protocol, name):
    stream_ok, body_ok, _ = VALIDATORS[protocol]
    streamed = sc.reply(name, protocol, "m", True, include_usage=True)
    whole = sc.reply(name, protocol, "m", False)
    assert streamed.status == whole.status == 200
    got = stream_ok(b"".join(streamed.events))
    assert essence(got) == essence(body_ok(whole.json_body))
    assert got.model == "m" and got.error is None
    text, thinking, calls, _ = essence(got)
    assert text == ("" if name in ("tools", "custom") else sc.TEXT)
    assert thinking == (sc.THINKING if name == "thinking" else "")
    if name == "tools":
        assert calls == [("get_weather", {"city": "Paris", "unit": "c"}), ("get_time", {"tz": "Asia/Tokyo"})]
    if name == "custom":
        expected = sc.PATCH if protocol == RESPONSES else {"input": sc.PATCH}
        assert calls == [("apply_patch", expected)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_length_stop(protocol):
    got = VALIDATORS[protocol][0](b"".join(sc.reply("length", protocol, "m", True).events))
    assert (
        got.stop_reason
        == {ANTHROPIC: "max_tokens", CHAT: "length", RESPONSES: "incomplete:max_output_tokens"}[protocol]
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_error429(protocol):
    for stream in (False, True):
        reply = sc.reply("error429", protocol, "m", stream)
        assert reply.status == 429 and reply.headers == {"retry-after": "7"} and not reply.events
        err = VALIDATORS[protocol][2](reply.json_body)
        assert sc.ERROR_429_MESSAGE in json.dumps(err)


@pytest.mark.parametrize("protocol", [ANTHROPIC, CHAT])
def test_midstream_error_after_two_text_deltas(protocol):
    reply = sc.reply("midstream_error", protocol, "m", True)
    got = VALIDATORS[protocol][0](b"".join(reply.events))
    assert got.text == "".join(sc.TEXT_PIECES[:2])
    assert got.error is not None and MIDSTREAM_ERROR_MESSAGE in json.dumps(got.error)


def test_midstream_error_responses():
    """Responses: the ``error`` event ends the stream (no ``response.failed``, which the validator would want)."""
    events = sc.reply("midstream_error", RESPONSES, "m", True).events
    frames = [json.loads(e.split(b"data: ", 1)[1]) for e in events]
    deltas = [f["delta"] for f in frames if f["type"] == "response.output_text.delta"]
    assert deltas == list(sc.TEXT_PIECES[:2])
    assert frames[-1] == {
        "type": "error",
        "code": "server_error",
        "message": MIDSTREAM_ERROR_MESSAGE,
        "param": None,
        "sequence_number": len(frames) - 1,
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stall_and_drop_act_right_after_the_first_text_delta(protocol):
    stall = sc.reply("stall", protocol, "m", True)
    assert stall.events == sc.reply("text", protocol, "m", True).events  # the bytes are those of ``text``
    first = stall.events[stall.stall_after]
    assert sc.TEXT_PIECES[0].encode() in first and all(
        sc.TEXT_PIECES[0].encode() not in e for e in stall.events[: stall.stall_after]
    )
    drop = sc.reply("drop", protocol, "m", True)
    assert drop.drop_after == stall.stall_after + 1 and drop.stall_after is None


def test_registry_names_and_request_defaults():
    assert set(sc.BUILTIN) | {"agent"} == set(sc.SCENARIOS)
    req = Request.of(CHAT, {"model": "x", "stream": True, "stream_options": {"include_usage": True}})
    assert (req.model, req.stream, req.include_usage) == ("x", True, True)
    req = Request.of(CHAT, {"stream_options": "bogus"})
    assert (req.model, req.stream, req.include_usage) == ("fake-model", False, False)
