"""The shortcut from an Anthropic upstream (``anthropic_messages.stream_learn``) changes nothing.

Streams shaped as Claude writes them (``event:`` lines, deltas padded with spaces, a ping mid-block, a tool
call's argument fragments, every escaping) and the corpus's, translated with the shortcut and without, over
one frame per chunk and every other chunking: the same bytes; the shortcut fired where it can (counted).
"""

from __future__ import annotations

import json
import random

import orjson
import pytest
from test_shortcut import CLIENTS
from test_shortcut import SHORTCUT_PAIRS
from test_shortcut import _both
from test_shortcut import _one_clock  # noqa: F401 - the autouse fixture: one clock for both runs
from test_shortcut import _tokens

from conftest import chunkings
from conftest import frames
from corpus_loader import samples
from dragoman.protocols import Protocol


def _anth_frame(payload: bytes, spaces: int = 0) -> bytes:
    """One Anthropic event; ``spaces``: its padding before the object's last brace (``"x"}      }``)."""
    name = payload.split(b'"', 4)[3]  # the event's type, its first member
    return b"event: " + name + b"\ndata: " + payload[:-1] + b" " * spaces + b"}\n\n"


def _anth_stream(
    thinking: list[bytes], texts: list[bytes], args: list[bytes], pad: bool = True, stop: str = "tool_use"
) -> bytes:
    """A thinking block, a text block (a ping in its middle), a tool call: their deltas carry the given JSON
    string tokens as they are; padded with a varying number of spaces as the real API pads them."""
    rng = random.Random(len(texts) + len(args))

    def ev(obj: dict) -> bytes:
        return _anth_frame(orjson.dumps(obj), rng.randint(0, 12) if pad else 0)

    def delta(idx: int, kind: bytes, field: bytes, tok: bytes) -> bytes:
        inner = b'{"type":"' + kind + b'","' + field + b'":' + tok + b"}"
        return _anth_frame(
            b'{"type":"content_block_delta","index":%d,"delta":' % idx + inner + b"}", rng.randint(0, 12) if pad else 0
        )

    msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": []}
    msg |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}
    out = [ev({"type": "message_start", "message": msg})]
    block = {"type": "thinking", "thinking": "", "signature": ""}
    out.append(ev({"type": "content_block_start", "index": 0, "content_block": block}))
    out += [delta(0, b"thinking_delta", b"thinking", t) for t in thinking]
    sig = {"type": "signature_delta", "signature": "EqQBCkYIBxgCKkA" + "x" * 40}
    out.append(ev({"type": "content_block_delta", "index": 0, "delta": sig}))
    out.append(ev({"type": "content_block_stop", "index": 0}))
    out.append(ev({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}))
    half = len(texts) // 2
    out += [delta(1, b"text_delta", b"text", t) for t in texts[:half]]
    out.append(b'event: ping\ndata: {"type": "ping"}\n\n')
    out += [delta(1, b"text_delta", b"text", t) for t in texts[half:]]
    out.append(ev({"type": "content_block_stop", "index": 1}))
    call = {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}}
    out.append(ev({"type": "content_block_start", "index": 2, "content_block": call}))
    out += [delta(2, b"input_json_delta", b"partial_json", t) for t in args]
    out.append(ev({"type": "content_block_stop", "index": 2}))
    out.append(
        ev(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 9},
            }
        )
    )
    out.append(ev({"type": "message_stop"}))
    return b"".join(out)


def _args_tokens(rng: random.Random, n: int) -> list[bytes]:
    """A tool call's arguments, ``{"q": <a nasty text>}``, cut into ``n`` fragments, each spelt some way."""
    text = "".join(rng.choice(['"', "\\", "\n", "\u00e9", "\U0001f600", "a", " ", "}"]) for _ in range(4 * n))
    args = json.dumps({"q": text}, ensure_ascii=rng.random() < 0.5)
    cuts = sorted(rng.sample(range(1, len(args)), n - 1))
    pieces = [args[i:j] for i, j in zip([0, *cuts], [*cuts, len(args)], strict=True)]
    spell = (orjson.dumps, lambda t: json.dumps(t).encode(), lambda t: json.dumps(t, ensure_ascii=False).encode())
    return [rng.choice(spell)(p) for p in pieces]


