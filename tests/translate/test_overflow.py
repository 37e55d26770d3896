"""Context overflow (issue 36, item 2): every recognised upstream form, answered in each client protocol's own
overflow terms, as a whole HTTP error and inside a stream (over every chunking)."""

from __future__ import annotations

import json

import orjson
import pytest

from conftest import chunkings
from conftest import run_stream
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.limits import ModelLimits
from dragoman.ir.limits import Overflow
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.overflow import parse
from dragoman.translate.overflow import recognise
from dragoman.translate.plan import Plan
from dragoman.translate.response import error_body
from dragoman.translate.response import translate_error
from dragoman.translate.stream import StreamTranslator

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES


def _openai(message: str, code: str | None = None, etype: str = "invalid_request_error") -> bytes:
    return orjson.dumps({"error": {"message": message, "type": etype, "param": None, "code": code}})


def _anthropic(message: str) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": message}})


#: (name, upstream protocol, HTTP status, body, expected Overflow (tokens, window, output))
FORMS = [
    (
        "openai-chat",
        C,
        400,
        _openai(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 "
            "tokens. Please reduce the length of the messages.",
            "context_length_exceeded",
        ),
        Overflow(130512, 128000),
    ),
    (
        "openai-responses",
        R,
        400,
        _openai(
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "context_length_exceeded",
        ),
        Overflow(None, None),
    ),
    (
        "vllm",
        C,
        400,
        orjson.dumps(
            {
                "object": "error",
                "message": "This model's maximum context length is 102400 tokens. However, you requested 107837 "
                "tokens (105837 in the messages, 2000 in the completion). Please reduce the length of the "
                "messages or completion.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        Overflow(105837, 102400, 2000),
    ),
    (
        "vllm-input-only",
        C,
        400,
        _openai(
            "This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens. "
            "Please reduce the length of the input messages.",
            None,
            "BadRequestError",
        ),
        Overflow(40000, 32768),
    ),
    (
        "vllm-max-tokens",
        C,
        400,
        _openai(
            "'max_tokens' or 'max_completion_tokens' is too large: 32000. This model's maximum context length is "
            "32768 tokens and your request has 1000 input tokens (32000 > 32768 - 1000).",
            None,
            "BadRequestError",
        ),
        Overflow(1000, 32768, 32000),
    ),
    (
        "vllm-decoder-prompt",
        C,
        400,
        _openai(
            "The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that "
            "`max_model_len` is no smaller than the number of text tokens.",
        ),
        Overflow(5000, 4096),
    ),
    (
        "deepseek",
        C,
        400,
        _openai(
            "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (140000 "
            "in the messages, 0 in the completion). Please reduce the length of the messages or completion.",
        ),
        Overflow(140000, 131072),
    ),
    (
        "openrouter",
        C,
        400,
        orjson.dumps(
            {
                "error": {
                    "message": "This endpoint's maximum context length is 8192 tokens. However, you requested about "
                    "10500 tokens (10500 of text input). Please reduce the length of either one, or use the "
                    '"middle-out" transform to compress your prompt automatically.',
                    "code": 400,
                }
            }
        ),
        Overflow(10500, 8192),
    ),
    (
        "mistral",
        C,
        400,
        _openai(
            "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length"
        ),
        Overflow(40000, 32768),
    ),
    (
        "llama.cpp",
        C,
        400,
        orjson.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 9000,
                    "n_ctx": 8192,
                }
            }
        ),
        Overflow(None, None),
    ),
    (
        "ollama",
        C,
        400,
        _openai("prompt too long; exceeded max context length by 1234 tokens", None, "api_error"),
        Overflow(None, None),
    ),
    (
        "gemini",
        C,
        400,
        orjson.dumps(
            [
                {
                    "error": {
                        "code": 400,
                        "message": "The input token count (1189051) exceeds the maximum number of tokens allowed "
                        "(1048576).",
                        "status": "INVALID_ARGUMENT",
                    }
                }
            ]
        ),
        Overflow(1189051, 1048576),
    ),
    ("anthropic", A, 400, _anthropic("prompt is too long: 215000 tokens > 200000 maximum"), Overflow(215000, 200000)),
    (
        "anthropic-max-tokens",
        A,
        400,
        _anthropic(
            "input length and `max_tokens` exceed context limit: 190000 + 32000 > 204798, decrease input length "
            "or `max_tokens` and try again"
        ),
        Overflow(190000, 204798, 32000),
    ),
]
IDS = [f[0] for f in FORMS]


