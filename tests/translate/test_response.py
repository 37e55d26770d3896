"""Whole-body translation: 2xx JSON bodies, error objects inside a 200, non-2xx error bodies, our own errors."""

from __future__ import annotations

import orjson
import pytest

from dragoman.errors import TranslationError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.translate.plan import Plan
from dragoman.translate.response import UpstreamErrorInBody
from dragoman.translate.response import error_body
from dragoman.translate.response import translate_error
from dragoman.translate.response import translate_response

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES

CHAT_COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}


def test_chat_completion_to_anthropic_message():
    out = orjson.loads(translate_response(orjson.dumps(CHAT_COMPLETION), Plan(A, C), Context()))
    assert out["type"] == "message" and out["role"] == "assistant"
    assert out["content"] == [{"type": "text", "text": "Hello!"}]
    assert out["stop_reason"] == "end_turn"
    assert (out["usage"]["input_tokens"], out["usage"]["output_tokens"]) == (5, 2)


def test_a_responses_body_with_error_null_is_a_success():
    # Responses objects carry "error": null on success: that must not be read as an error in a 200
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "error": None,
        "model": "gpt-5",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hi there", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    }
    out = orjson.loads(translate_response(orjson.dumps(body), Plan(C, R), Context()))
    assert out["choices"][0]["message"]["content"] == "Hi there"
    assert out["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(
    "plan, body, message, code",
    [
        (
            Plan(A, C),
            {"error": {"message": "quota gone", "type": "insufficient_quota"}},
            "quota gone",
            "insufficient_quota",
        ),
        (
            Plan(C, A),
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "Overloaded",
            "overloaded_error",
        ),
    ],
)
def test_an_error_object_in_a_200_raises_with_its_message(plan, body, message, code):
    with pytest.raises(UpstreamErrorInBody) as e:
        translate_response(orjson.dumps(body), plan, Context())
    info = e.value.to_error_info()
    assert isinstance(e.value, TranslationError)
    assert info is e.value.info
    assert (info.message, info.code, info.http_status) == (message, code, 502)


@pytest.mark.parametrize("body", [b"<html>bad gateway</html>", b"[]", b""])
def test_a_2xx_body_that_is_not_a_json_object_is_an_upstream_protocol_error(body):
    with pytest.raises(UpstreamProtocolError):
        translate_response(body, Plan(A, C), Context())


def test_translate_error_keeps_status_message_and_retry_after():
    upstream = orjson.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
    status, out, info = translate_error(429, upstream, Plan(C, A), {"Retry-After": "7"})
    assert status == 429
    assert orjson.loads(out) == {
        "error": {"message": "slow down", "type": "rate_limit_error", "param": None, "code": "rate_limit_error"}
    }
    assert (info.kind, info.retry_after) == (ErrorKind.RATE_LIMIT, "7")


def test_translate_error_of_a_non_json_body_still_answers_in_the_client_shape():
    status, out, info = translate_error(503, b"<html><title>503 Service Unavailable</title></html>", Plan(A, R))
    assert status == 503
    body = orjson.loads(out)
    assert body["type"] == "error"
    assert body["error"]["message"] == "503 Service Unavailable"
    assert info.kind is ErrorKind.OVERLOADED


@pytest.mark.parametrize(
    "client, expected",
    [
        (A, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}),
        (C, {"error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": None}}),
        (R, {"error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": None}}),
    ],
)
def test_error_body_speaks_the_client_protocol(client, expected):
    info = ErrorInfo(kind=ErrorKind.INVALID_REQUEST, message="bad", status=400)
    assert orjson.loads(error_body(info, client)) == expected