#: how each client's stream ends well
_END = {
    Protocol.OPENAI_CHAT: b"data: [DONE]\n\n",
    Protocol.OPENAI_RESPONSES: b"event: response.completed\n",
    Protocol.GEMINI: b'"finishReason":"STOP"',
}
ANTHROPIC_SHORTCUT = [c for c in CLIENTS if (c, Protocol.ANTHROPIC_MESSAGES) in SHORTCUT_PAIRS]
#: the clients whose encoder writes an arguments delta from its token (Gemini sends a call whole, at its stop)
ARGS_TAKERS = [c for c in ANTHROPIC_SHORTCUT if c is not Protocol.GEMINI]


@pytest.mark.parametrize("client", [c for c in CLIENTS if c is not Protocol.ANTHROPIC_MESSAGES], ids=lambda p: p.value)
def test_an_anthropic_stream_is_the_same_with_the_shortcut(client):
    rng = random.Random(5)
    data = _anth_stream(_tokens(rng, 150), _tokens(rng, 200), _args_tokens(rng, 100))
    for name, pieces in [("frames", frames(data)), *chunkings(data, seeds=3)]:
        on, off, hits = _both(client, Protocol.ANTHROPIC_MESSAGES, pieces)
        assert on == off, name
        assert _END[client] in on, name
        if name == "frames" and client in ANTHROPIC_SHORTCUT:
            # all but each block's first delta (learnt from) and a thinking block's second (Chat's tail)
            assert hits >= (445 if client in ARGS_TAKERS else 345), hits


@pytest.mark.parametrize("client", ANTHROPIC_SHORTCUT, ids=lambda p: p.value)
def test_anthropic_frames_without_padding(client):
    rng = random.Random(6)
    data = _anth_stream(_tokens(rng, 30), _tokens(rng, 30), _args_tokens(rng, 30), pad=False)
    on, off, hits = _both(client, Protocol.ANTHROPIC_MESSAGES, frames(data))
    assert on == off
    assert hits >= (85 if client in ARGS_TAKERS else 55), hits


@pytest.mark.parametrize("stop", ["tool_use", "max_tokens"])
@pytest.mark.parametrize("client", ARGS_TAKERS, ids=lambda p: p.value)
def test_tool_arguments_read_by_the_shortcut_are_checked_as_without_it(client, stop):
    """Arguments that are not a JSON object: an error at the end, unless max_tokens cut them off; so the
    fragments the shortcut passed were kept for the check."""
    rng = random.Random(7)
    args = [b'"{\\"q\\": "', *_tokens(rng, 40)]
    data = _anth_stream([b'"hm"', b'"ok"'], [b'"a"', b'"b"'], args, stop=stop)
    on, off, hits = _both(client, Protocol.ANTHROPIC_MESSAGES, frames(data))
    assert on == off
    assert hits >= 38, hits
    assert (b"not a JSON object" in on) is (stop == "tool_use")


@pytest.mark.parametrize(
    "bad",
    [b'"a\x01b"', b'"\xff\xfe"', b'"\\ud800"', b'"a"b"', b"123", b'"\\q"', b'""'],
    ids=["control", "utf8", "surrogate", "quote", "number", "escape", "empty"],
)
@pytest.mark.parametrize("client", ANTHROPIC_SHORTCUT, ids=lambda p: p.value)
def test_a_broken_anthropic_delta_after_learnt_ones_fails_as_without_the_shortcut(client, bad):
    ok = [b'"one"', b'"two"', b'"three"']
    data = _anth_stream(ok, [*ok, bad, b'"after"'], [b'"{}"'])
    on, off, hits = _both(client, Protocol.ANTHROPIC_MESSAGES, frames(data))
    assert on == off
    assert hits >= 3, hits


def test_a_text_block_turned_cited_takes_the_usual_way():
    """After a ``citations_delta`` the decoder counts the block's text (the citations' spans): its deltas,
    though the learnt frame, are not the plain ones any more."""
    toks = [b'"one"', b'"two"', b'"three"', b'"four"', b'"five"', b'"six"']
    data = _anth_stream([b'"hm"'], toks, [b'"{}"'], pad=False)
    each = frames(data)
    i = next(i for i, f in enumerate(each) if b'"text":"four"' in f)
    cite = {"type": "web_search_result_location", "cited_text": "one two", "url": "https://x.example/", "title": "X"}
    cite["encrypted_index"] = "e1"
    payload = {"type": "content_block_delta", "index": 1, "delta": {"type": "citations_delta", "citation": cite}}
    data = b"".join([*each[:i], _anth_frame(orjson.dumps(payload)), *each[i:]])
    on, off, hits = _both(Protocol.OPENAI_RESPONSES, Protocol.ANTHROPIC_MESSAGES, frames(data))
    assert on == off
    assert b'"url_citation"' in on
    assert hits >= 2, hits


