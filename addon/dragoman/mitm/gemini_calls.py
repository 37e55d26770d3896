"""Gemini's calls besides generation: ``:countTokens``, answered with a local estimate.

The request (``contents``, ``systemInstruction``, ``tools``, or a ``generateContentRequest`` holding them) is
read by the Gemini codec, written in Anthropic's shape and counted by ``translate.tokens`` as Anthropic's
``count_tokens`` is when the upstream cannot count: ``{"totalTokens": N}``. A bad body gets Gemini's 400.
"""

from __future__ import annotations

import re

import orjson

from dragoman.errors import TranslationError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.tokens import estimate_input_tokens

_COUNT = re.compile(r"/v1\w*/models/[^/:]+:countTokens$")


def is_count_tokens(path: str) -> bool:
    return _COUNT.search(path) is not None


def count_tokens(raw: bytes) -> tuple[int, bytes]:
    """-> (status, body) for a ``:countTokens`` request body."""
    gemini = get_codec(Protocol.GEMINI)
    try:
        body = orjson.loads(raw)
        if not isinstance(body, dict):
            raise TranslationError("request body is not a JSON object", 400)
        inner = body.get("generateContentRequest")
        req = gemini.decode_request(inner if isinstance(inner, dict) else body)
        req.model = req.model or "count"
        anthropic = get_codec(Protocol.ANTHROPIC_MESSAGES).encode_request(req, Context(request=req))
    except (orjson.JSONDecodeError, TranslationError) as e:
        info = ErrorInfo(kind=ErrorKind.INVALID_REQUEST, message=f"countTokens: {e}", status=400)
        return 400, orjson.dumps(gemini.encode_error(info))
    return 200, orjson.dumps({"totalTokens": estimate_input_tokens(anthropic)})
