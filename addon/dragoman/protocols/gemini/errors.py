"""Gemini errors: ``{"error": {"code", "message", "status", "details"}}`` both ways.

``status`` is the google.rpc code name (``INVALID_ARGUMENT``, ``RESOURCE_EXHAUSTED``, ...); a 429's ``details``
may hold a ``google.rpc.RetryInfo`` whose ``retryDelay`` (``"34.4s"``) becomes ``retry_after`` (whole seconds,
rounded up) and back. A body that is a JSON array (the stream without ``alt=sse``) is read by its first
element; anything else goes through ``_wire.generic_error``. ``error_frame`` is the in-stream error event.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
from pydantic import ValidationError

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import kind_from_status
from dragoman.protocols import _wire
from dragoman.protocols._checks import safe_message
from dragoman.protocols.gemini import models as m

#: google.rpc status name -> (IR kind, HTTP status)
STATUSES: dict[str, tuple[ErrorKind, int]] = {
    "INVALID_ARGUMENT": (ErrorKind.INVALID_REQUEST, 400),
    "FAILED_PRECONDITION": (ErrorKind.INVALID_REQUEST, 400),
    "OUT_OF_RANGE": (ErrorKind.INVALID_REQUEST, 400),
    "UNAUTHENTICATED": (ErrorKind.AUTHENTICATION, 401),
    "PERMISSION_DENIED": (ErrorKind.PERMISSION, 403),
    "NOT_FOUND": (ErrorKind.NOT_FOUND, 404),
    "RESOURCE_EXHAUSTED": (ErrorKind.RATE_LIMIT, 429),
    "CANCELLED": (ErrorKind.API_ERROR, 499),
    "INTERNAL": (ErrorKind.API_ERROR, 500),
    "UNKNOWN": (ErrorKind.API_ERROR, 500),
    "UNAVAILABLE": (ErrorKind.OVERLOADED, 503),
    "DEADLINE_EXCEEDED": (ErrorKind.TIMEOUT, 504),
}
STATUS_BY_KIND = {
    ErrorKind.INVALID_REQUEST: "INVALID_ARGUMENT",
    ErrorKind.AUTHENTICATION: "UNAUTHENTICATED",
    ErrorKind.PERMISSION: "PERMISSION_DENIED",
    ErrorKind.NOT_FOUND: "NOT_FOUND",
    ErrorKind.REQUEST_TOO_LARGE: "INVALID_ARGUMENT",
    ErrorKind.RATE_LIMIT: "RESOURCE_EXHAUSTED",
    ErrorKind.API_ERROR: "INTERNAL",
    ErrorKind.OVERLOADED: "UNAVAILABLE",
    ErrorKind.TIMEOUT: "DEADLINE_EXCEEDED",
    ErrorKind.UPSTREAM_PROTOCOL: "INTERNAL",
}
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def _retry_after(details: Any) -> str | None:
    for d in details if isinstance(details, list) else ():
        if isinstance(d, dict) and d.get("@type") == _RETRY_INFO and isinstance(d.get("retryDelay"), str):
            try:
                return str(math.ceil(float(d["retryDelay"].rstrip("s"))))
            except ValueError:
                return None
    return None


def error_info_from_object(err: Any, status: int | None) -> ErrorInfo:
    """A Gemini ``error`` object (validated as ``models.Status``) -> ErrorInfo; ``status`` is the HTTP status
    when known. A string is the message; an object of the wrong shape reads as an unnamed upstream error."""
    st = None
    if isinstance(err, dict):
        try:
            st = m.Status.model_validate(err)
        except ValidationError:
            st = None
    if st is None:
        msg = err.get("message") if isinstance(err, dict) else err  # an object of another shape: its message
        msg = msg if isinstance(msg, str) and msg else "upstream error"
        return ErrorInfo(kind=kind_from_status(status) if status else ErrorKind.API_ERROR, message=msg, status=status)
    return _from_status(st, status)


def _from_status(st: m.Status, status: int | None) -> ErrorInfo:
    message = st.message or "upstream error"
    code, name = st.code, st.status
    if status is None and code is not None and 400 <= code < 600:
        status = code
    known = STATUSES.get(name) if name is not None else None
    if known is not None:
        kind = known[0]
        if status is None:
            status = known[1]
    else:
        kind = kind_from_status(status) if status else ErrorKind.API_ERROR
    return ErrorInfo(kind=kind, message=message, status=status, code=name, retry_after=_retry_after(st.details))


def decode_error(status: int, body: bytes, headers: dict[str, str] | None = None) -> ErrorInfo:
    """An HTTP error body; Gemini's own shape (``{"error": {..., "status"}}``) validated by ``ERROR_ADAPTER``."""
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        obj = obj[0]
    wire = None
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict) and "status" in obj["error"]:
        try:
            wire = m.ERROR_ADAPTER.validate_python(obj)
        except ValidationError:
            wire = None  # not Gemini's shape after all: read as any error body
    if wire is not None:
        info = _from_status(wire.error, status)
        if info.retry_after is None and headers:
            info.retry_after = {k.lower(): v for k, v in headers.items()}.get("retry-after")
        return info
    return _wire.generic_error(status, body, headers)


def error_object(err: ErrorInfo) -> dict[str, Any]:
    status = err.code if err.code in STATUSES else STATUS_BY_KIND.get(err.kind, "INTERNAL")
    obj: dict[str, Any] = {"code": err.http_status, "message": err.message, "status": status}
    if err.retry_after:
        obj["details"] = [{"@type": _RETRY_INFO, "retryDelay": f"{err.retry_after}s"}]
    return obj


def encode_error(err: ErrorInfo) -> dict[str, Any]:
    return {"error": error_object(err)}


def error_json(err: ErrorInfo) -> bytes:
    """``{"error": ...}`` as bytes, falling back to the message alone when an upstream field is not encodable."""
    try:
        return orjson.dumps(encode_error(err))
    except (TypeError, ValueError):
        fallback = {"code": err.http_status, "message": safe_message(err.message), "status": "INTERNAL"}
        return orjson.dumps({"error": fallback})
