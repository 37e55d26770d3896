from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from conftest import chunkings
from dragoman.sse import COMMENT
from dragoman.sse import SSEDecoder
from dragoman.sse import SSEEvent


def decode(pieces: list[bytes]) -> list[SSEEvent]:
    d = SSEDecoder()
    out: list[SSEEvent] = []
    for p in pieces:
        out += d.feed(p)
    out += d.close()
    return out


SAMPLE = "event: a\ndata: héllo €\n\n: comment\n\nid: 7\nretry: 1500\ndata: one\ndata: two\n\ndata:nospace\n\n".encode()
EXPECTED = [
    SSEEvent(data="héllo €", event="a"),
    SSEEvent(data="one\ntwo", id="7", retry=1500),
    SSEEvent(data="nospace", id="7"),
]


@pytest.mark.parametrize("label,pieces", chunkings(SAMPLE))
def test_chunkings(label, pieces):
    assert decode(pieces) == EXPECTED


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_ends(eol):
    data = SAMPLE.replace(b"\n", eol)
    for _label, pieces in chunkings(data):
        assert decode(pieces) == EXPECTED


def test_crlf_split_across_chunks():
    assert decode([b"data: x\r", b"\ndata: y\r", b"\n\r", b"\n"]) == [SSEEvent(data="x\ny")]


def test_comments_counted_and_ignored():
    d = SSEDecoder()
    assert d.feed(b": keepalive\n\n: again\n\n") == []
    assert d.comments == 2


def test_no_trailing_blank_line_flushed_on_close():
    d = SSEDecoder()
    assert d.feed(b"event: x\ndata: last") == []
    assert d.pending
    assert d.close() == [SSEEvent(data="last", event="x")]
    assert d.close() == []  # idempotent


def test_event_without_data_not_dispatched():
    assert decode([b"event: lonely\n\ndata: x\n\n"]) == [SSEEvent(data="x")]


def test_unknown_fields_ignored_and_bad_retry():
    assert decode([b"foo: bar\nretry: soon\nid: a\x00b\ndata: x\n\n"]) == [SSEEvent(data="x")]


def test_empty_data_line():
    assert decode([b"data\n\n", b"data:\n\n"]) == [SSEEvent(data=""), SSEEvent(data="")]


def test_utf8_split_everywhere():
    data = 'data: {"content":"известни 🎉"}\n\n'.encode()
    for i in range(1, len(data)):
        assert decode([data[:i], data[i:]]) == [SSEEvent(data='{"content":"известни 🎉"}')]


def test_invalid_utf8_replaced():
    assert decode([b"data: \xff\n\n"]) == [SSEEvent(data="\ufffd")]


def test_feed_after_close_raises():
    d = SSEDecoder()
    d.close()
    with pytest.raises(RuntimeError):
        d.feed(b"data: x\n\n")


def test_empty_feed():
    assert SSEDecoder().feed(b"") == []


def test_ten_megabyte_event():
    payload = "x" * (10 * 1024 * 1024)
    data = b"data: " + payload.encode() + b"\n\n"
    pieces = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    (ev,) = decode(pieces)
    assert len(ev.data) == len(payload)


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=20)


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(
        st.tuples(st.one_of(st.none(), _text.filter(lambda s: ":" not in s)), st.lists(_text, min_size=1, max_size=3)),
        max_size=6,
    ),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12),
)
def test_any_chunking_same_events(events, eol, cuts):
    text = ""
    for name, lines in events:
        if name is not None:
            text += f"event: {name}{eol}"
        text += "".join(f"data: {ln}{eol}" for ln in lines) + eol
    data = text.encode()
    whole = decode([data])
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, prev = [], 0
    for c in points:
        pieces.append(data[prev:c])
        prev = c
    pieces.append(data[prev:])
    assert decode(pieces) == whole
    assert len(whole) == len(events)


# ---------------------------------------------------------------- whole-event fast paths (issue 6)
# An upstream sends one event per HTTP chunk; the decoder builds ``data: X`` / ``event: E\ndata: X``
# chunks directly and splits multi-event chunks on blank lines. Byte-by-byte feeding never takes those
# paths, so it is the reference.


