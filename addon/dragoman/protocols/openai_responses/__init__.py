"""OpenAI Responses (``/responses``): the strictest of the three protocols on the client side.

``CODEC`` decodes Responses requests, whole responses, errors and SSE into the IR and encodes the IR
back (see ``decode`` and ``encode``). Wire models are in ``models``.
"""

from __future__ import annotations

from dragoman.protocols import Protocol
from dragoman.protocols.base import ModuleCodec
from dragoman.protocols.openai_responses import decode
from dragoman.protocols.openai_responses import encode

CODEC = ModuleCodec(
    Protocol.OPENAI_RESPONSES,
    decode_request=decode.decode_request,
    encode_request=encode.encode_request,
    decode_response=decode.decode_response,
    encode_response=encode.encode_response,
    decode_error=decode.decode_error,
    encode_error=encode.encode_error,
    stream_decoder=decode.ResponsesStreamDecoder,
    stream_encoder=encode.ResponsesStreamEncoder,
)

__all__ = ["CODEC"]
