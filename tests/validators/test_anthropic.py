"""The Anthropic validator accepts every real recording and rejects broken streams."""

from __future__ import annotations

import json

import pytest

from corpus_loader import samples
from validators import anthropic as A

# Real recordings that break the strict grammar, and why (they must still pass with strict=False).
KNOWN_DEVIATIONS = {
    "anthropic/anthropic-sdk-python__stream-basic-hello.sse.txt": "fixture saved without the final blank line",
    "anthropic/anthropic-sdk-python__stream-max-tokens-mid-tool-input.sse.txt": "no final blank line; the tool_use block cut by max_tokens is never stopped",
    "anthropic/anthropic-sdk-python__stream-text-then-tool.sse.txt": "fixture saved without the final blank line",
}

STREAMS = samples("anthropic", stream=True)


@pytest.mark.parametrize("sample", STREAMS, ids=[s.name for s in STREAMS])
def test_real_streams(sample):
    s = A.validate_stream(sample.body, strict=False)
    assert s.stop_reason in A.STOP_REASONS
    if sample.name in KNOWN_DEVIATIONS:
        with pytest.raises(AssertionError):
            A.validate_stream(sample.body)
    else:
        assert A.validate_stream(sample.body) == s


BODIES = samples("anthropic", stream=False)


@pytest.mark.parametrize("sample", BODIES, ids=[s.name for s in BODIES])
def test_real_bodies(sample):
    if sample.ok:
        s = A.validate_message(sample.body)
        assert s.stop_reason in A.STOP_REASONS
    else:
        err = A.validate_error_body(sample.body)
        assert err["message"]


def test_summary_content():
    thinking = next(s for s in STREAMS if "stream-thinking-signature" in s.name)
    s = A.validate_stream(thinking.body)
    assert s.thinking and s.text and len(s.signatures) == 1
    tool = next(s for s in STREAMS if "stream-text-then-tool" in s.name)
    s = A.validate_stream(tool.body, strict=False)
    assert s.stop_reason == "tool_use"
    assert [(t.name, t.parsed()) for t in s.tool_calls] == [("get_weather", {"location": "Paris"})]
    noargs = next(s for s in STREAMS if "tool-no-args" in s.name)
    assert A.validate_stream(noargs.body).tool_calls[0].parsed() == {}
    redacted = next(s for s in STREAMS if "redacted-thinking" in s.name)
    assert A.validate_stream(redacted.body).redacted == 2


# --- hand-made streams


def ev(obj: dict, name: str | None = None) -> str:
    return f"event: {name or obj['type']}\ndata: {json.dumps(obj)}\n\n"


START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
}


def cbs(i, block):
    return {"type": "content_block_start", "index": i, "content_block": block}


def cbd(i, delta):
    return {"type": "content_block_delta", "index": i, "delta": delta}


def cbe(i):
    return {"type": "content_block_stop", "index": i}


def mdelta(stop="end_turn", out=7):
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": out},
    }


STOP = {"type": "message_stop"}


