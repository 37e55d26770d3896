"""``dragoman.protocols``: the protocol a request path speaks, and the codec of each protocol."""

from __future__ import annotations

import pytest

from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.protocols.base import Codec
from dragoman.protocols.registry import get_codec


@pytest.mark.parametrize(
    "path, protocol",
    [
        ("/v1/messages", Protocol.ANTHROPIC_MESSAGES),
        ("/v1/messages?beta=true", Protocol.ANTHROPIC_MESSAGES),
        ("/anthropic/v1/messages/", Protocol.ANTHROPIC_MESSAGES),
        ("/messages", Protocol.ANTHROPIC_MESSAGES),
        ("/v1/chat/completions", Protocol.OPENAI_CHAT),
        ("/api/openai/chat/completions?x=1", Protocol.OPENAI_CHAT),
        ("/v1/responses", Protocol.OPENAI_RESPONSES),
        ("/backend-api/codex/responses", Protocol.OPENAI_RESPONSES),
    ],
)
def test_detect(path, protocol):
    assert detect(path) is protocol


@pytest.mark.parametrize(
    "path",
    ["/", "/v1/models", "/v1/messages/count_tokens", "/v1/completions", "/v1/responses/resp_1", "/x?p=/v1/messages"],
)
def test_detect_other_paths(path):
    assert detect(path) is None


@pytest.mark.parametrize("protocol", list(Protocol))
def test_each_protocol_has_one_codec_and_an_endpoint_it_detects_as_itself(protocol):
    codec = get_codec(protocol)
    assert isinstance(codec, Codec)
    assert codec.protocol is protocol
    assert get_codec(protocol) is codec
    assert detect(protocol.endpoint) is protocol


def test_protocol_values_are_the_option_names():
    assert [p.value for p in Protocol] == ["anthropic", "openai-chat", "openai-responses"]
    assert Protocol("openai-chat") is Protocol.OPENAI_CHAT
