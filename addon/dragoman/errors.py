"""Error hierarchy (after h11): every translation failure is a ``TranslationError`` with a status hint."""

from __future__ import annotations

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.limits import Overflow


class TranslationError(Exception):
    status_hint = 502
    kind = ErrorKind.API_ERROR

    def __init__(self, msg: str, status_hint: int | None = None) -> None:
        super().__init__(msg)
        if status_hint is not None:
            self.status_hint = status_hint

    def to_error_info(self) -> ErrorInfo:
        return ErrorInfo(kind=self.kind, message=str(self), status=self.status_hint)


class UpstreamProtocolError(TranslationError):
    """The upstream broke its own protocol (bad JSON, events out of order, stream ended early)."""

    status_hint = 502
    kind = ErrorKind.UPSTREAM_PROTOCOL


class UnsupportedFeatureError(TranslationError):
    """The target protocol cannot express something the client asked for."""

    status_hint = 400
    kind = ErrorKind.INVALID_REQUEST


class ClientRequestError(TranslationError):
    """The client's request is invalid (not JSON, wrong types, missing fields)."""

    status_hint = 400
    kind = ErrorKind.INVALID_REQUEST


class TranslatorStateError(TranslationError):
    """The translator was used out of order (feed after close)."""

    status_hint = 500
    kind = ErrorKind.API_ERROR


class ContextOverflowError(ClientRequestError):
    """The request's estimated input already exceeds the model's declared context window: answered as the
    client's API answers a context overflow, without spending an upstream call."""

    def __init__(self, tokens: int, limit: int, model: str) -> None:
        super().__init__(
            f"prompt is too long: {tokens} tokens > {limit} maximum (Dragoman's estimate of the input against "
            f"the context window the routes file declares for {model})"
        )
        self.tokens = tokens
        self.limit = limit

    def to_error_info(self) -> ErrorInfo:
        info = super().to_error_info()
        info.code = "context_length_exceeded"
        info.overflow = Overflow(self.tokens, self.limit)
        return info
