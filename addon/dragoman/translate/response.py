"""Whole-body translation: an upstream JSON response or error body -> the client's protocol."""

from __future__ import annotations

import logging
from typing import Any

import orjson

from dragoman.errors import TranslationError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import Usage
from dragoman.logsafe import logsafe
from dragoman.protocols import Protocol
from dragoman.protocols._wire import parse_upstream_json
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.overflow import recognise
from dragoman.translate.plan import Plan

logger = logging.getLogger(__name__)


def translate_response(body: bytes, plan: Plan, ctx: Context) -> bytes:
    """A 2xx JSON body. Raises ``TranslationError`` when it cannot be translated.

    Some upstreams answer 200 with an error object (``{"error": ...}`` or ``{"type": "error"}``);
    that raises ``UpstreamErrorInBody`` carrying the ErrorInfo so the caller can answer with an error.
    """
    return translate_response_usage(body, plan, ctx)[0]


def translate_response_usage(body: bytes, plan: Plan, ctx: Context) -> tuple[bytes, Usage | None]:
    """``translate_response``, and the usage the upstream reported (read in the same decoding: the body is
    parsed once for both)."""
    obj = parse_upstream_json(body)
    up = get_codec(plan.upstream)
    if _looks_like_error(obj):
        raise UpstreamErrorInBody(up.decode_error(502, body))
    resp = up.decode_response(obj, ctx)
    return orjson.dumps(get_codec(plan.client).encode_response(resp, ctx)), resp.usage


def translate_error(
    status: int, body: bytes, plan: Plan, headers: dict[str, str] | None = None, ctx: Context | None = None
) -> tuple[int, bytes, ErrorInfo]:
    """A non-2xx upstream body -> (status, client error body, info). Same status, message and type, except
    a context overflow, which the client gets in its own overflow terms (``overflow``); ``ctx`` gives the
    request's estimate and declared window for the numbers the upstream's message lacks."""
    info = get_codec(plan.upstream).decode_error(status, body, headers)
    info = as_overflow(info, ctx)
    return info.http_status, orjson.dumps(get_codec(plan.client).encode_error(info)), info


def as_overflow(info: ErrorInfo, ctx: Context | None = None) -> ErrorInfo:
    """``info``, or its overflow form when it is a context-length error (its original message logged)."""
    found = recognise(info)
    if found is None:
        return info
    o = found.overflow
    if ctx is not None and o is not None and (o.tokens is None or o.limit is None):
        # only now (an overflow without both numbers) is the request's estimate worth computing
        window = ctx.model_limits.context_window if ctx.model_limits is not None else None
        try:
            estimate = ctx.estimate_input_tokens()
        except Exception:  # noqa: BLE001 - the answer goes out without the estimate rather than not at all
            logger.exception("estimating the request's input tokens for an overflow answer failed")
            estimate = None
        found = recognise(info, estimate, window) or found
    o = found.overflow
    assert o is not None
    logger.warning(
        "context overflow (prompt %s tokens, window %s) answered in the client's overflow terms; original message: %s",
        o.tokens if o.tokens is not None else "?",
        o.limit if o.limit is not None else "?",
        logsafe(info.message, 500),
    )
    return found


def error_body(info: ErrorInfo, plan_client: Protocol) -> bytes:
    """Our own error (bad client request, translation failure) in the client's protocol."""
    return orjson.dumps(get_codec(plan_client).encode_error(as_overflow(info) if info.overflow else info))


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
