"""Incremental Server-Sent Events framing (WHATWG rules). Bytes in, events out; events in, bytes out.

Imports nothing from the rest of Dragoman.
"""

from dragoman.sse.decoder import SSEDecoder
from dragoman.sse.decoder import SSELimitError
from dragoman.sse.encoder import DONE
from dragoman.sse.encoder import encode
from dragoman.sse.encoder import encode_json
from dragoman.sse.events import COMMENT
from dragoman.sse.events import SSEEvent

__all__ = ["COMMENT", "DONE", "SSEDecoder", "SSEEvent", "SSELimitError", "encode", "encode_json"]
