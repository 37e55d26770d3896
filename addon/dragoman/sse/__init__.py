"""Incremental Server-Sent Events framing (WHATWG rules). Bytes in, events out; events in, bytes out.

Imports nothing from the rest of Dragoman.
"""

from dragoman.sse.capped import CappedSSEDecoder
from dragoman.sse.capped import SSELimitError
from dragoman.sse.decoder import SSEDecoder
from dragoman.sse.encoder import DONE
from dragoman.sse.encoder import encode
from dragoman.sse.encoder import encode_json
from dragoman.sse.events import COMMENT
from dragoman.sse.events import SSEEvent

__all__ = ["COMMENT", "CappedSSEDecoder", "DONE", "SSEDecoder", "SSEEvent", "SSELimitError", "encode", "encode_json"]