def bytewise(data: bytes) -> list[SSEEvent]:
    return decode([data[i : i + 1] for i in range(len(data))])


@pytest.mark.parametrize(
    "chunks,expected",
    [
        ([b"event: a\ndata: x\n\n"], [SSEEvent(data="x", event="a")]),
        ([b"data: x\n\n"], [SSEEvent(data="x")]),
        ([b"event: \ndata: \n\n"], [SSEEvent(data="", event="")]),
        ([b'event: a:b\ndata: {"k": 1}\n\n'], [SSEEvent(data='{"k": 1}', event="a:b")]),
        # id persists, retry belongs to the next dispatched event only
        ([b"id: 5\n\n", b"data: a\n\n", b"data: b\n\n"], [SSEEvent(data="a", id="5"), SSEEvent(data="b", id="5")]),
        ([b"retry: 10\n\n", b"data: a\n\n", b"data: b\n\n"], [SSEEvent(data="a", retry=10), SSEEvent(data="b")]),
        ([b"retry: 10\n\ndata: a\n\ndata: b\n\n"], [SSEEvent(data="a", retry=10), SSEEvent(data="b")]),
        # an event name without data is reset by the blank line
        ([b"event: x\n\n", b"data: y\n\n"], [SSEEvent(data="y")]),
        ([b"event: x\n\ndata: y\n\n"], [SSEEvent(data="y")]),
        # not the simple shape: multi-line data, comments, blank runs, no space after the colon
        ([b"data: a\ndata: b\n\n"], [SSEEvent(data="a\nb")]),
        ([b": ping\n\nevent: e\ndata: z\n\n\n\n"], [SSEEvent(data="z", event="e")]),
        ([b"event:e\ndata:z\n\n"], [SSEEvent(data="z", event="e")]),
        ([b"event: e\ndata: z\nid: 9\n\n"], [SSEEvent(data="z", event="e", id="9")]),
        # a pending partial line or event disables the fast paths for the next chunk
        ([b"data: a", b"b\n\n"], [SSEEvent(data="ab")]),
        ([b"data: a\n", b"data: b\n\n"], [SSEEvent(data="a\nb")]),
        ([b"event: e\n", b"data: b\n\n"], [SSEEvent(data="b", event="e")]),
        ([b"data: a\r", b"\ndata: b\n\n"], [SSEEvent(data="a\nb")]),
        ([b"data: a\r\n\r\n", b"data: b\n\n"], [SSEEvent(data="a"), SSEEvent(data="b")]),
        ([b"data: caf\xc3", b"\xa9\n\n", b"data: \xe2\x82\xac\n\n"], [SSEEvent(data="café"), SSEEvent(data="€")]),
        # one whole event per chunk (the split fast path): invalid UTF-8 is replaced as on the line rules,
        # in the data and in the event name (whose decoded form is remembered per raw line)
        ([b"event: a\ndata: \xff\n\n"], [SSEEvent(data="\ufffd", event="a")]),
        (
            [b"event: \xfe\ndata: x\n\n", b"event: \xfe\ndata: y\n\n"],
            [SSEEvent(data="x", event="\ufffd"), SSEEvent(data="y", event="\ufffd")],
        ),
        ([b"data: \xc3\n\n"], [SSEEvent(data="\ufffd")]),
        # shapes next to the one-event shape: an extra blank line, a second event, a data line without its blank
        ([b"event: a\ndata: x\n\n\n"], [SSEEvent(data="x", event="a")]),
        ([b"event: a\ndata: x\n\ndata: y\n\n"], [SSEEvent(data="x", event="a"), SSEEvent(data="y")]),
        ([b"data: x\n\ndata: y\n\n"], [SSEEvent(data="x"), SSEEvent(data="y")]),
        ([b"event: a\ndata: x\n", b"\n"], [SSEEvent(data="x", event="a")]),
        ([b"data: x\ndata: y\n\n"], [SSEEvent(data="x\ny")]),
        ([b"event: a\nevent: b\n\n", b"data: y\n\n"], [SSEEvent(data="y")]),
        ([b"id: 3\ndata: x\n\n", b"event: a\ndata: y\n\n"], [SSEEvent(data="x", id="3"), SSEEvent("y", "a", "3")]),
    ],
)
def test_whole_event_chunks(chunks, expected):
    assert decode(chunks) == expected
    assert bytewise(b"".join(chunks)) == expected


