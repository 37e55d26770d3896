"""Chat error bodies both ways (real corpus errors, OpenRouter's numeric codes, HTML pages)."""

from __future__ import annotations

import json

import pytest

from corpus_loader import samples
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.protocols.openai_chat import CODEC
from dragoman.protocols.openai_chat.errors import error_frame

ERRORS = samples("openai-chat", stream=False, ok=False)


@pytest.mark.parametrize("s", ERRORS, ids=[s.name for s in ERRORS])
def test_corpus_errors_decode(s):
    info = CODEC.decode_error(s.status, s.body, {"retry-after": "7"})
    body = json.loads(s.body)
    assert info.message == body["error"]["message"]
    assert info.http_status == s.status
    assert info.retry_after == "7"


def test_openrouter_numeric_code_and_fallbacks():
    info = CODEC.decode_error(429, b'{"error":{"message":"Rate limit exceeded","code":429}}')
    assert info.kind is ErrorKind.RATE_LIMIT and info.message == "Rate limit exceeded" and info.code is None
    info = CODEC.decode_error(
        401, b'{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}'
    )
    assert info.kind is ErrorKind.AUTHENTICATION and info.code == "invalid_api_key"
    info = CODEC.decode_error(502, b"<html><title>Bad Gateway</title></html>")
    assert info.message == "Bad Gateway" and info.kind is ErrorKind.UPSTREAM_PROTOCOL
    info = CODEC.decode_error(500, b"")
    assert info.kind is ErrorKind.API_ERROR


@pytest.mark.parametrize(
    "kind,etype,code",
    [
        (ErrorKind.INVALID_REQUEST, "invalid_request_error", None),
        (ErrorKind.AUTHENTICATION, "authentication_error", None),
        (ErrorKind.PERMISSION, "permission_error", None),
        (ErrorKind.NOT_FOUND, "not_found_error", None),
        (ErrorKind.REQUEST_TOO_LARGE, "invalid_request_error", "request_too_large"),
        (ErrorKind.RATE_LIMIT, "rate_limit_error", "rate_limit_exceeded"),
        (ErrorKind.API_ERROR, "server_error", None),
        (ErrorKind.OVERLOADED, "server_error", "overloaded"),
    ],
)
def test_error_encode(kind, etype, code):
    body = CODEC.encode_error(ErrorInfo(kind=kind, message="msg"))
    assert body == {"error": {"message": "msg", "type": etype, "param": None, "code": code}}
    kept = CODEC.encode_error(ErrorInfo(kind=kind, message="m", code="insufficient_quota"))
    assert kept["error"]["code"] == "insufficient_quota"
    info = CODEC.decode_error(ErrorInfo(kind=kind, message="x").http_status, json.dumps(body).encode())
    assert (
        info.kind is kind
        or kind is ErrorKind.REQUEST_TOO_LARGE
        or info.http_status == ErrorInfo(kind=kind, message="x").http_status
    )


def test_error_frame_is_one_data_chunk_and_survives_unencodable_fields():
    frame = error_frame(ErrorInfo(kind=ErrorKind.RATE_LIMIT, message="slow down", param="model"))
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n") and frame.count(b"\n\n") == 1
    assert json.loads(frame[6:]) == {
        "error": {"message": "slow down", "type": "rate_limit_error", "param": "model", "code": "rate_limit_exceeded"}
    }
    # a code no JSON encoder can write (an upstream sent an integer above 64 bits): the message still arrives
    frame = error_frame(ErrorInfo(kind=ErrorKind.OVERLOADED, message="busy", code=2**70))  # type: ignore[arg-type]
    assert json.loads(frame[6:]) == {"error": {"message": "busy", "type": "server_error", "param": None, "code": None}}
