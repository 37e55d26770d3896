"""The live lint's cheap path (``dragoman.lint.replay``): long compact streams, as the encoders and the real
providers write them, are mostly checked by replaying the last delta's template; a violation inside such a
run (a wrong index, a broken string, a skipped counter, a call never opened) still gives the batch
validator's message at the same event index, over every chunking and through ``FlowLint``'s batches."""

from __future__ import annotations

import orjson
import pytest

from conftest import chunkings
from dragoman.lint import anthropic as la
from dragoman.lint import chat as lc
from dragoman.lint import responses as lr
from dragoman.lint.flow import FlowLint
from dragoman.lint.live import StreamLint


def _ev(obj: dict, named: bool = True) -> bytes:
    data = orjson.dumps(obj)
    return (b"event: " + obj["type"].encode() + b"\n" if named else b"") + b"data: " + data + b"\n\n"


def _anthropic(n: int = 60) -> list[bytes]:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "usage": {"input_tokens": 3, "output_tokens": 1},
        },
    }
    out = [_ev(start), _ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
    for i in range(n):
        delta = {"type": "text_delta", "text": f'wörd {i} "q"\n'}
        out.append(_ev({"type": "content_block_delta", "index": 0, "delta": delta}))
    out += [
        _ev({"type": "content_block_stop", "index": 0}),
        _ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        _ev({"type": "message_stop"}),
    ]
    return out


def _chat_tools(n: int = 40) -> list[bytes]:
    base = {"id": "chatcmpl-0123456789abc", "object": "chat.completion.chunk", "created": 1754693439, "model": "m"}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return (
            b"data: "
            + orjson.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            + b"\n\n"
        )

    out = [chunk({"role": "assistant", "content": ""})]
    for k in (0, 1):
        call = {"index": k, "id": f"call_{k}", "type": "function", "function": {"name": "f", "arguments": ""}}
        out.append(chunk({"tool_calls": [call]}))
    pieces = ['{"a": "', *("x" * 3 for _ in range(n)), '"}']
    for p in pieces:  # the two calls' argument deltas interleave
        for k in (0, 1):
            out.append(chunk({"tool_calls": [{"index": k, "function": {"arguments": p}}]}))
    out += [chunk({}, "tool_calls"), b"data: [DONE]\n\n"]
    return out


ITEM = "msg_0fabc13af1ee0049006a"  # long: a Fixed slot of the delta template, as a real item id


def _responses(n: int = 50) -> list[bytes]:
    seq = iter(range(10_000))
    resp = {"id": "r1", "object": "response", "status": "in_progress", "output": [], "model": "m", "created_at": 1}

    def ev(obj: dict) -> bytes:
        return _ev({**obj, "sequence_number": next(seq)})

    item = {"id": ITEM, "type": "message", "role": "assistant", "content": [], "status": "in_progress"}
    loc = {"item_id": ITEM, "output_index": 0, "content_index": 0}
    text = "".join(f"t{i} " for i in range(n))
    done = {**item, "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}
    final = {**resp, "status": "completed", "output": [done]}
    final["usage"] = {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
    return [
        ev({"type": "response.created", "response": resp}),
        ev({"type": "response.in_progress", "response": resp}),
        ev({"type": "response.output_item.added", "output_index": 0, "item": item}),
        ev(
            {
                "type": "response.content_part.added",
                **loc,
                "part": {"type": "output_text", "text": "", "annotations": []},
            }
        ),
        *(ev({"type": "response.output_text.delta", **loc, "delta": f"t{i} "}) for i in range(n)),
        ev({"type": "response.output_text.done", **loc, "text": text}),
        ev({"type": "response.content_part.done", **loc, "part": done["content"][0]}),
        ev({"type": "response.output_item.done", "output_index": 0, "item": done}),
        ev({"type": "response.completed", "response": final}),
    ]


STREAMS = {"anthropic": (_anthropic, la), "chat": (_chat_tools, lc), "responses": (_responses, lr)}


def _first_violation(protocol: str, pieces: list[bytes]):
    lint = StreamLint(protocol)
    found = [v for v in (*(lint.feed(p) for p in pieces), lint.close()) if v is not None]
    assert len(found) <= 1, found
    return found[0] if found else None


@pytest.mark.parametrize("protocol", sorted(STREAMS))
def test_a_long_good_stream_is_mostly_replayed(protocol, monkeypatch):
    make, _ = STREAMS[protocol]
    data = b"".join(make())
    full = []
    lint = StreamLint(protocol)
    orig = lint._feed_lines
    monkeypatch.setattr(lint, "_feed_lines", lambda chunk: full.append(chunk) or orig(chunk))
    assert lint.feed(data) is None and lint.close() is None
    frames = data.count(b"\n\n")
    assert len(full) < frames / 4, (len(full), frames)  # the deltas went through their templates
    for label, pieces in chunkings(data, seeds=3):
        assert _first_violation(protocol, pieces) is None, label


def _broken(protocol: str) -> dict[str, tuple[list[bytes], int]]:
    """name -> (events, index of the broken one): each break sits in the middle of a run of deltas."""
    make, _ = STREAMS[protocol]
    ev = make()
    mid = len(ev) // 2
    good = ev[mid]
    if protocol == "anthropic":
        cases = {
            "another block's index": good.replace(b'"index":0', b'"index":1'),
            "a bad escape in the text": good.replace(b'\\"q\\"', b"\\q"),
            "a raw control character in the text": good.replace(b"\\n", b"\t"),
            "a string where the text is cut": good.replace(b'\\n"}}', b"\\n}}"),
        }
    elif protocol == "chat":
        cases = {
            "a call never opened": good.replace(b'"index":0,"function"', b'"index":5,"function"').replace(
                b'"index":1,"function"', b'"index":5,"function"'
            ),
            "arguments not a string": good.replace(b'"arguments":"xxx"', b'"arguments":7'),
            "invalid UTF-8 in the arguments": good.replace(b'"arguments":"xxx"', b'"arguments":"x\xffx"'),
            "the chunk id changes": good.replace(b"chatcmpl-0123456789abc", b"chatcmpl-0123456789abd"),
        }
    else:
        num = good.split(b'"sequence_number":')[1].split(b"}")[0]
        cases = {
            "a skipped sequence number": good.replace(
                b'"sequence_number":' + num, b'"sequence_number":%d' % (int(num) + 1)
            ),
            "a delta for another item": good.replace(ITEM.encode(), ITEM.encode()[:-1] + b"b"),
        }
    out = {}
    for name, bad in cases.items():
        assert bad != good, name
        out[name] = ([*ev[:mid], bad, *ev[mid + 1 :]], mid)
    return out


CASES = [(p, name) for p in sorted(STREAMS) for name in _broken(p)]


@pytest.mark.parametrize(("protocol", "name"), CASES)
def test_a_break_inside_a_run_is_found_at_its_index(protocol, name):
    events, index = _broken(protocol)[name]
    data = b"".join(events)
    _, module = STREAMS[protocol]
    with pytest.raises(AssertionError) as batch:
        module.validate_stream(data)
    for label, pieces in chunkings(data, seeds=2):
        v = _first_violation(protocol, pieces)
        assert v is not None, label
        assert v.index == index, (label, v)
        assert v.message in str(batch.value) or "UTF-8" in v.message, (label, v.message)


@pytest.mark.parametrize(("protocol", "name"), CASES[:3])
def test_flowlint_batches_report_the_same_index(protocol, name):
    events, index = _broken(protocol)[name]
    client = {"anthropic": "anthropic", "chat": "openai-chat", "responses": "openai-responses"}[protocol]
    lint = FlowLint("log", client, "gemini")
    for e in events:
        lint.feed_ours(e)
    lint.feed_ours(b"", final=True)
    assert [(r["side"], r["index"]) for r in lint.reports] == [("ours", index)]


def test_a_changed_value_the_grammar_allows_is_not_flagged():
    """``created`` (a Fixed slot of the template) may change: the frame takes the full check, which passes."""
    ev = _chat_tools()
    mid = len(ev) // 2
    ev[mid] = ev[mid].replace(b'"created":1754693439', b'"created":1754693440')
    data = b"".join(ev)
    lc.validate_stream(data)
    for label, pieces in chunkings(data, seeds=2):
        assert _first_violation("chat", pieces) is None, label


def _responses_interleaved(n: int = 30) -> list[bytes]:
    """Two function calls open at once, their argument deltas interleaved (tolerated upstream grammar)."""
    seq = iter(range(10_000))
    resp = {"id": "r1", "object": "response", "status": "in_progress", "output": [], "model": "m", "created_at": 1}

    def ev(obj: dict) -> bytes:
        return _ev({**obj, "sequence_number": next(seq)})

    ids = ["fc_0fabc13af1ee0049006a0", "fc_0fabc13af1ee0049006a1"]
    items = [
        {
            "id": i,
            "type": "function_call",
            "call_id": f"call_{k}",
            "name": "f",
            "arguments": "",
            "status": "in_progress",
        }
        for k, i in enumerate(ids)
    ]
    args = '{"a": "' + "x" * n + '"}'
    out = [ev({"type": "response.created", "response": resp}), ev({"type": "response.in_progress", "response": resp})]
    out += [ev({"type": "response.output_item.added", "output_index": k, "item": it}) for k, it in enumerate(items)]
    for ch in args:
        for k, i in enumerate(ids):
            out.append(
                ev({"type": "response.function_call_arguments.delta", "item_id": i, "output_index": k, "delta": ch})
            )
    done = [{**it, "arguments": args, "status": "completed"} for it in items]
    for k, i in enumerate(ids):
        out.append(
            ev({"type": "response.function_call_arguments.done", "item_id": i, "output_index": k, "arguments": args})
        )
        out.append(ev({"type": "response.output_item.done", "output_index": k, "item": done[k]}))
    final = {
        **resp,
        "status": "completed",
        "output": done,
        "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
    }
    out.append(ev({"type": "response.completed", "response": final}))
    return out


def _seq_of(frame: bytes) -> int:
    return int(frame.split(b'"sequence_number":')[1].split(b"}")[0])


@pytest.mark.parametrize("swap", [False, True])
def test_interleaved_counted_deltas_are_replayed_and_a_wrong_count_is_found(swap):
    ev = _responses_interleaved()
    data = b"".join(ev)
    lr.validate_stream(data, strict=False)
    assert _lint_tolerant([data]) is None
    mid = len(ev) // 2
    if swap:  # two neighbours' counters exchanged: each frame still counts on from a template's own last one
        a, b = _seq_of(ev[mid]), _seq_of(ev[mid + 1])
        ev[mid] = ev[mid].replace(b'"sequence_number":%d' % a, b'"sequence_number":%d' % b)
        ev[mid + 1] = ev[mid + 1].replace(b'"sequence_number":%d' % b, b'"sequence_number":%d' % a)
    else:
        a = _seq_of(ev[mid])
        ev[mid] = ev[mid].replace(b'"sequence_number":%d' % a, b'"sequence_number":%d' % (a + 1))
    data = b"".join(ev)
    with pytest.raises(AssertionError) as batch:
        lr.validate_stream(data, strict=False)
    for label, pieces in chunkings(data, seeds=2):
        lint = StreamLint("responses", strict=False)
        found = [v for v in (*(lint.feed(p) for p in pieces), lint.close()) if v is not None]
        assert [v.index for v in found] == [mid], (label, found)
        assert found[0].message in str(batch.value), label


def _lint_tolerant(pieces: list[bytes]):
    lint = StreamLint("responses", strict=False)
    found = [v for v in (*(lint.feed(p) for p in pieces), lint.close()) if v is not None]
    return found[0] if found else None


def test_a_cut_off_stream_is_checked_as_far_as_it_went():
    """``FlowLint.flush`` (the flow failed mid-stream): the gathered bytes are checked, not the end rules."""
    events, index = _broken("anthropic")["another block's index"]
    lint = FlowLint("log", "anthropic", "gemini")
    for e in events[: index + 2]:
        assert lint.feed_ours(e) is None  # gathered (log mode), not checked yet
    assert [(r["side"], r["index"]) for r in lint.flush()] == [("ours", index)]
    good = FlowLint("log", "anthropic", "gemini")
    for e in _anthropic()[:10]:
        good.feed_ours(e)
    assert good.flush() == [] and good.reports == []  # no "ended without message_stop": it was cut off
