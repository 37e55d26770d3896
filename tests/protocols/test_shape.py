"""``protocols._shape``: a learnt delta frame read again without a parse gives what a parse would."""

from __future__ import annotations

import json
import random

import orjson
import pytest

from dragoman.protocols._shape import Shape
from dragoman.protocols._shape import learn

HEAD = '{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":'


def _payload(tok: str, tail: str = '},"finish_reason":null}]}') -> str:
    return HEAD + tok + tail


def _shape(pad: str | None = None) -> Shape:
    tail = '},"finish_reason":null}]' + (f',"obfuscation":"{pad}"' if pad is not None else "") + "}"
    shape = learn(_payload('"hello"', tail), b'"content":', "hello", pad)
    assert shape is not None
    return shape


def _frame(tok: bytes, pad: bytes | None = None) -> bytes:
    tail = b'},"finish_reason":null}]' + (b',"obfuscation":"' + pad + b'"' if pad is not None else b"") + b"}\n\n"
    return b"data: " + HEAD.encode() + tok + tail


def test_learn_cuts_around_the_text():
    shape = _shape()
    assert shape.head == b"data: " + HEAD.encode()
    assert shape.match(_frame(b'"world"')) == b'"world"'


@pytest.mark.parametrize(
    ("tok", "want"),
    [
        (b'"plain"', b'"plain"'),
        ('"na\u00efve \U0001f600"'.encode(), '"na\u00efve \U0001f600"'.encode()),
        (b'"a\\nb\\"c\\\\d\\t"', b'"a\\nb\\"c\\\\d\\t"'),  # escapes orjson writes the same: kept
        (b'"caf\\u00e9"', '"caf\u00e9"'.encode()),  # another spelling: rewritten as orjson writes it
        (b'"a\\/b"', b'"a/b"'),
        (b'"\\u0001"', b'"\\u0001"'),
        (b'"\\ud83d\\ude00"', '"\U0001f600"'.encode()),
    ],
)
def test_the_token_is_what_orjson_writes(tok, want):
    got = _shape().match(_frame(tok))
    assert got == want
    assert got == orjson.dumps(orjson.loads(tok))


@pytest.mark.parametrize(
    "tok",
    [
        b'""',  # empty: the usual way sends nothing
        b'"a"b"',  # a raw quote: not one token
        b'"a\x01b"',  # a raw control character: invalid JSON
        b'"a\nb"',
        b'"\xff\xfe"',  # invalid UTF-8
        b'"\xed\xa0\x80"',  # a surrogate encoded in UTF-8
        b'"\\ud800"',  # a lone surrogate escape
        b'"\\x41"',  # no such escape
        b'"\\u12"',
        b'"open',
        b"123",
        b"null",
    ],
)
def test_anything_else_is_not_matched(tok):
    assert _shape().match(_frame(tok)) is None


def test_other_frames_are_not_matched():
    shape = _shape()
    assert shape.match(_frame(b'"x"')[:-1]) is None  # not a whole frame
    assert shape.match(_frame(b'"x"') + _frame(b'"y"')) is None  # two frames
    assert shape.match(_frame(b'"x"').replace(b'"index":0', b'"index":1')) is None
    assert shape.match(b"event: x\n" + _frame(b'"x"')) is None
    assert shape.match(_frame(b'"x"', pad=b"abc")) is None  # a padding string it did not learn


def test_a_padding_string_varies():
    shape = _shape(pad="Qk3")
    assert shape.match(_frame(b'"x"', pad=b"a")) == b'"x"'
    assert shape.match(_frame(b'"x"', pad=b"")) == b'"x"'
    assert shape.match(_frame(b'"x"', pad=b"0123456789abcdefghij")) == b'"x"'
    for bad in (b'a"b', b"a\\b", b"\xc3\xa9", b"a\x01"):
        assert shape.match(_frame(b'"x"', pad=bad)) is None, bad
    # the text may hold what the padding's literal holds, escaped
    tok = b'"},\\"finish_reason\\":null}],\\"obfuscation\\":\\"z\\""'
    assert shape.match(_frame(tok, pad=b"p")) == tok


def test_learn_refuses_what_it_cannot_cut():
    assert learn(_payload('"caf\\u00e9"'), b'"content":', "caf\u00e9", None) is None  # another spelling
    twice = '{"a":{"content":"x"},"b":{"content":"x"}}'
    assert learn(twice, b'"content":', "x", None) is None
    assert learn(_payload('"x"'), b'"content":', "x", "pad") is None  # no padding member last
    assert learn(_payload('"x"', '},"obfuscation":"a\\"b"}'), b'"content":', "x", 'a"b') is None


def test_random_texts_match_as_a_parse_would():
    shape = _shape()
    rng = random.Random(7)
    alphabet = ['"', "\\", "\n", "\t", "\x01", "\x1f", "/", "\u00e9", "\U0001f600", "\u2028", "\x7f", "a", " ", "}"]
    hits = 0
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        for tok in (orjson.dumps(text), json.dumps(text).encode(), json.dumps(text, ensure_ascii=False).encode()):
            got = shape.match(_frame(tok))
            assert got == orjson.dumps(text), (text, tok)
            hits += 1
    assert hits == 6000


