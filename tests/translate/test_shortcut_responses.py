"""The shortcut from a Responses upstream (``openai_responses.stream_shortcut``) changes nothing.

Streams shaped as the Responses API writes them (``sequence_number`` second, padding last; or, as in
bench/streams.py, the counter last) with a reasoning item of two summary parts, a message and a function
call, every escaping in their deltas, and the corpus's: translated with the shortcut and without, over one
frame per chunk and every other chunking, the same bytes (the ``.done`` events check the characters the
deltas carried, the arguments are checked as JSON); the shortcut fired where it can (counted).
"""

from __future__ import annotations

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

RESPONSES = Protocol.OPENAI_RESPONSES
TAKERS = [c for c in CLIENTS if (c, RESPONSES) in SHORTCUT_PAIRS]
OTHERS = [c for c in CLIENTS if c is not RESPONSES]
#: the clients whose encoder writes an arguments delta from its token (Gemini sends a call whole, at its stop)
ARGS_TAKERS = [c for c in TAKERS if c is not Protocol.GEMINI]
_MARK = "\x00delta\x00"
_RS, _MSG, _FC = "rs_0fab01", "msg_0fab02", "fc_0fab03"


class _Writer:
    """Responses events with their ``sequence_number`` (second, or last after the padding: ``last``)."""

    def __init__(self, last: bool, pad: bool) -> None:
        self.out: list[bytes] = []
        self.seq = 0
        self.last = last
        self.pad = pad
        self.rng = random.Random(3)

    def ev(self, payload: dict, token: bytes | None = None) -> None:
        t = payload.pop("type")
        obj = {"type": t} if self.last else {"type": t, "sequence_number": self.seq}
        obj |= payload
        if token is not None and self.pad:
            obj["obfuscation"] = "".join(self.rng.choice("abcXYZ019") for _ in range(self.rng.randint(0, 12)))
        if self.last:
            obj["sequence_number"] = self.seq
        self.seq += 1
        data = orjson.dumps(obj)
        if token is not None:
            data = data.replace(orjson.dumps(_MARK), token)
        self.out.append(b"event: " + t.encode() + b"\ndata: " + data + b"\n\n")


def _text(tokens: list[bytes]) -> str:
    return "".join(orjson.loads(t) for t in tokens)


def _response(status: str, output: list) -> dict:
    return {"id": "resp_1", "object": "response", "created_at": 1, "status": status, "model": "m", "output": output}