def _expected_anthropic(o: Overflow, original: str) -> str:
    if o.tokens is not None and o.limit is not None:
        if o.output is not None and o.tokens <= o.limit:
            return (
                f"input length and `max_tokens` exceed context limit: {o.tokens} + {o.output} > {o.limit}, "
                "decrease input length or `max_tokens` and try again"
            )
        return f"prompt is too long: {o.tokens} tokens > {o.limit} maximum"
    return original if original.startswith("prompt is too long") else f"prompt is too long: {original}"


def _upstream_message(up: Protocol, status: int, body: bytes) -> str:
    return get_codec(up).decode_error(status, body).message


@pytest.mark.parametrize("name,up,status,body,expected", FORMS, ids=IDS)
def test_whole_error_in_each_client_protocol(name, up, status, body, expected):
    original = _upstream_message(up, status, body)
    for client in (A, C, R):
        if client is up:
            continue
        out_status, out, info = translate_error(status, body, Plan(client, up))
        obj = json.loads(out)
        assert out_status == 400
        assert info.overflow == expected
        if client is A:
            assert obj["type"] == "error"
            assert obj["error"] == {"type": "invalid_request_error", "message": _expected_anthropic(expected, original)}
        else:
            assert obj["error"]["code"] == "context_length_exceeded"
            assert obj["error"]["type"] == "invalid_request_error"
            assert obj["error"]["message"] == original  # the upstream's own words reach an OpenAI client


def test_numbers_missing_come_from_the_estimate_and_declared_window():
    body = _openai("Your input exceeds the context window of this model.", "context_length_exceeded")
    ctx = Context(model_limits=ModelLimits(context_window=32000), estimate=lambda: 41000)
    _s, out, _i = translate_error(400, body, Plan(A, R), ctx=ctx)
    assert json.loads(out)["error"]["message"] == "prompt is too long: 41000 tokens > 32000 maximum"


def test_an_estimate_under_the_window_still_reads_as_an_overflow():
    """The upstream counted more than the local estimate: Claude Code still gets M > N to act on."""
    body = _openai("Your input exceeds the context window of this model.", "context_length_exceeded")
    ctx = Context(model_limits=ModelLimits(context_window=32000), estimate=lambda: 30000)
    _s, out, _i = translate_error(400, body, Plan(A, R), ctx=ctx)
    assert json.loads(out)["error"]["message"] == "prompt is too long: 32001 tokens > 32000 maximum"


@pytest.mark.parametrize(
    "status,body",
    [
        (
            429,
            _openai(
                "Rate limit reached for tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.",
                "rate_limit_exceeded",
            ),
        ),
        (400, _openai("Invalid 'messages[2].content': string too long.", "string_above_max_length")),
        (400, _openai("Unsupported parameter: 'temperature'", "unsupported_parameter")),
        (500, _openai("The server had an error while processing your request.", None, "server_error")),
        (401, _openai("Incorrect API key provided", "invalid_api_key")),
    ],
)
def test_other_errors_are_not_overflows(status, body):
    for client in (A, R):
        _s, out, info = translate_error(status, body, Plan(client, C))
        assert info.overflow is None
        assert b"context_length_exceeded" not in out and b"prompt is too long" not in out


def test_parse_numbers_with_separators():
    assert parse("maximum context length is 128,000 tokens. However, you requested 130,512 tokens") == Overflow(
        130512, 128000
    )
    assert parse("hello") is None


def test_recognise_keeps_an_existing_overflow():
    info = ErrorInfo(ErrorKind.INVALID_REQUEST, "x", 400, overflow=Overflow(5, 4))
    found = recognise(info)
    assert found is not None and found.overflow == Overflow(5, 4) and found.code == "context_length_exceeded"


def test_our_own_overflow_error_body_in_each_protocol():
    from dragoman.errors import ContextOverflowError

    info = ContextOverflowError(50000, 32768, "qwen3").to_error_info()
    a = json.loads(error_body(info, A))
    assert a["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 50000 tokens > 32768 maximum",
    }
    for client in (C, R):
        e = json.loads(error_body(info, client))["error"]
        assert e["code"] == "context_length_exceeded" and e["type"] == "invalid_request_error"
        assert e["message"].startswith("prompt is too long: 50000 tokens > 32768 maximum")


# ---------------------------------------------------------------- streams

_CHAT_START = b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
_ANTH_START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
    b'"model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
)
_RESP_START = (
    b'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1",'
    b'"object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}}\n\n'
)

