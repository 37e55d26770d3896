"""Request translation (``translate.request``): what it leaves on the Context for the response side, and
which upstream may receive a Chat client's ``n > 1`` (a Chat upstream, untouched; elsewhere a 400)."""

from __future__ import annotations

import json

import orjson
import pytest

from conftest import run_stream
from corpus_loader import samples
from dragoman.errors import UnsupportedFeatureError
from dragoman.protocols import Protocol
from dragoman.protocols import get_codec
from dragoman.protocols.base import Context
from dragoman.sse import SSEDecoder
from dragoman.translate.plan import Plan
from dragoman.translate.request import decode_client_request
from dragoman.translate.request import encode_upstream_request
from dragoman.translate.request import translate_request
from dragoman.translate.stream import StreamTranslator
from dragoman.translate.tokens import estimate_input_tokens

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES
LONG = {
    "model": "claude-x",
    "max_tokens": 100,
    "stream": True,
    "system": [{"type": "text", "text": "Be brief. " * 50}],
    "messages": [{"role": "user", "content": "Summarise this: " + "lorem ipsum dolor sit amet " * 400}],
}


@pytest.mark.parametrize("upstream", [C, R])
def test_an_anthropic_stream_gets_the_input_estimate(upstream):
    ctx = Context()
    translate_request(orjson.dumps(LONG), Plan(A, upstream), ctx)
    assert ctx.input_tokens_estimate == estimate_input_tokens(LONG) > 2000


@pytest.mark.parametrize(
    "client,upstream,body",
    [
        (A, C, {**LONG, "stream": False}),  # a whole response carries the upstream's usage
        (A, A, LONG),  # identity: the upstream's own message_start
        (C, A, {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x" * 4000}]}),
    ],
)
def test_no_estimate_where_no_message_start_needs_one(client, upstream, body):
    ctx = Context()
    translate_request(orjson.dumps(body), Plan(client, upstream), ctx)
    assert ctx.input_tokens_estimate is None


def test_routed_attempts_estimate_once_and_only_when_translated(monkeypatch):
    """A routed request is decoded once and encoded per attempt: an identity attempt (Anthropic upstream)
    costs no estimate; the first translated attempt computes it, later ones reuse it."""
    from dragoman.translate import request as request_module

    calls = []
    monkeypatch.setattr(request_module, "estimate_input_tokens", lambda obj: calls.append(obj) or 4321)
    cr = decode_client_request(orjson.dumps(LONG), A)
    identity = Context()
    encode_upstream_request(cr, Plan(A, A), identity, "claude-x")
    assert calls == [] and identity.input_tokens_estimate is None
    first, second = Context(), Context()
    encode_upstream_request(cr, Plan(A, C), first, "gpt-x")
    encode_upstream_request(cr, Plan(A, R), second, "gpt-y")
    assert first.input_tokens_estimate == second.input_tokens_estimate == 4321
    assert calls == [LONG]


def test_chat_upstream_stream_to_an_anthropic_client_estimate_first_real_figures_last():
    """A recorded Chat stream (usage in the last chunk) translated for an Anthropic client."""
    sample = next(s for s in samples("openai-chat", stream=True) if "plain-text-with-request" in s.name)
    ctx = Context()
    translate_request(orjson.dumps(LONG), Plan(A, C), ctx)
    tr = StreamTranslator(get_codec(C).stream_decoder(ctx), get_codec(A).stream_encoder(ctx))
    out = run_stream(tr, [sample.body])
    dec = SSEDecoder()
    events = {e.event: json.loads(e.data) for e in dec.feed(out) + dec.close()}
    assert events["message_start"]["message"]["usage"]["input_tokens"] == estimate_input_tokens(LONG)
    prompt = next(
        json.loads(e.data)["usage"]["prompt_tokens"]
        for e in SSEDecoder().feed(sample.body)
        if e.data.startswith("{") and json.loads(e.data).get("usage")
    )
    u = events["message_delta"]["usage"]
    assert u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] == prompt


CHAT_N3 = json.dumps(
    {"model": "gpt-4o", "n": 3, "messages": [{"role": "user", "content": "What's the weather like in SF?"}]}
).encode()


def test_chat_client_n3_to_a_chat_upstream_is_passed_through_byte_for_byte():
    plan = Plan(Protocol.OPENAI_CHAT, Protocol.OPENAI_CHAT)
    ctx = Context()
    out = translate_request(CHAT_N3, plan, ctx)
    assert out.body is CHAT_N3 and ctx.dropped.fields == []
    cr = decode_client_request(CHAT_N3, Protocol.OPENAI_CHAT)
    assert json.loads(encode_upstream_request(cr, plan, Context(), "other-model"))["n"] == 3  # a mapped model too


@pytest.mark.parametrize("upstream", [Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_RESPONSES])
def test_chat_client_n3_to_a_one_answer_upstream_is_unsupported(upstream):
    cr = decode_client_request(CHAT_N3, Protocol.OPENAI_CHAT)
    with pytest.raises(UnsupportedFeatureError, match=r"n > 1") as ei:
        encode_upstream_request(cr, Plan(Protocol.OPENAI_CHAT, upstream), Context(), "m")
    assert ei.value.status_hint == 400
    one = json.dumps({"model": "m", "n": 1, "messages": [{"role": "user", "content": "hi"}]}).encode()
    body = json.loads(translate_request(one, Plan(Protocol.OPENAI_CHAT, upstream), Context()).body)
    assert "n" not in body and body["model"] == "m"
