"""Responses errors: HTTP error bodies in the shared OpenAI shape, and in-stream ``error`` /
``response.failed`` payloads -> ``ErrorInfo``."""

from __future__ import annotations

from typing import Any

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.protocols import _openai_errors

_KIND_BY_CODE = {
    "insufficient_quota": ErrorKind.RATE_LIMIT,
    "rate_limit_exceeded": ErrorKind.RATE_LIMIT,
    "rate_limit_error": ErrorKind.RATE_LIMIT,
    "server_error": ErrorKind.API_ERROR,
    "server_is_overloaded": ErrorKind.OVERLOADED,
    "slow_down": ErrorKind.OVERLOADED,
    "invalid_request_error": ErrorKind.INVALID_REQUEST,
    "invalid_prompt": ErrorKind.INVALID_REQUEST,
    "context_length_exceeded": ErrorKind.INVALID_REQUEST,
    "invalid_api_key": ErrorKind.AUTHENTICATION,
    "authentication_error": ErrorKind.AUTHENTICATION,
    "permission_error": ErrorKind.PERMISSION,
    "not_found_error": ErrorKind.NOT_FOUND,
    "model_not_found": ErrorKind.NOT_FOUND,
}

ERROR_TYPES = _openai_errors.TYPE_BY_KIND
decode_error = _openai_errors.decode_error
encode_error = _openai_errors.encode_error


def stream_error_info(code: Any, message: Any, param: Any) -> ErrorInfo:
    """An in-stream error's fields (any JSON types) -> ErrorInfo."""
    code_s = str(code) if code is not None else None
    kind = _KIND_BY_CODE.get(code_s or "", ErrorKind.API_ERROR)
    return ErrorInfo(
        kind=kind,
        message=message if isinstance(message, str) and message else "upstream reported an error in the stream",
        code=code_s,
        param=param if isinstance(param, str) else None,
    )
