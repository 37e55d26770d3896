"""Anthropic error bodies, both directions (``errors``)."""

from __future__ import annotations

import json

import pytest

from corpus_loader import samples
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.protocols.anthropic_messages import CODEC

JSON_ERR = samples("anthropic", stream=False, ok=False)


@pytest.mark.parametrize("sample", JSON_ERR, ids=[s.name for s in JSON_ERR])
def test_decode_corpus_errors(sample):
    info = CODEC.decode_error(sample.status, sample.body, {})
    body = json.loads(sample.body)
    assert info.message == body["error"]["message"]
    assert info.code == body["error"]["type"]
    assert info.request_id == body["request_id"]
    assert info.status == sample.status
    assert info.kind in (ErrorKind.INVALID_REQUEST, ErrorKind.NOT_FOUND)


def test_decode_error_types_and_fallbacks():
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    info = CODEC.decode_error(529, body, {"request-id": "req_1", "retry-after": "3"})
    assert (info.kind, info.status, info.request_id, info.retry_after) == (ErrorKind.OVERLOADED, 529, "req_1", "3")
    info = CODEC.decode_error(502, b"<html><title>Bad Gateway</title></html>", {})
    assert info.message == "Bad Gateway" and info.kind is ErrorKind.UPSTREAM_PROTOCOL
    info = CODEC.decode_error(429, b'{"error":{"message":"slow down","type":"requests"}}', {})
    assert info.kind is ErrorKind.RATE_LIMIT and info.message == "slow down"
    info = CODEC.decode_error(500, b"", {})
    assert info.kind is ErrorKind.API_ERROR and "500" in info.message


@pytest.mark.parametrize(
    "kind,etype",
    [
        (ErrorKind.INVALID_REQUEST, "invalid_request_error"),
        (ErrorKind.AUTHENTICATION, "authentication_error"),
        (ErrorKind.PERMISSION, "permission_error"),
        (ErrorKind.NOT_FOUND, "not_found_error"),
        (ErrorKind.REQUEST_TOO_LARGE, "request_too_large"),
        (ErrorKind.RATE_LIMIT, "rate_limit_error"),
        (ErrorKind.API_ERROR, "api_error"),
        (ErrorKind.OVERLOADED, "overloaded_error"),
        (ErrorKind.TIMEOUT, "timeout_error"),
        (ErrorKind.UPSTREAM_PROTOCOL, "api_error"),
    ],
)
def test_encode_error(kind, etype):
    out = CODEC.encode_error(ErrorInfo(kind, "boom", request_id="req_7"))
    assert out == {"type": "error", "error": {"type": etype, "message": "boom"}, "request_id": "req_7"}
    assert "request_id" not in CODEC.encode_error(ErrorInfo(kind, "boom"))


@pytest.mark.parametrize("sample", samples("anthropic", stream=False, ok=False), ids=lambda s: s.name)
def test_error_round_trip(sample):
    info = CODEC.decode_error(sample.status, sample.body, {})
    assert CODEC.encode_error(info) == json.loads(sample.body)
