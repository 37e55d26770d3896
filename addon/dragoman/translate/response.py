"""Whole-body translation: an upstream JSON response or error body -> the client's protocol."""

from __future__ import annotations

from typing import Any

import orjson

from dragoman.errors import TranslationError
from dragoman.ir.common import ErrorInfo
from dragoman.protocols import Protocol
from dragoman.protocols._wire import parse_upstream_json
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.plan import Plan


def translate_response(body: bytes, plan: Plan, ctx: Context) -> bytes:
    """A 2xx JSON body. Raises ``TranslationError`` when it cannot be translated.

    Some upstreams answer 200 with an error object (``{"error": ...}`` or ``{"type": "error"}``);
    that raises ``UpstreamErrorInBody`` carrying the ErrorInfo so the caller can answer with an error.
    """
    obj = parse_upstream_json(body)
    up = get_codec(plan.upstream)
    if _looks_like_error(obj):
        raise UpstreamErrorInBody(up.decode_error(502, body))
    resp = up.decode_response(obj, ctx)
    return orjson.dumps(get_codec(plan.client).encode_response(resp, ctx))


def translate_error(
    status: int, body: bytes, plan: Plan, headers: dict[str, str] | None = None
) -> tuple[int, bytes, ErrorInfo]:
    """A non-2xx upstream body -> (status, client error body, info). Same status, message and type."""
    info = get_codec(plan.upstream).decode_error(status, body, headers)
    return info.http_status, orjson.dumps(get_codec(plan.client).encode_error(info)), info


def error_body(info: ErrorInfo, plan_client: Protocol) -> bytes:
    """Our own error (bad client request, translation failure) in the client's protocol."""
    return orjson.dumps(get_codec(plan_client).encode_error(info))


def _looks_like_error(obj: dict[str, Any]) -> bool:
    if obj.get("type") == "error":
        return True
    err = obj.get("error")
    # Responses bodies carry "error": null on success
    return err is not None and "choices" not in obj and "content" not in obj and "output" not in obj


class UpstreamErrorInBody(TranslationError):
    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message, info.http_status)
        self.info = info

    def to_error_info(self) -> ErrorInfo:
        return self.info
