"""Anthropic Messages errors: upstream error bodies -> ``ErrorInfo``, ``ErrorInfo`` -> client error body.

An upstream body in Anthropic's own shape (``{"type":"error","error":{"type":...,"message":...}}``)
keeps its error type and request id; anything else (foreign JSON, an HTML gateway page, nothing) goes
through ``_wire.generic_error``. Toward a client, an Anthropic error type the upstream sent is kept
unless the fault is the translation's own (``UPSTREAM_PROTOCOL``).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import kind_from_status
from dragoman.protocols import _wire
from dragoman.protocols.anthropic_messages import models as m

#: Anthropic error ``type`` -> (IR kind, HTTP status)
ERROR_TYPES: dict[str, tuple[ErrorKind, int]] = {
    "invalid_request_error": (ErrorKind.INVALID_REQUEST, 400),
    "authentication_error": (ErrorKind.AUTHENTICATION, 401),
    "billing_error": (ErrorKind.PERMISSION, 402),
    "permission_error": (ErrorKind.PERMISSION, 403),
    "not_found_error": (ErrorKind.NOT_FOUND, 404),
    "request_too_large": (ErrorKind.REQUEST_TOO_LARGE, 413),
    "rate_limit_error": (ErrorKind.RATE_LIMIT, 429),
    "api_error": (ErrorKind.API_ERROR, 500),
    "timeout_error": (ErrorKind.TIMEOUT, 504),
    "overloaded_error": (ErrorKind.OVERLOADED, 529),
}

#: IR kind -> Anthropic error ``type``
ERROR_TYPE_BY_KIND = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "authentication_error",
    ErrorKind.PERMISSION: "permission_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.REQUEST_TOO_LARGE: "request_too_large",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
    ErrorKind.API_ERROR: "api_error",
    ErrorKind.OVERLOADED: "overloaded_error",
    ErrorKind.TIMEOUT: "timeout_error",
    ErrorKind.UPSTREAM_PROTOCOL: "api_error",
}
_ANTHROPIC_ERROR_TYPES = frozenset(ERROR_TYPE_BY_KIND.values()) | {"billing_error"}


# ---------------------------------------------------------------- decode (upstream -> IR)


def error_info_from_type(
    etype: str | None, message: str, status: int | None = None, request_id: str | None = None
) -> ErrorInfo:
    kind_status = ERROR_TYPES.get(etype or "")
    if kind_status is not None:
        kind, default_status = kind_status
    else:
        kind = kind_from_status(status) if status is not None else ErrorKind.API_ERROR
        default_status = status if status is not None else 500
    return ErrorInfo(
        kind=kind,
        message=message,
        status=status if status is not None else default_status,
        code=etype,
        request_id=request_id,
    )


def _error_response(body: bytes) -> m.ErrorResponse | None:
    """``body`` as an Anthropic error response, or None when it is not one."""
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("type") != "error" or not isinstance(obj.get("error"), dict):
        return None
    try:
        return m.ErrorResponse.model_validate(obj)
    except ValidationError:
        return None


def decode_error(status: int, body: bytes, headers: dict[str, str] | None = None) -> ErrorInfo:
    wire = _error_response(body)
    if wire is None:
        return _wire.generic_error(status, body, headers)
    hdrs = {k.lower(): v for k, v in (headers or {}).items()}
    info = error_info_from_type(
        wire.error.type,
        wire.error.message or f"upstream returned HTTP {status}",
        status,
        wire.request_id or hdrs.get("request-id") or hdrs.get("x-request-id"),
    )
    info.retry_after = hdrs.get("retry-after")
    return info


# ---------------------------------------------------------------- encode (IR -> client)


def error_type(err: ErrorInfo) -> str:
    if err.code is not None and err.code in _ANTHROPIC_ERROR_TYPES and err.kind is not ErrorKind.UPSTREAM_PROTOCOL:
        return err.code
    return ERROR_TYPE_BY_KIND.get(err.kind, "api_error")


def overflow_message(err: ErrorInfo) -> str:
    """A context overflow (``ErrorInfo.overflow``) as the Anthropic API words it; Claude Code parses these
    numbers to decide how much to compact (or how far to lower ``max_tokens``)."""
    o = err.overflow
    if o is None:
        return err.message
    if o.tokens is not None and o.limit is not None:
        if o.output is not None and o.tokens <= o.limit:
            return (
                f"input length and `max_tokens` exceed context limit: {o.tokens} + {o.output} > {o.limit}, "
                "decrease input length or `max_tokens` and try again"
            )
        return f"prompt is too long: {o.tokens} tokens > {o.limit} maximum"
    if err.message.lower().startswith("prompt is too long"):
        return err.message
    return f"prompt is too long: {err.message}"


def encode_error(err: ErrorInfo) -> dict[str, Any]:
    message = overflow_message(err) if err.overflow is not None else err.message
    out: dict[str, Any] = {"type": "error", "error": {"type": error_type(err), "message": message}}
    if err.request_id:
        out["request_id"] = err.request_id
    return out
