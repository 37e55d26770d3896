"""Request translation (``translate.request``): what it leaves on the Context for the response side, and
which upstream may receive a Chat client's ``n > 1`` (a Chat upstream, untouched; elsewhere a 400)."""

from __future__ import annotations

import json

import orjson
import pytest

from conftest import run_stream
from corpus_loader import samples
from dragoman.errors import ClientRequestError
from dragoman.errors import UnsupportedFeatureError
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.sse import SSEDecoder
from dragoman.translate.plan import Plan
from dragoman.translate.plan import parse_model_map
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


ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 50,
    "system": "be brief",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
    "top_k": 3,
}


def test_identity_without_mapping_forwards_the_client_bytes_untouched():
    # odd spacing and key order survive: nothing is re-serialised when nothing changes
    body = b'{ "messages": [{"role": "user", "content": "hi"}],   "model": "gpt-4o", "stream": false }'
    ctx = Context()
    out = translate_request(body, Plan(C, C), ctx)
    assert out.body is body
    assert (out.client_model, out.upstream_model, out.stream) == ("gpt-4o", "gpt-4o", False)
    assert ctx.request is out.request


def test_identity_with_mapping_rewrites_only_the_model():
    body = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "x_vendor": {"k": 1}})
    out = translate_request(body, Plan(C, C), Context(), parse_model_map(["gpt-*=qwen3-coder"]))
    sent = orjson.loads(out.body)
    assert sent == {"model": "qwen3-coder", "messages": [{"role": "user", "content": "hi"}], "x_vendor": {"k": 1}}
    assert (out.client_model, out.upstream_model) == ("gpt-4o", "qwen3-coder")
    assert out.request.model == "qwen3-coder"


def test_identity_with_a_mapping_that_does_not_match_keeps_the_bytes():
    body = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    out = translate_request(body, Plan(C, C), Context(), parse_model_map(["claude-*=x"]))
    assert out.body is body


def test_anthropic_client_to_chat_upstream():
    ctx = Context()
    out = translate_request(orjson.dumps(ANTHROPIC_BODY), Plan(A, C), ctx, parse_model_map(["claude-*=gpt-4o"]))
    sent = orjson.loads(out.body)
    assert sent["model"] == "gpt-4o"
    assert sent["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert sent["max_tokens"] == 50
    assert sent["stream"] is True
    # a streamed Chat request asks for the usage chunk the Anthropic client's message_delta needs
    assert sent["stream_options"] == {"include_usage": True}
    assert "top_k" not in sent
    assert (out.client_model, out.upstream_model, out.stream) == ("claude-sonnet-4-5", "gpt-4o", True)
    # what Chat cannot carry is listed by name, never silently lost
    assert "top_k" in ctx.dropped.fields
    assert ctx.request is out.request


def test_anthropic_client_to_responses_upstream():
    out = translate_request(orjson.dumps(ANTHROPIC_BODY), Plan(A, R), Context())
    sent = orjson.loads(out.body)
    assert sent["instructions"] == "be brief"
    assert sent["input"] == [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    assert sent["max_output_tokens"] == 50
    assert sent["model"] == "claude-sonnet-4-5"  # no mapping: the client's model goes through
    assert sent["store"] is False


def test_chat_client_to_anthropic_upstream():
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}],
        "max_completion_tokens": 77,
    }
    out = translate_request(orjson.dumps(body), Plan(C, A), Context())
    sent = orjson.loads(out.body)
    assert sent["system"] == [{"type": "text", "text": "sys"}]
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert sent["max_tokens"] == 77
    assert out.stream is False


@pytest.mark.parametrize(
    "body, needle",
    [(b"{not json", "not valid JSON"), (b"[1, 2]", "must be a JSON object"), (b"", "not valid JSON")],
)
@pytest.mark.parametrize("plan", [Plan(A, C), Plan(C, C)])
def test_a_body_that_is_not_a_json_object_is_a_client_error(body, needle, plan):
    with pytest.raises(ClientRequestError) as e:
        translate_request(body, plan, Context())
    assert needle in str(e.value)
    assert e.value.to_error_info().http_status == 400
