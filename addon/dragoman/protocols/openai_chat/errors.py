"""Chat Completions errors: HTTP error bodies and in-stream error chunks, in the shared OpenAI shape.

``decode_error``/``encode_error`` are the HTTP bodies (``_openai_errors``); ``error_info_from_object``
reads an in-stream ``{"error": ...}`` chunk (OpenRouter's numeric ``code`` included); ``error_frame``
is the terminal error chunk the stream encoder writes.
"""

from __future__ import annotations

import logging

import orjson

from dragoman.ir.common import ErrorInfo
from dragoman.protocols import _openai_errors
from dragoman.protocols._checks import safe_message

logger = logging.getLogger(__name__)

decode_error = _openai_errors.decode_error
encode_error = _openai_errors.encode_error
error_object = _openai_errors.error_object
error_info_from_object = _openai_errors.error_info_from_object


def error_frame(err: ErrorInfo) -> bytes:
    """The ``data: {"error": ...}`` chunk that ends a Chat stream (the SDKs raise it as an APIError)."""
    try:
        return b"data: " + orjson.dumps({"error": error_object(err)}) + b"\n\n"
    except (TypeError, ValueError):  # an upstream code/param no JSON encoder can write: a plain frame
        logger.warning("Chat error frame: upstream error fields not encodable; sending the message only")
        obj = {
            "message": safe_message(err.message),
            "type": _openai_errors.TYPE_BY_KIND.get(err.kind, "server_error"),
            "param": None,
            "code": None,
        }
        return b"data: " + orjson.dumps({"error": obj}) + b"\n\n"