@pytest.mark.parametrize("where", ["after-its-stop", "other-index"])
@pytest.mark.parametrize("client", ANTHROPIC_SHORTCUT, ids=lambda p: p.value)
def test_an_anthropic_delta_the_usual_way_refuses_is_refused_with_the_shortcut(client, where):
    toks = [b'"one"', b'"two"', b'"three"', b'"four"']
    data = _anth_stream(toks, toks, [b'"{}"'], pad=False)
    each = frames(data)
    i = next(i for i, f in enumerate(each) if b'"index":1,"delta":{"type":"text_delta","text":"three"' in f)
    if where == "after-its-stop":  # the learnt frame again once its block stopped
        stop = each.index(b'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n')
        data = b"".join([*each[: stop + 1], each[i], *each[stop + 1 :]])
    else:  # a text delta of block 1 written for block 0 (a thinking block, stopped)
        data = data.replace(each[i], each[i].replace(b'"index":1', b'"index":0'))
    on, off, hits = _both(client, Protocol.ANTHROPIC_MESSAGES, frames(data))
    assert on == off
    assert b"without an open block" in on
    assert hits >= 2, hits


@pytest.mark.parametrize("s", samples("anthropic", stream=True), ids=repr)
@pytest.mark.parametrize("client", [c for c in CLIENTS if c is not Protocol.ANTHROPIC_MESSAGES], ids=lambda p: p.value)
def test_corpus_anthropic_streams_are_the_same_with_the_shortcut(s, client):
    for name, pieces in [("frames", frames(s.body)), *chunkings(s.body, seeds=2)]:
        if name != "bytewise" or len(s.body) < 20_000:
            on, off, _ = _both(client, Protocol.ANTHROPIC_MESSAGES, pieces)
            assert on == off, name


@pytest.mark.parametrize(
    ("name", "least"),
    [("thinking-signature", 105), ("mcp-servers", 29), ("redacted-thinking", 13), ("plain-text.c", 5)],
)
@pytest.mark.parametrize("client", ANTHROPIC_SHORTCUT, ids=lambda p: p.value)
def test_the_shortcut_fires_on_real_anthropic_streams(client, name, least):
    """Claude's padded deltas (thinking, text, tool arguments) and unpadded ones: all but a few per block."""
    s = next(x for x in samples("anthropic", stream=True) if name in x.name)
    on, off, hits = _both(client, Protocol.ANTHROPIC_MESSAGES, frames(s.body))
    assert on == off
    assert hits >= least, hits


@pytest.mark.parametrize("client", ANTHROPIC_SHORTCUT, ids=lambda p: p.value)
def test_deltas_sent_on_several_data_lines_are_not_learnt(client):
    """An event whose data spans two ``data:`` lines holds a line feed; a later frame of the same bytes but
    a bare second line (not a data line: the event's data is cut short) must fail as without the shortcut."""
    toks = [b'"one"', b'"two"', b'"three"']
    each = frames(_anth_stream(toks, toks, [b'"{}"'], pad=False))
    split = [
        f.replace(b',"delta":{"type":"text_delta"', b',"delta":\ndata: {"type":"text_delta"')
        if b'"index":1,"delta":{"type":"text_delta"' in f
        else f
        for f in each
    ]
    i = max(i for i, f in enumerate(split) if b'"text_delta"' in f)  # block 1's last delta, then its stop
    bare = split[i].replace(b',"delta":\ndata: {', b',"delta":\n{')
    assert bare != split[i]
    data = b"".join([*split[: i + 1], bare, *split[i + 1 :]])
    on, off, _ = _both(client, Protocol.ANTHROPIC_MESSAGES, frames(data))
    assert on == off
    assert b"nvalid" in on or b"rror" in on
