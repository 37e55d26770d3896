"""OpenAI Responses (``/responses``): the strictest of the three protocols on the client side.

``CODEC`` decodes Responses requests, whole responses, errors and SSE into the IR and encodes the IR back.
One module per concern: ``models`` (wire models), ``request_decode`` / ``request_encode``,
``response_decode`` / ``response_encode`` (whole responses), ``errors``, ``stream_decode``
(``ResponsesStreamDecoder``, item state in ``stream_decode_items``) and ``stream_encode``
(``ResponsesStreamEncoder``, item framing in ``stream_encode_items``).
"""

from __future__ import annotations

from dragoman.protocols import Protocol
from dragoman.protocols._search import SearchCodec
from dragoman.protocols.openai_responses.errors import decode_error
from dragoman.protocols.openai_responses.errors import encode_error
from dragoman.protocols.openai_responses.request_decode import decode_request
from dragoman.protocols.openai_responses.request_encode import encode_request
from dragoman.protocols.openai_responses.response_decode import decode_response
from dragoman.protocols.openai_responses.response_encode import encode_response
from dragoman.protocols.openai_responses.stream_decode import ResponsesStreamDecoder
from dragoman.protocols.openai_responses.stream_encode import ResponsesStreamEncoder

CODEC = SearchCodec(
    Protocol.OPENAI_RESPONSES,
    decode_request=decode_request,
    encode_request=encode_request,
    decode_response=decode_response,
    encode_response=encode_response,
    decode_error=decode_error,
    encode_error=encode_error,
    stream_decoder=ResponsesStreamDecoder,
    stream_encoder=ResponsesStreamEncoder,
)

__all__ = ["CODEC"]