def good_events() -> list[dict]:
    return [
        START,
        cbs(0, {"type": "thinking", "thinking": "", "signature": ""}),
        {"type": "ping"},
        cbd(0, {"type": "thinking_delta", "thinking": "hmm"}),
        cbd(0, {"type": "signature_delta", "signature": "sig"}),
        cbe(0),
        cbs(1, {"type": "text", "text": ""}),
        cbd(1, {"type": "text_delta", "text": "Hi "}),
        cbd(1, {"type": "text_delta", "text": "there"}),
        cbe(1),
        cbs(2, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
        cbd(2, {"type": "input_json_delta", "partial_json": '{"a":'}),
        cbd(2, {"type": "input_json_delta", "partial_json": " 1}"}),
        cbe(2),
        mdelta("tool_use"),
        STOP,
    ]


def render(events: list[dict]) -> bytes:
    return "".join(ev(e) for e in events).encode()


def test_good_stream_summary():
    s = A.validate_stream(render(good_events()))
    assert (s.id, s.model, s.text, s.thinking, s.signatures) == ("msg_1", "m", "Hi there", "hmm", ["sig"])
    assert [(t.id, t.name, t.parsed()) for t in s.tool_calls] == [("toolu_1", "f", {"a": 1})]
    assert s.stop_reason == "tool_use" and s.usage["output_tokens"] == 7 and s.usage["input_tokens"] == 3


def test_error_stream():
    s = A.validate_stream(
        render(
            [
                START,
                cbs(0, {"type": "text", "text": ""}),
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ]
        )
    )
    assert s.error == {"type": "overloaded_error", "message": "Overloaded"}
    # an error may also be the only event
    assert (
        A.validate_stream(render([{"type": "error", "error": {"type": "api_error", "message": "x"}}])).error["type"]
        == "api_error"
    )


def _drop(i):
    return lambda e: e[:i] + e[i + 1 :]


def _swap(i, j):
    def f(e):
        e = list(e)
        e[i], e[j] = e[j], e[i]
        return e

    return f


def _set(i, obj):
    return lambda e: e[:i] + [obj] + e[i + 1 :]


def _insert(i, obj):
    return lambda e: e[:i] + [obj] + e[i:]


BROKEN = {
    "no-message-start": (_drop(0), "first event must be message_start"),
    "ping-first": (_insert(0, {"type": "ping"}), "ping before message_start"),
    "start-with-content": (
        _set(0, {**START, "message": {**START["message"], "content": [{"type": "text", "text": "x"}]}}),
        "content must be",
    ),
    "start-no-usage": (
        _set(0, {**START, "message": {k: v for k, v in START["message"].items() if k != "usage"}}),
        "usage must be an object",
    ),
    "start-role-user": (
        _set(0, {**START, "message": {**START["message"], "role": "user"}}),
        "role must be 'assistant'",
    ),
    "duplicate-start": (_insert(1, START), "duplicate message_start"),
    "index-gap": (_set(6, cbs(2, {"type": "text", "text": ""})), "expected 1"),
    "interleaved-blocks": (_swap(5, 6), "still open"),
    "delta-wrong-block": (_set(7, cbd(0, {"type": "text_delta", "text": "x"})), "block 1 is open"),
    "delta-wrong-type": (
        _set(7, cbd(1, {"type": "input_json_delta", "partial_json": "x"})),
        "not allowed in a text block",
    ),
    "delta-no-block": (_insert(6, cbd(1, {"type": "text_delta", "text": "x"})), "no open block"),
    "thinking-without-signature": (_drop(4), "without a signature_delta"),
    "thinking-after-signature": (_swap(3, 4), "thinking_delta after signature_delta"),
    "text-in-start": (_set(6, cbs(1, {"type": "text", "text": "Hi"})), 'must start with text ""'),
    "stop-twice": (_insert(6, cbe(0)), "no open block"),
    "bad-tool-json": (_set(12, cbd(2, {"type": "input_json_delta", "partial_json": " 1"})), "not valid JSON"),
    "tool-json-array": (
        lambda e: e[:11] + [cbd(2, {"type": "input_json_delta", "partial_json": "[1]"})] + e[13:],
        "must be a JSON object",
    ),
    "tool-no-id": (_set(10, cbs(2, {"type": "tool_use", "name": "f", "input": {}})), "needs a non-empty id"),
    "unknown-block": (_set(6, cbs(1, {"type": "bogus"})), "unknown content block type"),
    "block-open-at-delta": (_drop(13), "while block 2 is open"),
    "bad-stop-reason": (_set(14, mdelta("finished")), "stop_reason 'finished'"),
    "delta-no-usage": (
        _set(14, {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        "output_tokens must be an int",
    ),
    "no-message-delta": (_drop(14), "message_stop before message_delta"),
    "two-message-deltas": (_insert(14, mdelta()), "second message_delta"),
    "no-message-stop": (_drop(15), "without message_stop"),
    "event-after-stop": (lambda e: e + [{"type": "ping"}], "after the end of the stream"),
    "block-after-delta": (_insert(15, cbs(3, {"type": "text", "text": ""})), "after message_delta"),
    "unknown-event": (_insert(1, {"type": "bogus"}), "unknown event type"),
    "event-after-error": (
        lambda e: e[:2] + [{"type": "error", "error": {"type": "api_error", "message": "x"}}] + e[2:],
        "after the end of the stream",
    ),
    "bad-error-shape": (lambda e: e[:2] + [{"type": "error", "message": "x"}], "error.error must be an object"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_streams_rejected(name):
    mutate, msg = BROKEN[name]
    with pytest.raises(AssertionError, match=msg):
        A.validate_stream(render(mutate(good_events())))


def test_framing_violations():
    good = render(good_events())
    with pytest.raises(AssertionError, match="does not match data.type"):
        A.validate_stream(good.replace(b"event: ping", b"event: pong", 1))
    with pytest.raises(AssertionError, match="does not end with a blank line"):
        A.validate_stream(good[:-1])
    with pytest.raises(AssertionError, match="not JSON"):
        A.validate_stream(good.replace(b'"type": "ping"}', b'"type": "ping"', 1))
    with pytest.raises(AssertionError, match="no events"):
        A.validate_stream(b"")


def test_max_tokens_allows_unfinished_tool_json():
    e = good_events()
    e[12] = cbd(2, {"type": "input_json_delta", "partial_json": ' "x'})
    e[14] = mdelta("max_tokens")
    s = A.validate_stream(render(e))
    assert s.tool_calls[0].arguments == '{"a": "x'


def test_message_body():
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "text", "text": "hi"},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
    s = A.validate_message(body)
    assert (s.text, s.thinking, s.signatures, s.tool_calls[0].parsed()) == ("hi", "t", ["s"], {"a": 1})
    for mutate, msg in [
        (lambda b: {**b, "type": "msg"}, "message.type"),
        (lambda b: {**b, "stop_reason": None}, "stop_reason"),
        (lambda b: {k: v for k, v in b.items() if k != "stop_sequence"}, "stop_sequence"),
        (lambda b: {**b, "usage": {"input_tokens": 1}}, "output_tokens"),
        (lambda b: {**b, "content": [{"type": "thinking", "thinking": "t"}]}, "signature"),
        (
            lambda b: {**b, "content": [{"type": "tool_use", "id": "x", "name": "f", "input": "{}"}]},
            "input must be an object",
        ),
        (lambda b: {**b, "content": [{"type": "nope"}]}, "unknown content block"),
    ]:
        with pytest.raises(AssertionError, match=msg):
            A.validate_message(mutate(body))


def test_error_body():
    assert (
        A.validate_error_body(b'{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}')["message"]
        == "slow"
    )
    for bad, msg in [
        (b'{"error":{"type":"rate_limit_error","message":"slow"}}', "type must be 'error'"),
        (b'{"type":"error","error":{"message":"slow"}}', "error.error.type"),
        (b'{"type":"error","error":{"type":"weird_error","message":"x"}}', "unknown error type"),
        (b"[1]", "must be a JSON object"),
        (b"nope", "not JSON"),
    ]:
        with pytest.raises(AssertionError, match=msg):
            A.validate_error_body(bad)
