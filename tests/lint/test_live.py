"""Live conformance linting, sans-I/O (issue 35 item 4): ``StreamLint`` finds the same first violation as
the batch validators over any chunking; ``FlowLint`` over the corpus finds nothing in our output (every
upstream stream translated to each other protocol) nor in the real upstream streams (tolerant grammar),
and flags hand-broken upstream streams with the offending event's index."""

from __future__ import annotations

import json
import random

import pytest

from conftest import chunkings
from corpus_loader import samples
from dragoman.ir.request import Request
from dragoman.lint import anthropic as la
from dragoman.lint import responses as vr
from dragoman.lint.flow import FlowLint
from dragoman.lint.flow import describe
from dragoman.lint.live import StreamLint
from dragoman.lint.live import _FlatSummary
from dragoman.lint.live import check_body
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.stream import StreamTranslator

STREAMS = samples(stream=True, ok=True)
ANTHROPIC = [s for s in STREAMS if s.protocol == "anthropic"]


def _pieces(data: bytes, seed: int) -> list[bytes]:
    rng, out, i = random.Random(seed), [], 0
    while i < len(data):
        n = rng.randint(1, 900)
        out.append(data[i : i + n])
        i += n
    return out


def _ev(obj: dict) -> bytes:
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


GOOD = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "usage": {"input_tokens": 3, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "héllo"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
]


def _stream(events: list[dict]) -> bytes:
    return b"".join(_ev(e) for e in events)


BROKEN = {
    # name: (events, index of the offending event, or -1 for the end of the stream)
    "no message_start": (GOOD[1:], 0),
    "delta for a closed block": ([*GOOD[:4], GOOD[2], *GOOD[4:]], 4),
    "no message_stop": (GOOD[:-1], -1),
    "stop_reason unknown": ([*GOOD[:4], {**GOOD[4], "delta": {"stop_reason": "done"}}, GOOD[5]], 4),
    "event after the end": ([*GOOD, GOOD[5]], 6),
}


def test_a_good_stream_passes_over_every_chunking():
    data = _stream(GOOD)
    for label, pieces in chunkings(data):
        lint = StreamLint("anthropic")
        assert [lint.feed(p) for p in pieces] == [None] * len(pieces), label
        assert lint.close() is None, label


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_stream_gives_the_batch_validators_message_and_the_event_index(name):
    events, index = BROKEN[name]
    data = _stream(events)
    with pytest.raises(AssertionError) as batch:
        la.validate_stream(data)
    for label, pieces in chunkings(data, seeds=2):
        lint = StreamLint("anthropic")
        found = [v for v in (*(lint.feed(p) for p in pieces), lint.close()) if v is not None]
        assert len(found) == 1, (label, found)  # reported once, then checking stops
        assert found[0].index == index, label
        assert found[0].message in str(batch.value), label


def test_framing_violations_of_our_grammar():
    lint = StreamLint("anthropic")
    assert lint.feed(_ev(GOOD[0]).replace(b"data: ", b"data:")) is not None
    lint = StreamLint("anthropic")
    for p in (_stream(GOOD)[:-1],):
        assert lint.feed(p) is None
    v = lint.close()
    assert v is not None and "unterminated" in v.message
    assert StreamLint("chat").feed(b"data: {}\n\n\xff\n") is not None  # not UTF-8


@pytest.mark.parametrize("sample", STREAMS, ids=repr)
def test_the_corpus_lints_clean_upstream_and_in_our_output(sample):
    upstream = Protocol(sample.protocol)
    for client in Protocol:
        if client is upstream:
            continue
        ctx = Context(request=Request(model="m", stream=True, include_usage=True))
        tr = StreamTranslator(get_codec(upstream).stream_decoder(ctx), get_codec(client).stream_encoder(ctx))
        lint = FlowLint("log", client.value, upstream.value)
        for p in _pieces(sample.body, len(sample.body)):
            lint.feed_upstream(p)
            lint.feed_ours(tr.feed(p))
        lint.feed_upstream(b"", final=True)
        lint.feed_ours(tr.close(), final=True)
        if upstream is Protocol.OPENAI_RESPONSES and len(vr.split_streams(sample.body)) > 1:
            # corpus artifact: some files hold several Responses streams back to back
            assert [r["side"] for r in lint.reports] in ([], ["upstream"])
            continue
        assert lint.reports == [], f"{client.value}: {[describe(r) for r in lint.reports]}"


def _break_first_data(body: bytes) -> bytes:
    """Swap the first data line's JSON for a non-object: every protocol rejects it at event #0."""
    head, sep, rest = body.partition(b"data:")
    line, nl, tail = rest.partition(b"\n")
    return head + sep + b" [1, 2]" + nl + tail


@pytest.mark.parametrize("proto", ["anthropic", "openai-chat", "openai-responses", "gemini"])
def test_hand_broken_upstream_streams_are_flagged_once_with_their_index(proto):
    (sample,) = [s for s in STREAMS if s.protocol == proto][:1]
    first = sample.body.index(b"\n\n") + 2
    cases = {
        "first event not an object": (_break_first_data(sample.body), 0),
        "an object of no known shape as event #1": (
            sample.body[:first] + b'data: {"x": 1}\n\n' + sample.body[first:],
            1,
        ),
    }
    if proto != "openai-chat":  # the tolerant Chat grammar accepts a stream without [DONE] or finish_reason
        cases["cut after the first event"] = (sample.body[:first], -1)
    for name, (data, index) in cases.items():
        lint = FlowLint("log", "anthropic" if proto != "anthropic" else "openai-chat", proto)
        for p in _pieces(data, 1):
            lint.feed_upstream(p)
        lint.feed_upstream(b"", final=True)
        assert [(r["side"], r["index"]) for r in lint.reports] == [("upstream", index)], (name, lint.reports)
        assert lint.reports[0]["message"]


def test_the_flat_summary_keeps_no_text():
    s = _FlatSummary()
    s.text += "hello"
    assert s.text == ""
    lint = StreamLint("anthropic")  # a long text stream checks fine with it
    assert lint.feed(_stream([GOOD[0], GOOD[1]] + [GOOD[2]] * 200 + GOOD[3:])) is None
    assert lint.close() is None


def test_bodies():
    good = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    assert check_body("anthropic", json.dumps(good).encode()) is None
    v = check_body("anthropic", json.dumps({**good, "role": "user"}).encode())
    assert v is not None and v.index == -1 and "assistant" in v.message
    assert (
        check_body("anthropic", b'{"type": "error", "error": {"type": "api_error", "message": "x"}}', error=True)
        is None
    )
    assert check_body("chat", b"not json") is not None
