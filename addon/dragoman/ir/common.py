from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dragoman.ir.limits import Overflow
from dragoman.ir.lossy import LossReport


class StopReason(StrEnum):
    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    TOOL_USE = "tool_use"
    STOP_SEQUENCE = "stop_sequence"
    REFUSAL = "refusal"  # also Chat's content_filter
    PAUSE_TURN = "pause_turn"
    ERROR = "error"


@dataclass(slots=True)
class Usage:
    """Token usage. ``input_tokens`` INCLUDES cache reads and writes (see package docstring)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    reasoning_tokens: int | None = None
    #: hosted web searches run (Anthropic ``server_tool_use.web_search_requests``)
    web_search_requests: int | None = None

    def merged(self, other: Usage | None) -> Usage:
        """Fields set in ``other`` win."""
        if other is None:
            return self
        return Usage(
            input_tokens=other.input_tokens if other.input_tokens is not None else self.input_tokens,
            output_tokens=other.output_tokens if other.output_tokens is not None else self.output_tokens,
            cache_read_tokens=other.cache_read_tokens
            if other.cache_read_tokens is not None
            else self.cache_read_tokens,
            cache_creation_tokens=(
                other.cache_creation_tokens if other.cache_creation_tokens is not None else self.cache_creation_tokens
            ),
            reasoning_tokens=other.reasoning_tokens if other.reasoning_tokens is not None else self.reasoning_tokens,
            web_search_requests=(
                other.web_search_requests if other.web_search_requests is not None else self.web_search_requests
            ),
        )


class ErrorKind(StrEnum):
    """Protocol-neutral error classes; each codec maps them to its own ``type``/``code`` strings."""

    INVALID_REQUEST = "invalid_request"  # 400
    AUTHENTICATION = "authentication"  # 401
    PERMISSION = "permission"  # 403
    NOT_FOUND = "not_found"  # 404
    REQUEST_TOO_LARGE = "request_too_large"  # 413
    RATE_LIMIT = "rate_limit"  # 429
    API_ERROR = "api_error"  # 500 / unknown
    OVERLOADED = "overloaded"  # 529 / 503
    TIMEOUT = "timeout"  # 504 / idle timeout
    UPSTREAM_PROTOCOL = "upstream_protocol"  # the upstream broke its own protocol (502)


_STATUS_BY_KIND = {
    ErrorKind.INVALID_REQUEST: 400,
    ErrorKind.AUTHENTICATION: 401,
    ErrorKind.PERMISSION: 403,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.REQUEST_TOO_LARGE: 413,
    ErrorKind.RATE_LIMIT: 429,
    ErrorKind.API_ERROR: 500,
    ErrorKind.OVERLOADED: 529,
    ErrorKind.TIMEOUT: 504,
    ErrorKind.UPSTREAM_PROTOCOL: 502,
}


def kind_from_status(status: int) -> ErrorKind:
    if status == 400 or status == 422:
        return ErrorKind.INVALID_REQUEST
    if status == 401:
        return ErrorKind.AUTHENTICATION
    if status == 403:
        return ErrorKind.PERMISSION
    if status == 404:
        return ErrorKind.NOT_FOUND
    if status == 413:
        return ErrorKind.REQUEST_TOO_LARGE
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if status in (503, 529):
        return ErrorKind.OVERLOADED
    if status == 504:
        return ErrorKind.TIMEOUT
    if status == 502:
        return ErrorKind.UPSTREAM_PROTOCOL
    return ErrorKind.API_ERROR


@dataclass(slots=True)
class ErrorInfo:
    """An error in neutral form. ``status`` is the HTTP status to give the client (kept from upstream)."""

    kind: ErrorKind
    message: str
    status: int | None = None
    #: the upstream's own type/code string (e.g. ``overloaded_error``, ``insufficient_quota``), kept for fidelity
    code: str | None = None
    param: str | None = None
    retry_after: str | None = None
    request_id: str | None = None
    #: set when the error is a context-length overflow (``dragoman.translate.overflow``); the client codecs
    #: answer it in their own overflow terms
    overflow: Overflow | None = None

    @property
    def http_status(self) -> int:
        return self.status if self.status is not None else _STATUS_BY_KIND[self.kind]


#: the first name of the lossiness report (``lossy.LossReport``); ``Dropped().add(name)`` keeps working
Dropped = LossReport
