"""Anthropic Messages codec (``/v1/messages``): wire models, decoders into the IR, encoders out of it.

One module per concern: ``models`` (pydantic wire models, ``EVENT_ADAPTER``), ``request_decode`` /
``request_encode`` (requests; ``content_encode`` builds the content blocks), ``response`` (whole
responses both ways, and the usage/id/signature helpers the streams share), ``errors``,
``stream_decode`` (``AnthropicStreamDecoder``), ``stream_encode`` (``AnthropicStreamEncoder``).
May import: ``dragoman.sse``, ``dragoman.ir``, ``dragoman.errors``, ``dragoman.protocols._wire``/``_checks``/``base``.
"""

from __future__ import annotations

from dragoman.protocols import Protocol
from dragoman.protocols._search import SearchCodec
from dragoman.protocols.anthropic_messages.errors import decode_error
from dragoman.protocols.anthropic_messages.errors import encode_error
from dragoman.protocols.anthropic_messages.request_decode import decode_request
from dragoman.protocols.anthropic_messages.request_encode import encode_request
from dragoman.protocols.anthropic_messages.response import decode_response
from dragoman.protocols.anthropic_messages.response import encode_response
from dragoman.protocols.anthropic_messages.stream_decode import AnthropicStreamDecoder
from dragoman.protocols.anthropic_messages.stream_encode import AnthropicStreamEncoder

CODEC = SearchCodec(
    Protocol.ANTHROPIC_MESSAGES,
    decode_request=decode_request,
    encode_request=encode_request,
    decode_response=decode_response,
    encode_response=encode_response,
    decode_error=decode_error,
    encode_error=encode_error,
    stream_decoder=AnthropicStreamDecoder,
    stream_encoder=AnthropicStreamEncoder,
)

__all__ = ["CODEC"]