#: (name, upstream, the stream's bytes, expected Overflow)
STREAMS = [
    (
        "chat-error-chunk",
        C,
        _CHAT_START
        + b'data: {"error":{"message":"This model\'s maximum context length is 102400 tokens. However, you requested '
        b'107837 tokens (107837 in the messages, 0 in the completion).","type":"BadRequestError","code":400}}\n\n',
        Overflow(107837, 102400),
    ),
    (
        "chat-openai-code",
        C,
        _CHAT_START + b'data: {"error":{"message":"context window exceeded","type":"invalid_request_error",'
        b'"code":"context_length_exceeded"}}\n\n',
        Overflow(None, None),
    ),
    (
        "anthropic-error-event",
        A,
        _ANTH_START + b'event: error\ndata: {"type":"error","error":{"type":"invalid_request_error",'
        b'"message":"prompt is too long: 215000 tokens > 200000 maximum"}}\n\n',
        Overflow(215000, 200000),
    ),
    (
        "responses-failed",
        R,
        _RESP_START
        + b'event: response.failed\ndata: {"type":"response.failed","sequence_number":1,"response":{"id":"resp_1",'
        b'"object":"response","created_at":1,"status":"failed","model":"m","output":[],"error":{"code":'
        b'"context_length_exceeded","message":"Your input exceeds the context window of this model."}}}\n\n',
        Overflow(None, None),
    ),
]


def _events(out: bytes) -> list[tuple[str | None, dict]]:
    evs = []
    for block in out.decode().split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: ") and line[6:] != "[DONE]":
                data = json.loads(line[6:])
        if data is not None:
            evs.append((name, data))
    return evs


def _check_client_stream(client: Protocol, out: bytes, expected: Overflow) -> None:
    evs = _events(out)
    if client is A:
        errors = [d for n, d in evs if n == "error"]
        assert len(errors) == 1
        assert errors[0]["error"]["type"] == "invalid_request_error"
        msg = errors[0]["error"]["message"]
        assert msg.startswith("prompt is too long")
        if expected.tokens is not None:
            assert msg == f"prompt is too long: {expected.tokens} tokens > {expected.limit} maximum"
    elif client is C:
        errors = [d["error"] for _n, d in evs if "error" in d]
        assert len(errors) == 1 and errors[0]["code"] == "context_length_exceeded"
    else:
        failed = [d for n, d in evs if n == "response.failed"]
        assert len(failed) == 1 and failed[0]["response"]["error"]["code"] == "context_length_exceeded"
        errs = [d for n, d in evs if n == "error"]
        assert len(errs) == 1 and errs[0]["code"] == "context_length_exceeded"


@pytest.mark.parametrize("name,up,data,expected", STREAMS, ids=[s[0] for s in STREAMS])
def test_in_stream_overflow_in_each_client_protocol_every_chunking(name, up, data, expected):
    for client in (A, C, R):
        if client is up:
            continue
        for _label, pieces in chunkings(data, seeds=3):
            ctx = Context()
            t = StreamTranslator(get_codec(up).stream_decoder(ctx), get_codec(client).stream_encoder(ctx))
            out = run_stream(t, pieces)
            _check_client_stream(client, out, expected)
            assert t.error_info is not None and t.error_info.overflow == expected


def test_the_estimate_is_computed_only_for_an_overflow_that_lacks_numbers():
    def boom() -> int:
        raise AssertionError("estimated for an error that is not an overflow")

    ctx = Context(model_limits=ModelLimits(context_window=1000), estimate=boom)
    _s, _out, info = translate_error(429, _openai("slow down", "rate_limit_exceeded"), Plan(A, C), ctx=ctx)
    assert info.overflow is None
    body = _openai("This model's maximum context length is 1000 tokens. However, you requested 1200 tokens")
    _s, out, info = translate_error(400, body, Plan(A, C), ctx=ctx)  # numbers given: no estimate needed
    assert json.loads(out)["error"]["message"] == "prompt is too long: 1200 tokens > 1000 maximum"


def test_a_failing_estimate_still_answers_the_overflow():
    def boom() -> int:
        raise ValueError("cannot estimate")

    ctx = Context(estimate=boom)
    _s, out, _i = translate_error(
        400, _openai("context window exceeded", "context_length_exceeded"), Plan(A, C), ctx=ctx
    )
    assert json.loads(out)["error"]["message"] == "prompt is too long: context window exceeded"