def test_spaces_between_the_punctuation_after_the_last_string_vary():
    """Anthropic pads its delta frames with spaces before the last brace; after the frame's last string only
    JSON punctuation and bare literals follow, so spaces there change nothing a parse gives."""
    ev = b"event: content_block_delta\n"
    head = '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":'
    shape = learn(head + '"Hi"}      }', b'"text":', "Hi", None, ev)
    assert shape is not None and shape.head == ev + b"data: " + head.encode()

    def frame(end: bytes) -> bytes:
        return ev + b"data: " + head.encode() + b'"yo"' + end + b"\n\n"

    for end in (b"}}", b"}  }", b"} }   ", b"  }}", b"}" + b" " * 40 + b"}"):
        assert shape.match(frame(end)) == b'"yo"', end
    for end in (b"}", b"}}}", b"}\t}", b"}\n}", b"}},", b"} x}"):
        assert shape.match(frame(end)) is None, end
    # a bare literal stays whole: ``nu ll`` is not JSON
    shape = learn('{"a":{"text":"Hi"},"b":null}', b'"text":', "Hi", None)
    assert shape is not None
    assert shape.match(b'data: {"a":{"text":"x"} , "b" :null }\n\n') is None  # before the last string: literal
    assert shape.match(b'data: {"a":{"text":"x"},"b": null }\n\n') == b'"x"'
    assert shape.match(b'data: {"a":{"text":"x"},"b":nu ll}\n\n') is None
    for raw in (b'data: {"a":{"text":"x"},"b": null }\n\n', b'data: {"a":{"text":"x"},"b":null}\n\n'):
        assert orjson.loads(raw[6:])["a"]["text"] == "x"


_RESP = '{"type":"response.output_text.delta","sequence_number":%s,"item_id":"msg_1","output_index":1,"content_index":0,"delta":%s,"logprobs":[],"obfuscation":%s}'
_BENCH = '{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"delta":%s,"obfuscation":%s,"sequence_number":%s}'


@pytest.mark.parametrize("order", ["counter-first", "counter-last"])
def test_a_counter_and_a_padding_vary_where_they_are(order):
    """The Responses API numbers its events (``sequence_number``, second) and pads them (last); bench/streams.py
    writes the counter last: both are slots, the rest literal."""

    def payload(seq: str, tok: str, pad: str) -> str:
        return _RESP % (seq, tok, pad) if order == "counter-first" else _BENCH % (tok, pad, seq)

    shape = learn(payload("7", '"Hi"', '"Qk3"'), b'"delta":', "Hi", "Qk3", b"event: response.output_text.delta\n", 7)
    assert shape is not None

    def frame(seq: bytes, tok: bytes, pad: bytes) -> bytes:
        return (
            b"event: response.output_text.delta\ndata: "
            + payload(seq.decode(), tok.decode(), pad.decode()).encode()
            + b"\n\n"
        )

    for seq in (b"0", b"8", b"12345", b"999999999999999999"):
        assert shape.match(frame(seq, b'"yo"', b'"p"')) == b'"yo"', seq
        assert shape.match(frame(seq, b'"\\u00e9"', b'""')) == '"\u00e9"'.encode()
    for seq in (b"07", b"-1", b"1.0", b"1e3", b"1000000000000000000", b'"8"', b"", b"null"):
        assert shape.match(frame(seq, b'"yo"', b'"p"')) is None, seq
    assert shape.match(frame(b"8", b'"yo"', b'"a\\"b"')) is None
    assert shape.match(frame(b"8", b'"yo"', b"null")) is None


def test_a_counter_or_padding_found_twice_or_spelt_otherwise_is_not_cut():
    p = _RESP % ("7", '"Hi"', '"Qk3"')
    assert learn(p, b'"delta":', "Hi", "Qk3", seq=7) is not None
    assert learn(p, b'"delta":', "Hi", "Qk3", seq=8) is None  # not its value
    assert learn(p, b'"delta":', "Hi", "other", seq=7) is None
    twice = p[:-1] + ',"x":{"sequence_number":7}}'
    assert learn(twice, b'"delta":', "Hi", "Qk3", seq=7) is None
    prefix = p[:-1] + ',"x":{"sequence_number":71}}'  # 7 is a prefix of 71: found twice
    assert learn(prefix, b'"delta":', "Hi", "Qk3", seq=7) is None
    assert learn(p.replace('"Qk3"', '"Q\\u006b3"'), b'"delta":', "Hi", "Qk3", seq=7) is None
    # without a counter slot the counter is literal: the next event is another frame
    shape = learn(p, b'"delta":', "Hi", "Qk3")
    assert shape is not None
    assert shape.match(b"data: " + (_RESP % ("8", '"x"', '"Q"')).encode() + b"\n\n") is None
    assert shape.match(b"data: " + (_RESP % ("7", '"x"', '"Q"')).encode() + b"\n\n") == b'"x"'


def test_data_of_several_lines_is_not_learnt():
    """``data: {"a":`` then ``data: "content":"x"}``: the event's data holds a line feed; a frame with those
    bytes on one ``data:`` line and a bare second line is another event (its second line no data line)."""
    assert learn('{"choices":\n[{"delta":{"content":"x"}}]}', b'"content":', "x", None) is None
    assert learn('{"choices":\r[{"delta":{"content":"x"}}]}', b'"content":', "x", None) is None
    assert learn('{"choices":[{"delta":{"content":"x"}}]}', b'"content":', "x", None) is not None
