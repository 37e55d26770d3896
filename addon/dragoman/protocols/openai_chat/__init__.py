"""OpenAI Chat Completions codec (``/chat/completions``).

Owns: the Chat wire models (``models``), Chat -> IR (``decode``: requests, responses, errors, the
block-synthesizing stream decoder) and IR -> Chat (``encode``). May import ``dragoman.sse``,
``dragoman.ir``, ``dragoman.errors`` and ``dragoman.protocols._wire``/``base``. Never mitmproxy.
"""

from __future__ import annotations

from dragoman.protocols import Protocol
from dragoman.protocols.base import ModuleCodec
from dragoman.protocols.openai_chat import decode
from dragoman.protocols.openai_chat import encode

CODEC = ModuleCodec(
    Protocol.OPENAI_CHAT,
    decode_request=decode.decode_request,
    encode_request=encode.encode_request,
    decode_response=decode.decode_response,
    encode_response=encode.encode_response,
    decode_error=decode.decode_error,
    encode_error=encode.encode_error,
    stream_decoder=decode.ChatStreamDecoder,
    stream_encoder=encode.ChatStreamEncoder,
)

__all__ = ["CODEC"]
