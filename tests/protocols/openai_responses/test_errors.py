"""Responses errors: upstream error bodies -> ErrorInfo, ErrorInfo -> the client's error body."""

from __future__ import annotations

import orjson
import pytest

from corpus_loader import samples
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.protocols.openai_responses import CODEC

ERR_BODIES = samples("openai-responses", ok=False)


@pytest.mark.parametrize("s", ERR_BODIES, ids=[s.name for s in ERR_BODIES])
def test_corpus_errors(s):
    info = CODEC.decode_error(s.status, s.body)
    err = orjson.loads(s.body)["error"]
    assert info.message == err["message"]
    assert info.status == s.status and info.kind is ErrorKind.INVALID_REQUEST
    assert info.code == (err.get("code") or err.get("type"))


def test_error_fallbacks():
    info = CODEC.decode_error(502, b"<html><title>Bad Gateway</title></html>")
    assert info.kind is ErrorKind.UPSTREAM_PROTOCOL and info.message == "Bad Gateway"
    info = CODEC.decode_error(429, b"", {"Retry-After": "3"})
    assert info.kind is ErrorKind.RATE_LIMIT and info.retry_after == "3"


@pytest.mark.parametrize(
    "kind,etype",
    [
        (ErrorKind.INVALID_REQUEST, "invalid_request_error"),
        (ErrorKind.AUTHENTICATION, "authentication_error"),
        (ErrorKind.PERMISSION, "permission_error"),
        (ErrorKind.NOT_FOUND, "not_found_error"),
        (ErrorKind.RATE_LIMIT, "rate_limit_error"),
        (ErrorKind.API_ERROR, "server_error"),
        (ErrorKind.OVERLOADED, "server_error"),
    ],
)
def test_encode_error(kind, etype):
    body = CODEC.encode_error(ErrorInfo(kind, "msg", code="c", param="p"))
    assert body == {"error": {"message": "msg", "type": etype, "param": "p", "code": "c"}}
