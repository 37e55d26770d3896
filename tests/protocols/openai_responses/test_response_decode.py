"""Upstream whole Responses objects -> IR (corpus and hand-made cases)."""

from __future__ import annotations

import orjson
import pytest

from corpus_loader import samples
from dragoman.ir.common import StopReason
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import CODEC

OK_BODIES = samples("openai-responses", stream=False, ok=True)


@pytest.mark.parametrize("s", OK_BODIES, ids=[s.name for s in OK_BODIES])
def test_corpus_whole_responses(s):
    body = orjson.loads(s.body)
    ctx = Context()
    resp = CODEC.decode_response(body, ctx)
    assert resp.id == body["id"]
    texts = [
        c["text"]
        for it in body["output"]
        if it["type"] == "message"
        for c in it["content"]
        if c["type"] == "output_text"
    ]
    assert [p.text for p in resp.content if type(p) is TextPart] == texts
    calls = [it["call_id"] for it in body["output"] if it["type"] == "function_call"]
    assert [p.id for p in resp.content if isinstance(p, ToolCallPart)] == calls
    assert resp.stop_reason is (StopReason.TOOL_USE if calls else StopReason.END_TURN)
    assert resp.usage.input_tokens == body["usage"]["input_tokens"]
    assert resp.usage.cache_read_tokens == body["usage"]["input_tokens_details"]["cached_tokens"]
    assert resp.usage.reasoning_tokens == body["usage"]["output_tokens_details"]["reasoning_tokens"]
    enc = [it.get("encrypted_content") for it in body["output"] if it["type"] == "reasoning"]
    assert [p.encrypted_content for p in resp.content if isinstance(p, ThinkingPart)] == enc


def test_incomplete_whole_response():
    body = {
        "id": "resp_1",
        "model": "m",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [],
    }
    assert CODEC.decode_response(body, Context()).stop_reason is StopReason.MAX_TOKENS
    body["incomplete_details"] = {"reason": "content_filter"}
    assert CODEC.decode_response(body, Context()).stop_reason is StopReason.REFUSAL
