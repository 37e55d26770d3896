"""Anthropic Messages codec (``/v1/messages``): wire models, decoders into the IR, encoders out of it.

Owns: ``models`` (pydantic wire models, ``EVENT_ADAPTER``), ``decode`` (requests, responses, errors,
``AnthropicStreamDecoder``), ``encode`` (requests, responses, errors, ``AnthropicStreamEncoder``).
May import: ``dragoman.sse``, ``dragoman.ir``, ``dragoman.errors``, ``dragoman.protocols._wire``/``base``.
"""

from __future__ import annotations

import logging
from typing import Any

from dragoman.ir.common import ErrorInfo
from dragoman.ir.request import Request
from dragoman.ir.response import Response
from dragoman.protocols import Protocol
from dragoman.protocols.anthropic_messages import decode
from dragoman.protocols.anthropic_messages import encode
from dragoman.protocols.base import Codec
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamDecoder
from dragoman.protocols.base import StreamEncoder

logger = logging.getLogger(__name__)


class AnthropicMessagesCodec(Codec):
    protocol = Protocol.ANTHROPIC_MESSAGES

    def decode_request(self, body: dict[str, Any]) -> Request:
        return decode.decode_request(body)

    def encode_request(self, req: Request, ctx: Context) -> dict[str, Any]:
        return encode.encode_request(req, ctx)

    def decode_response(self, body: dict[str, Any], ctx: Context) -> Response:
        return decode.decode_response(body, ctx)

    def encode_response(self, resp: Response, ctx: Context) -> dict[str, Any]:
        return encode.encode_response(resp, ctx)

    def decode_error(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> ErrorInfo:
        return decode.decode_error(status, body, headers)

    def encode_error(self, err: ErrorInfo) -> dict[str, Any]:
        return encode.encode_error(err)

    def stream_decoder(self, ctx: Context) -> StreamDecoder:
        return decode.AnthropicStreamDecoder(ctx)

    def stream_encoder(self, ctx: Context) -> StreamEncoder:
        return encode.AnthropicStreamEncoder(ctx)


CODEC = AnthropicMessagesCodec()

__all__ = ["CODEC", "AnthropicMessagesCodec"]
