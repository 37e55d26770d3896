"""Per-model limits (issue 36, item 3): output clamped to the declared maximum and to what the window leaves,
an input over the declared window refused before any upstream call, in each client protocol."""

from __future__ import annotations

import json

import orjson
import pytest

from dragoman.errors import ContextOverflowError
from dragoman.ir.limits import ModelLimits
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.translate.plan import Plan
from dragoman.translate.request import client_estimate
from dragoman.translate.request import decode_client_request
from dragoman.translate.request import encode_upstream_request
from dragoman.translate.response import error_body
from dragoman.translate.tokens import estimate_input_tokens

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES
OUT_FIELD = {A: "max_tokens", C: "max_tokens", R: "max_output_tokens"}


def body(client: Protocol, text: str = "hello", max_out: int | None = 32000) -> dict:
    if client is A:
        b = {"model": "m", "messages": [{"role": "user", "content": text}]}
    elif client is C:
        b = {"model": "m", "messages": [{"role": "user", "content": text}]}
    else:
        b = {"model": "m", "input": text}
    if max_out is not None:
        b[OUT_FIELD[client]] = max_out
    return b


def send(client, up, b, limits, model="m"):
    cr = decode_client_request(orjson.dumps(b), client)
    ctx = Context(model_limits=limits)
    return orjson.loads(encode_upstream_request(cr, Plan(client, up), ctx, model)), ctx, cr


@pytest.mark.parametrize("client", [A, C, R])
@pytest.mark.parametrize("up", [A, C, R])
def test_output_over_the_declared_maximum_is_clamped_and_listed(client, up):
    sent, ctx, _cr = send(client, up, body(client), ModelLimits(max_output_tokens=8192))
    field = {A: "max_tokens", C: "max_tokens", R: "max_output_tokens"}[up]
    assert sent[field] == 8192
    assert ctx.adjusted == ["max_tokens 32000 -> 8192"]


@pytest.mark.parametrize("client", [A, C, R])
def test_output_within_the_limits_is_untouched(client):
    sent, ctx, _cr = send(client, A if client is not A else C, body(client, max_out=4096), ModelLimits(32768, 8192))
    assert 4096 in sent.values() and ctx.adjusted == []


def test_the_window_left_after_the_input_caps_the_output():
    """Claude Code asks for 32000 output tokens; a 32768-token window leaves less once the prompt is in."""
    b = body(A, "word " * 4000)
    sent, ctx, cr = send(A, C, b, ModelLimits(context_window=32768))
    est = estimate_input_tokens(b)
    assert sent["max_tokens"] == 32768 - est
    assert ctx.adjusted == [f"max_tokens 32000 -> {32768 - est}"]


@pytest.mark.parametrize("client", [A, C, R])
@pytest.mark.parametrize("up", [A, C, R])
def test_input_over_the_window_is_refused_without_an_upstream_body(client, up):
    b = body(client, "word " * 8000)
    cr = decode_client_request(orjson.dumps(b), client)
    with pytest.raises(ContextOverflowError) as e:
        encode_upstream_request(cr, Plan(client, up), Context(model_limits=ModelLimits(context_window=1000)), "m")
    est = client_estimate(cr, client)
    assert e.value.tokens == est > 1000 and e.value.limit == 1000
    answer = json.loads(error_body(e.value.to_error_info(), client))
    if client is A:
        assert answer == {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": f"prompt is too long: {est} tokens > 1000 maximum"},
        }
    else:
        assert answer["error"]["code"] == "context_length_exceeded"


def test_the_estimate_is_what_count_tokens_answers():
    """``count_tokens`` (Endpoints) and the window check use the same estimator on the same body."""
    b = body(A, "some text " * 300)
    cr = decode_client_request(orjson.dumps(b), A)
    assert client_estimate(cr, A) == estimate_input_tokens(b)


def test_a_request_without_an_output_limit_is_left_to_the_upstream():
    sent, ctx, _ = send(R, C, body(R, max_out=None), ModelLimits(32768, 8192))
    assert "max_tokens" not in sent and ctx.adjusted == []


def test_each_attempt_clamps_from_what_the_client_asked():
    cr = decode_client_request(orjson.dumps(body(C)), C)
    a = orjson.loads(encode_upstream_request(cr, Plan(C, A), Context(model_limits=ModelLimits(None, 1000)), "small"))
    b = orjson.loads(encode_upstream_request(cr, Plan(C, A), Context(model_limits=ModelLimits(None, 20000)), "big"))
    assert (a["max_tokens"], b["max_tokens"]) == (1000, 20000)


def test_same_protocol_body_is_clamped_in_place_and_otherwise_sent_as_is():
    b = body(C)
    b["max_completion_tokens"] = 32000
    del b["max_tokens"]
    raw = orjson.dumps(b)
    cr = decode_client_request(raw, C)
    assert encode_upstream_request(cr, Plan(C, C), Context(), "m") is cr.raw
    ctx = Context(model_limits=ModelLimits(None, 8192))
    sent = orjson.loads(encode_upstream_request(cr, Plan(C, C), ctx, "m"))
    assert sent["max_completion_tokens"] == 8192 and ctx.adjusted
    cr = decode_client_request(orjson.dumps(body(C, max_out=100)), C)
    assert encode_upstream_request(cr, Plan(C, C), Context(model_limits=ModelLimits(None, 8192)), "m") is cr.raw
