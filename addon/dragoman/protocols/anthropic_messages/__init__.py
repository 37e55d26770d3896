"""Anthropic Messages codec (``/v1/messages``): wire models, decoders into the IR, encoders out of it.

Owns: ``models`` (pydantic wire models, ``EVENT_ADAPTER``), ``decode`` (requests, responses, errors,
``AnthropicStreamDecoder``), ``encode`` (requests, responses, errors, ``AnthropicStreamEncoder``).
May import: ``dragoman.sse``, ``dragoman.ir``, ``dragoman.errors``, ``dragoman.protocols._wire``/``base``.
"""

from __future__ import annotations

from dragoman.protocols import Protocol
from dragoman.protocols.anthropic_messages import decode
from dragoman.protocols.anthropic_messages import encode
from dragoman.protocols.base import ModuleCodec

CODEC = ModuleCodec(
    Protocol.ANTHROPIC_MESSAGES,
    decode_request=decode.decode_request,
    encode_request=encode.encode_request,
    decode_response=decode.decode_response,
    encode_response=encode.encode_response,
    decode_error=decode.decode_error,
    encode_error=encode.encode_error,
    stream_decoder=decode.AnthropicStreamDecoder,
    stream_encoder=encode.AnthropicStreamEncoder,
)

__all__ = ["CODEC"]
