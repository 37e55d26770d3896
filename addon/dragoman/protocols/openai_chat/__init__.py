"""OpenAI Chat Completions codec (``/chat/completions``).

Owns: the Chat wire models (``models``), Chat -> IR (``decode``: requests, responses, errors, the
block-synthesizing stream decoder) and IR -> Chat (``encode``). May import ``dragoman.sse``,
``dragoman.ir``, ``dragoman.errors`` and ``dragoman.protocols._wire``/``base``. Never mitmproxy.
"""

from __future__ import annotations

from typing import Any

from dragoman.ir.common import ErrorInfo
from dragoman.ir.request import Request
from dragoman.ir.response import Response
from dragoman.protocols import Protocol
from dragoman.protocols.base import Codec
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import decode
from dragoman.protocols.openai_chat import encode


class OpenAIChatCodec(Codec):
    protocol = Protocol.OPENAI_CHAT

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

    def stream_decoder(self, ctx: Context) -> decode.ChatStreamDecoder:
        return decode.ChatStreamDecoder(ctx)

    def stream_encoder(self, ctx: Context) -> encode.ChatStreamEncoder:
        return encode.ChatStreamEncoder(ctx)


CODEC = OpenAIChatCodec()

__all__ = ["CODEC", "OpenAIChatCodec"]
