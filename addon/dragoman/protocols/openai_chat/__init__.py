"""OpenAI Chat Completions codec (``/chat/completions``): wire models, decoders into the IR, encoders out of it.

One module per concern: ``models`` (pydantic wire models), ``request_decode`` / ``request_encode``
(requests), ``response`` (whole responses both ways, and the usage, id and content helpers the streams
share), ``errors``, ``stream_decode`` (``ChatStreamDecoder``, which synthesizes the blocks Chat lacks)
and ``stream_encode`` (``ChatStreamEncoder``).
May import: ``dragoman.sse``, ``dragoman.ir``, ``dragoman.errors`` and ``dragoman.protocols``' shared
helpers (``_wire``, ``_checks``, ``_custom_args``, ``_openai_errors``, ``base``). Never mitmproxy.
"""

from __future__ import annotations

from dragoman.protocols import Protocol
from dragoman.protocols._search import SearchCodec
from dragoman.protocols.openai_chat.errors import decode_error
from dragoman.protocols.openai_chat.errors import encode_error
from dragoman.protocols.openai_chat.request_decode import decode_request
from dragoman.protocols.openai_chat.request_encode import encode_request
from dragoman.protocols.openai_chat.response import decode_response
from dragoman.protocols.openai_chat.response import encode_response
from dragoman.protocols.openai_chat.stream_decode import ChatStreamDecoder
from dragoman.protocols.openai_chat.stream_encode import ChatStreamEncoder

CODEC = SearchCodec(
    Protocol.OPENAI_CHAT,
    decode_request=decode_request,
    encode_request=encode_request,
    decode_response=decode_response,
    encode_response=encode_response,
    decode_error=decode_error,
    encode_error=encode_error,
    stream_decoder=ChatStreamDecoder,
    stream_encoder=ChatStreamEncoder,
)

__all__ = ["CODEC"]
