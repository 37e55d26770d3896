"""The Gemini JSON-array stream (``:streamGenerateContent`` without ``alt=sse``) under the live lint: the
corpus's Gemini streams written as arrays lint clean (upstream grammar), so does every corpus stream
translated for an array-stream Gemini client (our grammar), over every chunking; hand-broken arrays are
flagged once, at the batch validator's event index; a whole array body is linted as a stream. And Code
Assist's ``{"response": ...}``-wrapped events: accepted upstream, required in a Code Assist client's stream,
refused in a plain one."""

from __future__ import annotations

import json

import pytest

from conftest import chunkings
from corpus_loader import samples
from dragoman.ir.request import Request
from dragoman.lint import gemini as lg
from dragoman.lint.flow import FlowLint
from dragoman.lint.jsonarray import ArraySplitter
from dragoman.lint.live import StreamLint
from dragoman.lint.sse import parse_sse
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.gemini.request_decode import ARRAY
from dragoman.protocols.gemini.request_decode import WRAPPED
from dragoman.protocols.registry import get_codec
from dragoman.translate.stream import StreamTranslator

GEMINI = samples("gemini", stream=True, ok=True)
STREAMS = samples(stream=True, ok=True)


def _as_array(sse: bytes) -> bytes:
    frames, _ = parse_sse(sse, strict=False)
    return b"[" + b",\r\n".join(f.data.encode() for f in frames) + b"]"


def _lint(data_pieces: list[bytes], strict: bool) -> list:
    lint = StreamLint("gemini", strict=strict, array=True)
    return [v for v in (*(lint.feed(p) for p in data_pieces), lint.close()) if v is not None]


def test_the_splitter_takes_elements_as_their_end_arrives():
    sp = ArraySplitter()
    assert sp.feed(b' [{"a": "x,]}\\"["}') == []
    assert sp.feed(b', {"b": [1, {"c": 2}]}') == ['{"a": "x,]}\\"["}']
    assert sp.feed(b"\r\n]\n") == ['{"b": [1, {"c": 2}]}']
    sp.close()
    empty = ArraySplitter()
    assert empty.feed(b"[]") == []
    empty.close()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": 1}', "not a JSON array"),
        (b'[{"a": 1}] x', "after the end"),
        (b'[{"a": 1},', "does not end with ']'"),
        (b'[{"a": 1},,{"b": 2}]', "empty element"),
    ],
)
def test_the_splitter_rejects_what_is_not_one_array(data, message):
    sp = ArraySplitter()
    with pytest.raises(AssertionError, match=message):
        for i in range(len(data)):
            sp.feed(data[i : i + 1])
        sp.close()


@pytest.mark.parametrize("sample", GEMINI, ids=repr)
def test_real_gemini_streams_as_arrays_lint_clean(sample):
    data = _as_array(sample.body)
    lg.validate_stream(data, strict=False, array=True)  # the batch validator agrees
    for label, pieces in chunkings(data, seeds=2):
        assert _lint(pieces, strict=False) == [], label


@pytest.mark.parametrize("sample", [s for s in STREAMS if s.protocol != "gemini"], ids=repr)
def test_our_array_output_lints_clean(sample):
    upstream = Protocol(sample.protocol)
    req = Request(model="m", stream=True, include_usage=True)
    req.extra[ARRAY] = True
    ctx = Context(request=req)
    tr = StreamTranslator(get_codec(upstream).stream_decoder(ctx), get_codec(Protocol.GEMINI).stream_encoder(ctx))
    lint = FlowLint("log", "gemini", upstream.value, ours_array=True)
    out = b""
    for i in range(0, len(sample.body), 300):
        piece = sample.body[i : i + 300]
        lint.feed_upstream(piece)
        o = tr.feed(piece)
        out += o
        lint.feed_ours(o)
    tail = tr.close()
    out += tail
    lint.feed_upstream(b"", final=True)
    lint.feed_ours(tail, final=True)
    assert out.strip().startswith(b"[") and out.endswith(b"]")  # keepalives are whitespace
    ours = [r for r in lint.reports if r["side"] == "ours"]
    assert ours == [], ours
    for label, pieces in chunkings(out, seeds=1):
        assert _lint(pieces, strict=True) == [], label


def _events(sample) -> list[bytes]:
    frames, _ = parse_sse(sample.body, strict=False)
    return [f.data.encode() for f in frames]


