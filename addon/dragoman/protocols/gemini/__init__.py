"""Gemini ``generateContent`` codec (Google's native API): wire models, decoders into the IR, encoders out of it.

One module per concern: ``request_decode`` / ``request_encode`` (requests;
the model and ``stream`` live in the URL: ``path_info``, ``upstream_path``), ``schema`` (Gemini's schema subset
-> JSON Schema), ``response`` (whole responses both ways, usage, finish reasons), ``thoughts`` (thought
signatures carried through other clients), ``errors``, ``partial_args`` (streamed function-call arguments),
``stream_decode`` (``GeminiStreamDecoder``), ``stream_encode`` (``GeminiStreamEncoder``) and ``search`` (the
``googleSearch`` tool and ``groundingMetadata``).
May import: ``dragoman.sse``, ``dragoman.ir``, ``dragoman.errors`` and ``dragoman.protocols``' shared helpers.
Never mitmproxy.
"""

from __future__ import annotations

from dragoman.protocols import Protocol
from dragoman.protocols._search import SearchCodec
from dragoman.protocols.gemini.errors import decode_error
from dragoman.protocols.gemini.errors import encode_error
from dragoman.protocols.gemini.request_decode import decode_request
from dragoman.protocols.gemini.request_encode import encode_request
from dragoman.protocols.gemini.response import decode_response
from dragoman.protocols.gemini.response import encode_response
from dragoman.protocols.gemini.stream_decode import GeminiStreamDecoder
from dragoman.protocols.gemini.stream_encode import GeminiStreamEncoder

CODEC = SearchCodec(
    Protocol.GEMINI,
    decode_request=decode_request,
    encode_request=encode_request,
    decode_response=decode_response,
    encode_response=encode_response,
    decode_error=decode_error,
    encode_error=encode_error,
    stream_decoder=GeminiStreamDecoder,
    stream_encoder=GeminiStreamEncoder,
)

__all__ = ["CODEC"]
