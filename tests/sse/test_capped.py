"""``CappedSSEDecoder``: the same events as ``SSEDecoder`` up to the cap, whatever the chunking; beyond it
one ``SSELimitError`` carrying the same preceding events for every chunking."""

from __future__ import annotations

import pytest

from conftest import chunkings
from corpus_loader import samples
from dragoman.sse import COMMENT
from dragoman.sse import CappedSSEDecoder
from dragoman.sse import SSEDecoder
from dragoman.sse import SSEEvent
from dragoman.sse import SSELimitError

SAMPLE = "event: a\ndata: héllo €\n\n: comment\n\nid: 7\nretry: 1500\ndata: one\ndata: two\n\ndata:nospace\n\n".encode()


def decode(decoder: SSEDecoder, pieces: list[bytes]) -> tuple[list[SSEEvent], SSELimitError | None]:
    out: list[SSEEvent] = []
    try:
        for p in pieces:
            out += decoder.feed(p)
        out += decoder.close()
    except SSELimitError as e:
        return out + e.events, e
    return out, None


def measures(data: bytes) -> tuple[int, int]:
    """(longest line in bytes, largest event measure) of an SSE body, from the uncapped decoder's view."""
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    events, _ = decode(SSEDecoder(), [data])
    return max(map(len, lines)), max((len(e.data) + 1 for e in events if e is not COMMENT), default=0)


def stream_bodies() -> list[tuple[str, bytes]]:
    out = []
    for s in samples(stream=True, ok=True):
        if s.body and len(s.body) < 400_000:
            out.append((s.name, s.body))
    return out[:40]


@pytest.mark.parametrize("name,body", stream_bodies())
def test_corpus_streams_pass_at_the_exact_cap(name, body):
    """A cap equal to the largest line/event lets every event through, for every chunking."""
    longest, largest = measures(body)
    cap = max(longest, largest)
    expected, _ = decode(SSEDecoder(comments=True), [body])
    for label, pieces in chunkings(body, seeds=3):
        if label == "bytewise" and len(body) > 30_000:
            continue
        got, err = decode(CappedSSEDecoder(cap, comments=True), pieces)
        assert err is None, f"{label}: {err}"
        assert got == expected, label


@pytest.mark.parametrize("name,body", stream_bodies()[:12])
def test_one_below_the_cap_fails_the_same_way_for_every_chunking(name, body):
    longest, largest = measures(body)
    cap = max(longest, largest) - 1
    results = set()
    for label, pieces in chunkings(body, seeds=3):
        if label == "bytewise" and len(body) > 30_000:
            continue
        got, err = decode(CappedSSEDecoder(cap, comments=True), pieces)
        assert err is not None, label
        results.add((tuple(got), str(err)))
    assert len(results) == 1, "the events before the error depend on the chunking"


@pytest.mark.parametrize("label,pieces", chunkings(SAMPLE))
def test_small_sample_unchanged(label, pieces):
    assert decode(CappedSSEDecoder(64), pieces) == decode(SSEDecoder(), pieces)


def long_line_stream(n: int, line: bytes = b"data: ") -> bytes:
    return b"data: first\n\n" + line + b"x" * n + b"\n\ndata: after\n\n"


@pytest.mark.parametrize("line", [b"data: ", b": ", b"event: "], ids=["data", "comment", "event-name"])
def test_long_line_fails_after_the_events_before_it(line):
    body = long_line_stream(5000, line)
    for label, pieces in chunkings(body, seeds=4):
        got, err = decode(CappedSSEDecoder(1000), pieces)
        assert err is not None, label
        assert [e.data for e in got] == ["first"], label
        assert "exceeds 1000 bytes" in str(err)


def test_flood_of_tiny_data_lines_counts_each_line():
    body = b"data: first\n\n" + b"data: x\n" * 600 + b"\n"  # 600 lines of 1 character: measure 1200
    for label, pieces in chunkings(body, seeds=3):
        got, err = decode(CappedSSEDecoder(1000), pieces)
        assert err is not None and [e.data for e in got] == ["first"], label
    got, err = decode(CappedSSEDecoder(1200), [body])
    assert err is None and len(got) == 2


def test_buffer_never_grows_beyond_the_cap_plus_one_chunk():
    d = CappedSSEDecoder(10_000)
    d.feed(b"data: first\n\n")
    with pytest.raises(SSELimitError):
        for _ in range(1000):
            d.feed(b"y" * 4096)
            assert len(d._buf) <= 10_000 + 4096
    assert not d._buf  # dropped, not kept
    assert d.close() == []


def test_a_cap_must_be_positive():
    with pytest.raises(ValueError):
        CappedSSEDecoder(0)


@pytest.mark.parametrize("eol", [b"\r\n", b"\r"], ids=["crlf", "cr"])
def test_other_line_ends_same_rule(eol):
    ok = (b"data: first\n\n" + b"data: " + b"y" * 900 + b"\n\ndata: after\n\n").replace(b"\n", eol)
    bad = long_line_stream(5000).replace(b"\n", eol)
    expected, _ = decode(SSEDecoder(), [ok])
    for label, pieces in chunkings(ok, seeds=4):
        assert decode(CappedSSEDecoder(1000), pieces) == (expected, None), label
    for label, pieces in chunkings(bad, seeds=4):
        got, err = decode(CappedSSEDecoder(1000), pieces)
        assert err is not None and [e.data for e in got] == ["first"], label


def test_one_leaves_an_event_beyond_the_cap_to_feed():
    d = CappedSSEDecoder(16)
    assert d.one(b"data: 12\n\n") == SSEEvent(data="12")  # a chunk within the cap
    assert d.one(b"data: 123456789012345\n\n") is None  # beyond it: ``feed`` applies the cap's rules
    with pytest.raises(SSELimitError):
        d.feed(b"data: 123456789012345\n\n")
