"""The Responses validator accepts every real recording and rejects broken streams."""

from __future__ import annotations

import json

import pytest

from corpus_loader import samples
from validators import responses as R

KNOWN_DEVIATIONS = {
    "responses/pydantic-ai__stream-openrouter-responses-raw-cot.yaml#0": "OpenRouter: comments, no event: lines, [DONE], late reasoning_text.done, fresh ids in the terminal object",
}
STREAMS = samples("openai-responses", stream=True)
BODIES = samples("openai-responses", stream=False)


@pytest.mark.parametrize("sample", STREAMS, ids=[s.name for s in STREAMS])
def test_real_streams(sample):
    for part in R.split_streams(sample.body):  # one recording holds four consecutive turns
        s = R.validate_stream(part, strict=False)
        assert s.stop_reason in ("completed", "failed") or s.stop_reason.startswith("incomplete:")
        if sample.name in KNOWN_DEVIATIONS:
            with pytest.raises(AssertionError):
                R.validate_stream(part)
        else:
            assert R.validate_stream(part) == s


@pytest.mark.parametrize("sample", BODIES, ids=[s.name for s in BODIES])
def test_real_bodies(sample):
    if sample.ok:
        assert R.validate_response(sample.body).stop_reason == "completed"
    else:
        assert R.validate_error_body(sample.body)["message"]


def test_split_streams():
    multi = next(s for s in STREAMS if "reasoning-summary-encrypted" in s.name)
    parts = R.split_streams(multi.body)
    assert len(parts) == 4
    assert sum(len(R.validate_stream(p).tool_calls) for p in parts) == 3
    single = next(s for s in STREAMS if "raw-cot" in s.name)
    assert len(R.split_streams(single.body)) == 1


def test_real_summaries():
    fc = next(s for s in STREAMS if "text-then-function-call.yaml#0" in s.name)
    s = R.validate_stream(fc.body)
    assert s.text and [(t.name, t.parsed()) for t in s.tool_calls] == [("get_capital", {"country": "PotatoLand"})]
    failed = next(s for s in STREAMS if "error-response-failed" in s.name)
    s = R.validate_stream(failed.body)
    assert s.stop_reason == "failed" and s.error["code"] == "insufficient_quota"
    summ = next(s for s in STREAMS if "reasoning-summary-deltas" in s.name)
    s = R.validate_stream(summ.body)
    assert s.thinking and len(s.signatures) == 1 and s.usage["output_tokens"] > 0


# --- hand-made streams

RESP = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt",
    "status": "in_progress",
    "output": [],
    "usage": None,
}
MSG = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
FC = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": "", "status": "in_progress"}
RS = {"id": "rs_1", "type": "reasoning", "summary": []}
MSG_DONE = {**MSG, "status": "completed", "content": [{"type": "output_text", "text": "Hi there", "annotations": []}]}
FC_DONE = {**FC, "status": "completed", "arguments": '{"a": 1}'}
RS_DONE = {**RS, "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "enc"}
USAGE = {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}


def good() -> list[dict]:
    return [
        {"type": "response.created", "response": RESP},
        {"type": "response.in_progress", "response": RESP},
        {"type": "response.output_item.added", "output_index": 0, "item": RS},
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "delta": "plan",
        },
        {
            "type": "response.reasoning_summary_text.done",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "text": "plan",
        },
        {
            "type": "response.reasoning_summary_part.done",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": "plan"},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": RS_DONE},
        {"type": "response.output_item.added", "output_index": 1, "item": MSG},
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "delta": "Hi ",
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "delta": "there",
        },
        {
            "type": "response.output_text.done",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "text": "Hi there",
        },
        {
            "type": "response.content_part.done",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "output_text", "text": "Hi there", "annotations": []},
        },
        {"type": "response.output_item.done", "output_index": 1, "item": MSG_DONE},
        {"type": "response.output_item.added", "output_index": 2, "item": FC},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": '{"a":'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": " 1}"},
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 2,
            "arguments": '{"a": 1}',
        },
        {"type": "response.output_item.done", "output_index": 2, "item": FC_DONE},
        {
            "type": "response.completed",
            "response": {**RESP, "status": "completed", "output": [RS_DONE, MSG_DONE, FC_DONE], "usage": USAGE},
        },
    ]


