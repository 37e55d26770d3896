"""OpenAI Responses (``/responses``): the strictest of the three protocols on the client side.

``CODEC`` decodes Responses requests, whole responses, errors and SSE into the IR and encodes the IR
back (see ``decode`` and ``encode``). Wire models are in ``models``.
"""

from __future__ import annotations

import logging
from typing import Any

from dragoman.ir.common import ErrorInfo
from dragoman.ir.request import Request
from dragoman.ir.response import Response
from dragoman.protocols import Protocol
from dragoman.protocols.base import Codec
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamDecoder
from dragoman.protocols.base import StreamEncoder
from dragoman.protocols.openai_responses import decode
from dragoman.protocols.openai_responses import encode

logger = logging.getLogger(__name__)


class ResponsesCodec(Codec):
    protocol = Protocol.OPENAI_RESPONSES

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
        return decode.ResponsesStreamDecoder(ctx)

    def stream_encoder(self, ctx: Context) -> StreamEncoder:
        return encode.ResponsesStreamEncoder(ctx)


CODEC = ResponsesCodec()

__all__ = ["CODEC", "ResponsesCodec"]
