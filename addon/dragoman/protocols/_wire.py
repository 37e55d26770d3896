"""Shared wire helpers: the ``WireModel`` base and JSON helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import ValidationError

from dragoman.errors import ClientRequestError
from dragoman.errors import UpstreamProtocolError
from dragoman.protocols import _bigjson

if TYPE_CHECKING:
    from dragoman.ir.common import ErrorInfo


class WireModel(BaseModel):
    """Base of every wire model: unknown fields are allowed (new API fields pass through)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def describe_validation_error(e: ValidationError, limit: int = 3) -> str:
    """A short, body-free description: field paths and what was wrong."""
    parts = []
    for err in e.errors()[:limit]:
        loc = ".".join(str(x) for x in err.get("loc", ()))
        parts.append(f"{loc or '(root)'}: {err.get('msg')}")
    more = len(e.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def parse_client_json(body: bytes) -> dict[str, Any]:
    try:
        obj = _bigjson.loads(body)  # orjson.loads, without its own copy of a large body's long strings
    except orjson.JSONDecodeError as e:
        raise ClientRequestError(f"request body is not valid JSON: {e}") from e
    if not isinstance(obj, dict):
        raise ClientRequestError("request body must be a JSON object")
    return obj


def parse_upstream_json(body: bytes) -> dict[str, Any]:
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise UpstreamProtocolError(f"upstream response is not valid JSON: {e}") from e
    if not isinstance(obj, dict):
        raise UpstreamProtocolError("upstream response must be a JSON object")
    return obj


def generic_error(status: int, body: bytes, headers: dict[str, str] | None = None) -> ErrorInfo:
    """Best-effort ErrorInfo from any error body: the three protocols' JSON shapes, other JSON
    (``{"detail": ...}``, ``{"message": ...}``), an HTML gateway page, or nothing."""
    import re

    from dragoman.ir.common import ErrorInfo
    from dragoman.ir.common import kind_from_status

    headers = {k.lower(): v for k, v in (headers or {}).items()}
    message: str | None = None
    code: str | None = None
    param: str | None = None
    request_id: str | None = headers.get("request-id") or headers.get("x-request-id")
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            m = err.get("message") or err.get("detail") or err.get("msg")
            message = m if isinstance(m, str) else (orjson.dumps(m).decode() if m is not None else None)
            c = err.get("type") or err.get("code")
            code = str(c) if c is not None else None
            p = err.get("param")
            param = str(p) if p is not None else None
        elif isinstance(err, str):
            message = err
        if isinstance(obj.get("request_id"), str):
            request_id = obj["request_id"]
    elif body:
        text = body[:4096].decode("utf-8", "replace")
        title = re.search(r"<title>(.*?)</title>", text, re.I | re.S)
        if title:
            message = re.sub(r"\s+", " ", title.group(1)).strip()
        else:
            message = re.sub(r"<[^>]+>", " ", text)
            message = re.sub(r"\s+", " ", message).strip()[:300]
    if not message:
        message = f"upstream returned HTTP {status}"
    return ErrorInfo(
        kind=kind_from_status(status),
        message=message,
        status=status,
        code=code,
        param=param,
        retry_after=headers.get("retry-after"),
        request_id=request_id,
    )
