from __future__ import annotations

import pytest

from dragoman.sse import DONE
from dragoman.sse import SSEDecoder
from dragoman.sse import SSEEvent
from dragoman.sse import encode
from dragoman.sse import encode_json
from dragoman.sse.encoder import comment


def roundtrip(data: bytes) -> list[SSEEvent]:
    d = SSEDecoder()
    return d.feed(data) + d.close()


@pytest.mark.parametrize(
    "ev",
    [
        SSEEvent(data="x"),
        SSEEvent(data="a\nb\n", event="e", id="1", retry=10),
        SSEEvent(data="", event="ping"),
        SSEEvent(data="ünïcode €"),
    ],
)
def test_encode_roundtrip(ev):
    raw = encode(ev)
    assert raw.endswith(b"\n\n") and b"\r" not in raw
    assert roundtrip(raw) == [ev]


def test_encode_exact_bytes():
    assert encode(SSEEvent(data="a\nb", event="e")) == b"event: e\ndata: a\ndata: b\n\n"


def test_encode_json():
    assert (
        encode_json("message_stop", {"type": "message_stop"})
        == b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    assert encode_json(None, {"a": "x\ny"}) == b'data: {"a":"x\\ny"}\n\n'
    assert roundtrip(encode_json("e", {"t": "é"})) == [SSEEvent(data='{"t":"é"}', event="e")]


def test_done_and_comment():
    assert DONE == b"data: [DONE]\n\n"
    assert roundtrip(DONE) == [SSEEvent(data="[DONE]")]
    assert comment("hi") == b": hi\n\n"
    assert roundtrip(comment("hi")) == []