def render(events: list[dict], renumber: bool = True) -> bytes:
    out = []
    for i, e in enumerate(events):
        if renumber:
            e = {**e, "sequence_number": i}
        out.append(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n")
    return "".join(out).encode()


def test_good_stream():
    s = R.validate_stream(render(good()))
    assert (s.id, s.text, s.thinking, s.signatures, s.stop_reason) == (
        "resp_1",
        "Hi there",
        "plan",
        ["enc"],
        "completed",
    )
    assert [(t.id, t.name, t.parsed()) for t in s.tool_calls] == [("call_1", "f", {"a": 1})]
    assert s.output_tokens == 5


def test_error_then_failed():
    ev = good()[:2] + [
        {"type": "error", "code": "server_error", "message": "boom", "param": None},
        {
            "type": "response.failed",
            "response": {**RESP, "status": "failed", "error": {"code": "server_error", "message": "boom"}},
        },
    ]
    s = R.validate_stream(render(ev))
    assert s.stop_reason == "failed" and s.error["message"] == "boom"
    with pytest.raises(AssertionError, match="only response.failed may follow an error"):
        R.validate_stream(render(ev[:3] + [good()[2]]))
    with pytest.raises(AssertionError, match="without a terminal event"):
        R.validate_stream(render(ev[:3]))


def test_incomplete():
    ev = good()[:15]
    ev.append(
        {
            "type": "response.incomplete",
            "response": {
                **RESP,
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "output": [RS_DONE, MSG_DONE],
                "usage": USAGE,
            },
        }
    )
    assert R.validate_stream(render(ev)).stop_reason == "incomplete:max_output_tokens"


def _m(i, obj):
    return lambda e: e[:i] + [obj] + e[i + 1 :]


def _drop(i):
    return lambda e: e[:i] + e[i + 1 :]


def _patch(i, **kw):
    return lambda e: e[:i] + [{**e[i], **kw}] + e[i + 1 :]


BROKEN = {
    "no-created": (_drop(0), "first event must be response.created"),
    "no-in-progress": (_drop(1), "response.in_progress must follow"),
    "created-bad-status": (_patch(0, response={**RESP, "status": "completed"}), "status 'completed'"),
    "created-not-response": (_patch(0, response={**RESP, "object": "resp"}), "response.object"),
    "output-index-gap": (_patch(8, output_index=5), "expected 1"),
    "item-without-id": (_patch(8, item={k: v for k, v in MSG.items() if k != "id"}), "item.id must be"),
    "duplicate-item": (_patch(8, item=RS), "duplicate item id"),
    "delta-unknown-item": (_patch(10, item_id="msg_x"), "was never added"),
    "delta-wrong-output-index": (_patch(10, output_index=0), "output_index 0 != 1"),
    "delta-before-part": (lambda e: e[:9] + e[10:11] + e[9:10] + e[11:], "content part 0 was never added"),
    "text-done-mismatch": (_patch(12, text="Hi"), "differs from the concatenated deltas"),
    "part-done-mismatch": (
        _patch(13, part={"type": "output_text", "text": "x"}),
        "differs from the concatenated deltas",
    ),
    "part-done-before-text-done": (lambda e: e[:12] + e[13:14] + e[12:13] + e[14:], "before output_text.done"),
    "item-done-open-part": (_drop(13), "open content part"),
    "item-done-text-differs": (
        _patch(14, item={**MSG_DONE, "content": [{"type": "output_text", "text": "Hi"}]}),
        "differs from the streamed deltas",
    ),
    "event-after-item-done": (lambda e: e[:15] + [{**e[11]}] + e[15:], "after its output_item.done"),
    "args-done-mismatch": (_patch(18, arguments='{"a": 2}'), "differ from the concatenated deltas"),
    "args-no-done-event": (_drop(18), "without its arguments .done"),
    "args-not-json": (
        lambda e: (
            e[:16]
            + [
                {**e[16], "delta": "{"},
                {**e[17], "delta": "x"},
                {**e[18], "arguments": "{x"},
                {**e[19], "item": {**FC_DONE, "arguments": "{x"}},
                {
                    **e[20],
                    "response": {**e[20]["response"], "output": [RS_DONE, MSG_DONE, {**FC_DONE, "arguments": "{x"}]},
                },
            ]
        ),
        "not valid JSON",
    ),
    "fc-added-without-name": (_patch(15, item={**FC, "name": ""}), "needs call_id and name"),
    "summary-index-gap": (_patch(3, summary_index=1), "summary_index 1, expected 0"),
    "summary-done-mismatch": (_patch(5, text="x"), "summary text differs"),
    "item-never-done": (_drop(19), "was never done"),
    "terminal-output-differs": (
        _patch(20, response={**RESP, "status": "completed", "output": [MSG_DONE, RS_DONE, FC_DONE], "usage": USAGE}),
        "differs from the items as done",
    ),
    "completed-without-usage": (
        _patch(20, response={**RESP, "status": "completed", "output": [RS_DONE, MSG_DONE, FC_DONE]}),
        "usage must be an object",
    ),
    "usage-total-wrong": (
        _patch(
            20,
            response={
                **RESP,
                "status": "completed",
                "output": [RS_DONE, MSG_DONE, FC_DONE],
                "usage": {**USAGE, "total_tokens": 1},
            },
        ),
        "total_tokens",
    ),
    "no-terminal": (lambda e: e[:-1], "without a terminal event"),
    "after-terminal": (lambda e: e + [e[1]], "after the terminal event"),
    "unknown-event": (lambda e: e[:3] + [{"type": "response.bogus"}] + e[3:], "unknown event type"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_streams_rejected(name):
    mutate, msg = BROKEN[name]
    with pytest.raises(AssertionError, match=msg):
        R.validate_stream(render(mutate(good())))


def overlapping() -> list[dict]:
    """The good stream with the function_call item added while the message item is still open (as a Chat
    upstream's parallel tool calls came out before issue 14)."""
    ev = good()
    msg, fc = ev[8:15], ev[15:20]
    return ev[:8] + msg[:3] + fc[:2] + msg[3:] + fc[2:] + ev[20:]


def test_overlapping_items_rejected():
    ev = overlapping()
    assert [e["type"] for e in ev].count("response.output_item.added") == 3 and len(ev) == len(good())
    with pytest.raises(
        AssertionError, match=r"item fc_1 added while item msg_1 is still open \(overlapping output items\)"
    ):
        R.validate_stream(render(ev))
    # every other rule holds for it: only the overlap is wrong (real recordings are checked with strict=False)
    s = R.validate_stream(render(ev), strict=False)
    assert s.text == "Hi there" and [t.name for t in s.tool_calls] == ["f"]
    # the same items one after another pass
    assert R.validate_stream(render(good())).text == "Hi there"


def test_framing():
    ev = good()
    raw = render(ev)
    with pytest.raises(AssertionError, match="sequence_number"):
        R.validate_stream(render([{**e, "sequence_number": i + (i > 5)} for i, e in enumerate(ev)], renumber=False))
    with pytest.raises(AssertionError, match="sequence_number"):
        R.validate_stream(render(ev, renumber=False))
    with pytest.raises(AssertionError, match="does not match data.type"):
        R.validate_stream(raw.replace(b"event: response.in_progress", b"event: response.created", 1))
    with pytest.raises(AssertionError, match=r"no \[DONE\]"):
        R.validate_stream(raw + b"data: [DONE]\n\n")


def test_response_body():
    body = {**RESP, "status": "completed", "output": [RS_DONE, MSG_DONE, FC_DONE], "usage": USAGE}
    s = R.validate_response(body)
    assert (s.text, s.thinking, s.tool_calls[0].name) == ("Hi there", "plan", "f")
    for mutate, msg in [
        (lambda b: {**b, "status": "in_progress"}, "status"),
        (lambda b: {**b, "usage": None}, "usage must be an object"),
        (lambda b: {**b, "output": [MSG_DONE, MSG_DONE]}, "duplicate id"),
        (lambda b: {**b, "output": [{**FC_DONE, "arguments": "{"}]}, "not valid JSON"),
        (lambda b: {**b, "output": [{**MSG_DONE, "role": "user"}]}, "role must be 'assistant'"),
        (lambda b: {**b, "status": "incomplete"}, "incomplete_details.reason"),
    ]:
        with pytest.raises(AssertionError, match=msg):
            R.validate_response(mutate(body))


def test_error_body():
    assert R.validate_error_body(b'{"error":{"message":"m","type":"t","param":null,"code":"c"}}')["code"] == "c"
    with pytest.raises(AssertionError, match="error must be an object"):
        R.validate_error_body(b'{"message":"m"}')
