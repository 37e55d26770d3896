"""A request nested deeper than the JSON encoders go (a tool schema hundreds of levels deep) is a
``ClientRequestError`` (400 in the client's shape), never a TypeError/RecursionError reaching the addon."""

from __future__ import annotations

import pytest

from dragoman.errors import ClientRequestError
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.translate.plan import Plan
from dragoman.translate.request import decode_client_request
from dragoman.translate.request import encode_upstream_request


def deep_request(depth: int) -> bytes:
    schema = '{"type":"object","properties":{"a":' * depth + '{"type":"string"}' + "}}" * depth
    return (
        '{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],'
        '"tools":[{"name":"t","input_schema":' + schema + "}]}"
    ).encode()


@pytest.mark.parametrize("upstream", [Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES])
@pytest.mark.parametrize("depth", [150, 300, 500])
def test_too_deep_to_encode_is_a_client_error(depth, upstream):
    cr = decode_client_request(deep_request(depth), Protocol.ANTHROPIC_MESSAGES)
    with pytest.raises(ClientRequestError, match="nested too deep") as e:
        encode_upstream_request(cr, Plan(Protocol.ANTHROPIC_MESSAGES, upstream), Context(), "m")
    assert e.value.to_error_info().http_status == 400


def test_same_protocol_with_a_mapped_model_too():
    cr = decode_client_request(deep_request(300), Protocol.ANTHROPIC_MESSAGES)
    plan = Plan(Protocol.ANTHROPIC_MESSAGES, Protocol.ANTHROPIC_MESSAGES)
    assert encode_upstream_request(cr, plan, Context(), "m") is cr.raw  # untouched bytes: nothing to encode
    with pytest.raises(ClientRequestError, match="nested too deep"):
        encode_upstream_request(cr, plan, Context(), "other-model")


def test_beyond_the_parser_is_a_client_error():
    with pytest.raises(ClientRequestError, match="not valid JSON"):
        decode_client_request(deep_request(2000), Protocol.ANTHROPIC_MESSAGES)


def test_a_reasonable_schema_still_translates():
    cr = decode_client_request(deep_request(20), Protocol.ANTHROPIC_MESSAGES)
    out = encode_upstream_request(cr, Plan(Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT), Context(), "m")
    assert out.count(b'"properties"') == 20
