"""``inspect.assemble``: the taps that keep a streamed answer for the mitmweb view (``dragoman_keep_answer``).
``BytesTap`` reads the client-bound bytes back in the client's protocol as they leave: the same result over
every chunking (byte by byte included), a Gemini JSON array too, capped memory, and it never raises."""

from __future__ import annotations

import pytest

from conftest import chunkings
from dragoman import demo as fu
from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.render import render
from dragoman.demo.wire import Request
from dragoman.inspect import assemble as asm
from dragoman.inspect.assemble import ArraySplitter
from dragoman.inspect.assemble import BytesTap
from dragoman.protocols import Protocol

ANSWER = Answer(
    thinking=fu.THINKING_PIECES,
    signature=fu.SIGNATURE,
    encrypted=fu.ENCRYPTED,
    text=("Grüße", " — ", "both."),
    calls=tuple(Call(cid, fn, frags, item_id=f"fc_fake_{n}") for n, (cid, fn, frags) in enumerate(fu.TOOL_CALLS)),
    reasoning_tokens=3,
)
PROTOS = [p.value for p in Protocol]


def stream(protocol: str, answer: Answer = ANSWER) -> bytes:
    return b"".join(render(Request(protocol, "m", True, include_usage=True), answer).events)


def tapped(protocol: str, pieces: list[bytes], array: bool = False) -> dict:
    tap = BytesTap(Protocol(protocol), array=array)
    for p in pieces:
        tap.feed(p)
    return tap.close().as_dict()


def check(side: dict, protocol: str) -> None:
    assert side["problem"] is None and side["protocol"] == protocol
    assert (side["thinking"], side["text"]) == (fu.THINKING, "Grüße — both.")
    assert [(c["id"], c["name"], c["arguments"]) for c in side["tool_calls"]] == [
        ("call_weather_1", "get_weather", {"city": "Paris", "unit": "c"}),
        ("call_time_2", "get_time", {"tz": "Asia/Tokyo"}),
    ] or protocol == "gemini"  # Gemini ids are the decoder's own
    assert [c["name"] for c in side["tool_calls"]] == ["get_weather", "get_time"]
    assert side["stop"] == "tool_use" and side["usage"]["output_tokens"] == fu.USAGE_OUT
    assert not side["truncated"]


@pytest.mark.parametrize("protocol", PROTOS)
def test_a_client_bound_stream_is_read_back_over_every_chunking(protocol):
    data = stream(protocol)
    whole = tapped(protocol, [data])
    check(whole, protocol)
    for name, pieces in chunkings(data):
        assert tapped(protocol, pieces) == whole, name


def test_a_gemini_json_array_stream():
    events = [e.removeprefix(b"data: ").strip() for e in render(Request("gemini", "m", True), ANSWER).events]
    data = b"[" + b",\r\n".join(events) + b"]"
    whole = tapped("gemini", [data], array=True)
    check(whole, "gemini")
    assert whole["events"] == len(events)
    for name, pieces in chunkings(data):
        assert tapped("gemini", pieces, array=True) == whole, name


def test_the_array_splitter_holds_one_unfinished_element_at_most():
    sp = ArraySplitter(limit=50)
    assert sp.feed(b'[{"a": 1},\r\n{"b": ') == [asm.SSEEvent('{"a": 1}')]
    assert sp.feed(b'"x"}]') == [asm.SSEEvent('{"b": "x"}')]
    with pytest.raises(ValueError, match="over 50 characters"):
        ArraySplitter(limit=50).feed(b'[{"a": "' + b"x" * 60)


def test_a_stream_that_is_not_the_protocol_stops_the_tap_and_says_why():
    tap = BytesTap(Protocol.ANTHROPIC_MESSAGES)
    tap.feed(b"data: {not json\n\n")
    tap.feed(stream("anthropic"))  # ignored once stopped
    side = tap.close().as_dict()
    assert side["problem"] and side["text"] == ""
    assert tap.close().as_dict() == side  # closing again: the same


def test_a_kept_answer_is_capped(monkeypatch):
    monkeypatch.setattr(asm, "KEEP_LIMIT", 40)
    long = Answer(thinking=("t" * 30, "t" * 30), text=("x" * 25,) * 3, calls=ANSWER.calls)
    side = tapped("anthropic", [stream("anthropic", long)])
    assert side["truncated"] and len(side["thinking"]) == 40 and len(side["text"]) == 40
    assert [c["name"] for c in side["tool_calls"]] == ["get_weather", "get_time"]  # short arguments: whole