_line = st.one_of(
    st.builds(lambda t: f"data: {t}", _text),
    st.builds(lambda t: f"data:{t}", _text),
    st.builds(lambda t: f"event: {t}", _text),
    st.builds(lambda t: f"id: {t}", _text.filter(lambda s: "\0" not in s)),
    st.builds(lambda n: f"retry: {n}", st.integers(min_value=0, max_value=99999)),
    st.builds(lambda t: f": {t}", _text),
    st.just("data"),
    st.just("unknown: field"),
)


@settings(max_examples=200, deadline=None)
@given(
    blocks=st.lists(st.lists(_line, max_size=4), max_size=8),
    eol=st.sampled_from(["\n", "\n", "\r\n", "\r"]),
    per_block=st.booleans(),
)
def test_fast_paths_match_line_rules(blocks, eol, per_block):
    """Any mix of events, one block per chunk or all at once, decodes exactly as byte by byte."""
    texts = ["".join(line + eol for line in lines) + eol for lines in blocks]
    data = "".join(texts).encode()
    chunks = [t.encode() for t in texts] if per_block else [data]
    assert decode(chunks) == bytewise(data)


COMMENTED = (
    b": first\n\nevent: a\ndata: x\n\n: ka\n\ndata: y\n: inside an event\ndata: z\n\n"
    b":\r\n\r\ndata: w\r\n\r\n: OPENROUTER PROCESSING\n\n"
)


@pytest.mark.parametrize("name,pieces", chunkings(COMMENTED))
def test_comments_surface_in_place_when_asked(name, pieces):
    d = SSEDecoder(comments=True)
    out = [ev for p in pieces for ev in d.feed(p)] + d.close()
    shape = ["#" if ev is COMMENT else ev.data for ev in out]
    assert shape == ["#", "x", "#", "#", "y\nz", "#", "w", "#"], name
    assert d.comments == 5
    plain = SSEDecoder()
    assert [ev.data for p in pieces for ev in plain.feed(p)] + [ev.data for ev in plain.close()] == ["x", "y\nz", "w"]
    assert plain.comments == 5


def test_comment_sentinel_is_told_by_identity():
    d = SSEDecoder(comments=True)
    (ev,) = d.feed(b": keepalive\n\n")
    assert ev is COMMENT
    (data_ev,) = d.feed(b"event: :comment\ndata: \n\n")  # the same fields from the wire are an ordinary event
    assert data_ev == COMMENT and data_ev is not COMMENT


@pytest.mark.parametrize(
    "chunk,expected",
    [
        (b"event: a\ndata: x\n\n", SSEEvent(data="x", event="a")),
        (b"data: x\n\n", SSEEvent(data="x")),
        # not one whole event of the usual shape: None, and nothing consumed (``feed`` gets the chunk)
        (b"data: x\n\ndata: y\n\n", None),
        (b"data: x\n", None),
        (b"data: x\r\n\r\n", None),
        (b"event: a\ndata: \xff\n\n", None),
        (b": ping\n\n", None),
        (b"id: 1\ndata: x\n\n", None),
        (b"", None),
    ],
)
def test_one_takes_only_a_single_whole_event(chunk, expected):
    d = SSEDecoder()
    assert d.one(chunk) == expected
    if expected is None:  # the decoder is untouched: feeding the chunk gives what a fresh decoder gives
        assert d.feed(chunk) + d.close() == decode([chunk])


def test_one_declines_while_an_event_is_pending():
    d = SSEDecoder()
    assert d.feed(b"data: a") == []
    assert d.one(b"data: x\n\n") is None
    assert d.feed(b"\n\n") == [SSEEvent(data="a")]
    assert d.one(b"data: x\n\n") == SSEEvent(data="x")
