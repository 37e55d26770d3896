"""The Gemini validator accepts every real recording (non-strict) and rejects broken streams."""

from __future__ import annotations

import json

import pytest

from corpus_loader import samples
from validators import gemini as G


def _sse(*objs: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs)


def _ev(parts: list, finish: str | None = None, usage: dict | None = None) -> dict:
    cand: dict = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    obj: dict = {"candidates": [cand], "modelVersion": "m", "responseId": "r"}
    if usage is not None:
        obj["usageMetadata"] = usage
    return obj


USAGE = {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}


@pytest.mark.parametrize("s", samples("gemini", stream=True), ids=repr)
def test_real_streams_pass_non_strict(s):
    summary = G.validate_stream(s.body, strict=False)
    assert summary.stop_reason is not None
    assert summary.text or summary.tool_calls or summary.thinking or summary.stop_reason.startswith("blocked:")


@pytest.mark.parametrize("s", samples("gemini", stream=False, ok=True), ids=repr)
def test_real_bodies_pass_strict(s):
    assert G.validate_response(s.body).stop_reason


def test_real_error_body():
    (s,) = samples("gemini", ok=False)
    err = G.validate_error_body(s.body)
    assert (err["code"], err["status"]) == (429, "RESOURCE_EXHAUSTED")


def test_streamed_arguments_are_assembled_by_path():
    (s,) = [x for x in samples("gemini") if "arguments-nested" in x.name]
    summary = G.validate_stream(s.body, strict=False)
    args = json.loads(summary.tool_calls[0].arguments)
    assert args["recipe"]["ingredients"][0] == {"amount": "16 oz", "name": "Lasagna noodles"}


def test_a_good_stream():
    s = G.validate_stream(_sse(_ev([{"text": "a", "thought": True}]), _ev([{"text": "b"}], "STOP", USAGE)))
    assert (s.thinking, s.text, s.stop_reason, s.output_tokens) == ("a", "b", "STOP", 2)


@pytest.mark.parametrize(
    "body,why",
    [
        (_sse(_ev([{"text": "b"}], "STOP"), _ev([{"text": "c"}], None, USAGE)), "finishReason before the last event"),
        (_sse(_ev([{"text": "b"}], "STOP")), "must carry usageMetadata"),
        (_sse(_ev([{"text": "b"}])), "without finishReason"),
        (_sse(_ev([{"text": "b"}], "STOP", {**USAGE, "totalTokenCount": 9})), "totalTokenCount"),
        (_sse(_ev([{"text": "b", "functionCall": {"name": "f", "args": {}}}], "STOP", USAGE)), "exactly one of"),
        (_sse(_ev([{"functionCall": {"name": "f"}}], "STOP", USAGE)), "args must be an object"),
        (
            _sse({"error": {"code": 500, "message": "x", "status": "INTERNAL"}}, _ev([], "STOP", USAGE)),
            "follow an error",
        ),
        (_sse(_ev([{"text": "b"}], "DONE", USAGE)), "unknown finishReason"),
        (b"event: x\ndata: {}\n\n", "no event name"),
    ],
)
def test_broken_streams_are_rejected(body, why):
    with pytest.raises(AssertionError, match=why):
        G.validate_stream(body)


def test_array_stream():
    body = json.dumps([_ev([{"text": "a"}]), _ev([{"text": ""}], "STOP", USAGE)]).encode()
    assert G.validate_stream(body, array=True).text == "a"