def _stream(summaries: list[list[bytes]], texts: list[bytes], args: list[bytes], last=False, pad=True) -> bytes:
    w = _Writer(last, pad)
    w.ev({"type": "response.created", "response": _response("in_progress", [])})
    w.ev(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": _RS, "type": "reasoning", "summary": []},
        }
    )
    parts = []
    for si, toks in enumerate(summaries):
        part = {"type": "summary_text", "text": ""}
        at = {"item_id": _RS, "output_index": 0, "summary_index": si}
        w.ev({"type": "response.reasoning_summary_part.added", **at, "part": part})
        for tok in toks:
            w.ev({"type": "response.reasoning_summary_text.delta", **at, "delta": _MARK}, tok)
        full = _text(toks)
        w.ev({"type": "response.reasoning_summary_text.done", **at, "text": full})
        w.ev({"type": "response.reasoning_summary_part.done", **at, "part": {"type": "summary_text", "text": full}})
        parts.append({"type": "summary_text", "text": full})
    rs = {"id": _RS, "type": "reasoning", "summary": parts}
    w.ev({"type": "response.output_item.done", "output_index": 0, "item": rs})
    msg = {"id": _MSG, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    w.ev({"type": "response.output_item.added", "output_index": 1, "item": msg})
    at = {"item_id": _MSG, "output_index": 1, "content_index": 0}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    w.ev({"type": "response.content_part.added", **at, "part": part})
    for tok in texts:
        w.ev({"type": "response.output_text.delta", **at, "delta": _MARK, "logprobs": []}, tok)
    full = _text(texts)
    w.ev({"type": "response.output_text.done", **at, "text": full, "logprobs": []})
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": full}
    w.ev({"type": "response.content_part.done", **at, "part": part})
    msg = {**msg, "status": "completed", "content": [part]}
    w.ev({"type": "response.output_item.done", "output_index": 1, "item": msg})
    call = {"id": _FC, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_1"}
    call["name"] = "get"
    w.ev({"type": "response.output_item.added", "output_index": 2, "item": call})
    for tok in args:
        w.ev({"type": "response.function_call_arguments.delta", "item_id": _FC, "output_index": 2, "delta": _MARK}, tok)
    full = _text(args)
    w.ev({"type": "response.function_call_arguments.done", "item_id": _FC, "output_index": 2, "arguments": full})
    call = {**call, "status": "completed", "arguments": full}
    w.ev({"type": "response.output_item.done", "output_index": 2, "item": call})
    done = _response("completed", [rs, msg, call])
    done["usage"] = {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14}
    w.ev({"type": "response.completed", "response": done})
    return b"".join(w.out)


def _args(rng: random.Random, n: int, valid: bool = True) -> list[bytes]:
    """A call's arguments (``{"q": <a nasty text>}``, or not JSON) cut into ``n`` fragments, each spelt some way."""
    toks = _tokens(rng, n)
    if not valid:
        return toks
    whole = orjson.dumps({"q": _text(toks)}).decode()
    cuts = sorted(rng.sample(range(1, len(whole)), n - 1))
    pieces = [whole[i:j] for i, j in zip([0, *cuts], [*cuts, len(whole)], strict=True)]
    return [rng.choice((orjson.dumps, lambda s: orjson.dumps(s).replace(b"/", b"\\/")))(p) for p in pieces]


@pytest.mark.parametrize("last", [False, True], ids=["counter-second", "counter-last"])
@pytest.mark.parametrize("client", OTHERS, ids=lambda p: p.value)
def test_a_responses_stream_is_the_same_with_the_shortcut(client, last):
    rng = random.Random(11)
    data = _stream([_tokens(rng, 80), _tokens(rng, 60)], _tokens(rng, 200), _args(rng, 100), last=last)
    for name, pieces in [("frames", frames(data)), *chunkings(data, seeds=2)]:
        on, off, hits = _both(client, RESPONSES, pieces)
        assert on == off, name
        assert b"rror" not in on.replace(b'"error":null', b""), name
        if name == "frames" and client in TAKERS:
            # all but each item's or summary part's first delta (learnt from) and Chat's thinking tail
            assert hits >= (430 if client in ARGS_TAKERS else 330), hits


@pytest.mark.parametrize("client", TAKERS, ids=lambda p: p.value)
def test_responses_frames_without_padding(client):
    rng = random.Random(12)
    data = _stream([_tokens(rng, 30)], _tokens(rng, 30), _args(rng, 30), pad=False)
    on, off, hits = _both(client, RESPONSES, frames(data))
    assert on == off
    assert hits >= (84 if client in ARGS_TAKERS else 54), hits


@pytest.mark.parametrize("client", ARGS_TAKERS, ids=lambda p: p.value)
def test_arguments_read_by_the_shortcut_are_checked_as_without_it(client):
    """Arguments that are not JSON: an error at the end, the same both ways (the fragments were kept)."""
    rng = random.Random(13)
    data = _stream([[b'"hm"']], [b'"a"', b'"b"'], _args(rng, 40, valid=False))
    on, off, hits = _both(client, RESPONSES, frames(data))
    assert on == off
    assert b"not a JSON object" in on
    assert hits >= 38, hits


@pytest.mark.parametrize("where", ["text", "args", "summary"])
@pytest.mark.parametrize("client", TAKERS, ids=lambda p: p.value)
def test_a_done_that_disagrees_with_the_deltas_is_found_as_without_the_shortcut(client, where):
    """The ``.done`` events are checked against what the deltas carried (characters, the arguments' CRC):
    a full value that differs from them must be seen the same way with the shortcut."""
    rng = random.Random(14)
    summaries, texts, args = [_tokens(rng, 20)], _tokens(rng, 20), _args(rng, 20)
    data = _stream(summaries, texts, args)
    field = {"text": b"response.output_text.done", "args": b"response.function_call_arguments.done"}
    field["summary"] = b"response.reasoning_summary_text.done"
    each = frames(data)
    i = next(i for i, f in enumerate(each) if f.startswith(b"event: " + field[where]))
    key = b'"arguments":"' if where == "args" else b'"text":"'
    data = data.replace(each[i], each[i].replace(key, key + b"X", 1))
    on, off, hits = _both(client, RESPONSES, frames(data))
    assert on == off
    assert hits >= (50 if client in ARGS_TAKERS else 30), hits


@pytest.mark.parametrize(
    "bad",
    [b'"a\x01b"', b'"\xff\xfe"', b'"\\ud800"', b'"a"b"', b"123", b'"\\q"'],
    ids=["control", "utf8", "surrogate", "quote", "number", "escape"],
)
@pytest.mark.parametrize("client", TAKERS, ids=lambda p: p.value)
def test_a_broken_responses_delta_after_learnt_ones_fails_as_without_the_shortcut(client, bad):
    ok = [b'"one"', b'"two"', b'"three"']
    data = _stream([ok], ok + [b'"after"'], [b'"{}"'])
    good = next(f for f in frames(data) if b'"delta":"after"' in f)
    data = data.replace(good, good.replace(b'"after"', bad))
    on, off, hits = _both(client, RESPONSES, frames(data))
    assert on == off
    assert hits >= 3, hits


@pytest.mark.parametrize("s", samples("openai-responses", stream=True), ids=repr)
@pytest.mark.parametrize("client", OTHERS, ids=lambda p: p.value)
def test_corpus_responses_streams_are_the_same_with_the_shortcut(s, client):
    for name, pieces in [("frames", frames(s.body)), *chunkings(s.body, seeds=2)]:
        if name != "bytewise" or len(s.body) < 20_000:
            on, off, _ = _both(client, RESPONSES, pieces)
            assert on == off, name


@pytest.mark.parametrize(
    ("name", "least"),
    [("reasoning-summary-deltas", 640), ("xai-responses-reasoning", 660), ("code-interpreter", 300), ("mcp.", 170)],
)
@pytest.mark.parametrize("client", TAKERS, ids=lambda p: p.value)
def test_the_shortcut_fires_on_real_responses_streams(client, name, least):
    """OpenAI's summary, text and argument deltas (counter second, padding last) and xAI's: all but a few."""
    s = next(x for x in samples("openai-responses", stream=True) if name in x.name)
    on, off, hits = _both(client, RESPONSES, frames(s.body))
    assert on == off
    assert hits >= least, hits


@pytest.mark.parametrize(
    ("after", "kind"),
    [
        (b"response.output_text.done", b"output_text"),
        (b"response.content_part.done", b"output_text"),
        (b"response.output_item.done", b"output_text"),
        (b"response.reasoning_summary_part.done", b"reasoning_summary_text"),
        (b"response.function_call_arguments.done", b"function_call_arguments"),
    ],
    ids=["text-done", "part-done", "item-done", "summary-part-done", "args-done"],
)
@pytest.mark.parametrize("client", TAKERS, ids=lambda p: p.value)
def test_a_learnt_delta_after_its_item_ended_takes_the_usual_way(client, after, kind):
    """The learnt frame again once its part, summary part or item is done: what the usual way makes of it
    (each client's encoder refuses it too: a decoder that skipped its own check would not show here)."""
    toks = [b'"one"', b'"two"', b'"three"', b'"four"']
    data = _stream([toks], toks, [b'"{\\"a\\""', b'"\\":1}"', b'" "'])
    each = frames(data)
    again = [f for f in each if f.startswith(b"event: response." + kind + b".delta")][-1]
    # the event ending the delta's own item (the message is output 1)
    i = next(
        i
        for i, f in enumerate(each)
        if f.startswith(b"event: " + after) and (b"item" not in after or b'"output_index":1' in f)
    )
    data = b"".join([*each[: i + 1], again, *each[i + 1 :]])
    on, off, hits = _both(client, RESPONSES, frames(data))
    assert on == off
    assert hits >= 6, hits