def _broken() -> dict[str, tuple[list[bytes], int]]:
    ev = _events(GEMINI[0])
    assert len(ev) >= 3
    finish = json.loads(ev[-1])
    return {
        "first element not an object": ([b"[1, 2]", *ev[1:]], 0),
        "an element of no known shape": ([ev[0], b'{"x": 1}', *ev[1:]], 1),
        "two candidates": ([ev[0], json.dumps({**json.loads(ev[1]), "candidates": [{}, {}]}).encode(), *ev[2:]], 1),
        "an event after the error": (
            [ev[0], b'{"error": {"code": 500, "message": "x", "status": "INTERNAL"}}', ev[1]],
            2,
        ),
        "no finishReason at the end": (
            [
                *ev[:-1],
                json.dumps(
                    {k: v for k, v in finish.items() if k != "candidates"} | {"candidates": [{"index": 0}]}
                ).encode(),
            ],
            -1,
        ),
    }


@pytest.mark.parametrize("name", sorted(_broken()))
def test_a_broken_array_is_flagged_once_at_the_batch_validators_index(name):
    events, index = _broken()[name]
    data = b"[" + b",\r\n".join(events) + b"]"
    with pytest.raises(AssertionError) as batch:
        lg.validate_stream(data, strict=False, array=True)
    for label, pieces in chunkings(data, seeds=2):
        found = _lint(pieces, strict=False)
        assert len(found) == 1, (label, found)
        assert found[0].index == index, (label, found[0])
        assert found[0].message in str(batch.value), (label, found[0].message, str(batch.value))


def test_a_cut_array_and_trailing_bytes_are_flagged():
    data = b"[" + b",".join(_events(GEMINI[0]))
    (v,) = _lint([data], strict=False)
    assert v.index == -1 and "']'" in v.message
    (v,) = _lint([data + b"] junk"], strict=False)
    assert "after the end" in v.message


def test_a_whole_array_body_is_linted_as_a_stream():
    good = b"[" + b",\r\n".join(_events(GEMINI[0])) + b"]"
    lint = FlowLint("log", "gemini", "gemini", ours=False)
    assert lint.body("upstream", good, error=False) is None
    bad = b"[" + b",\r\n".join([_events(GEMINI[0])[0], b'{"x": 1}']) + b"]"
    rep = lint.body("upstream", bad, error=False)
    assert rep is not None and (rep["side"], rep["index"]) == ("upstream", 1)


# Code Assist (``v1internal``, Gemini CLI's OAuth route): every event wrapped as {"response": ...}
def _wrap_sse(sse: bytes) -> bytes:
    frames, _ = parse_sse(sse, strict=False)
    return b"".join(b'data: {"response":' + f.data.encode() + b"}\n\n" for f in frames)


@pytest.mark.parametrize("sample", GEMINI, ids=repr)
def test_a_wrapped_upstream_stream_lints_clean(sample):
    lint = FlowLint("log", "anthropic", "gemini")
    lint.feed_upstream(_wrap_sse(sample.body), final=True)
    assert lint.reports == []


@pytest.mark.parametrize("sample", [s for s in STREAMS if s.protocol == "anthropic"][:4], ids=repr)
def test_our_wrapped_output_lints_clean_and_must_stay_wrapped(sample):
    req = Request(model="m", stream=True, include_usage=True)
    req.extra[WRAPPED] = True
    ctx = Context(request=req)
    tr = StreamTranslator(
        get_codec(Protocol("anthropic")).stream_decoder(ctx), get_codec(Protocol.GEMINI).stream_encoder(ctx)
    )
    out = tr.feed(sample.body) + tr.close()
    assert out.lstrip().startswith(b'data: {"response":')  # after a keepalive
    for label, pieces in chunkings(out, seeds=1):
        lint = StreamLint("gemini", wrapped=True)
        assert [v for v in (*(lint.feed(p) for p in pieces), lint.close()) if v is not None] == [], label
    frames, _ = parse_sse(out, strict=True)
    plain = b"".join(b"data: " + f.data.encode() + b"\n\n" for f in frames[:1])
    rest = b"".join(b"data: " + f.data.encode() + b"\n\n" for f in frames[1:])
    unwrapped_second = plain + _unwrap_first(rest)
    lint = StreamLint("gemini", wrapped=True)
    v = lint.feed(unwrapped_second) or lint.close()
    assert v is not None and v.index == 1 and "wrapped" in v.message
    lint = StreamLint("gemini", wrapped=False)  # a plain client's stream may not be wrapped
    v = lint.feed(out) or lint.close()
    assert v is not None and v.index == 0 and "Code Assist" in v.message


def _unwrap_first(sse: bytes) -> bytes:
    head, sep, rest = sse.partition(b"\n\n")
    inner = json.loads(head.removeprefix(b"data: "))["response"]
    return b"data: " + json.dumps(inner).encode() + sep + rest
