"""The Chat validator accepts every real recording and rejects broken streams."""

from __future__ import annotations

import json

import pytest

from corpus_loader import samples
from validators import chat as C

COMMENTS = "SSE ': OPENROUTER PROCESSING' comment keep-alives"
USAGE_ON_CHOICE = "usage sent on the finish chunk (with choices), not in a separate choices: [] chunk"
N3 = "n=3: three choices (index 0, 1, 2)"
KNOWN_DEVIATIONS = {
    "chat/openai-python__stream-n3-choices.sse": N3 + ", their chunks interleaved",
    "chat/pydantic-ai__stream-deepseek-reasoning-content.yaml#0": USAGE_ON_CHOICE,
    "chat/pydantic-ai__stream-groq-midstream-error-event.yaml#0": "Groq's in-band error is an 'event: error' frame",
    "chat/pydantic-ai__stream-groq-midstream-error-event.yaml#1": USAGE_ON_CHOICE,
    "chat/pydantic-ai__stream-groq-midstream-error-event.yaml#2": USAGE_ON_CHOICE,
    "chat/pydantic-ai__stream-openrouter-cached-tokens.yaml#0": COMMENTS,
    "chat/pydantic-ai__stream-openrouter-midstream-error.yaml#0": COMMENTS
    + "; finish_reason twice; error chunk then [DONE]",
    "chat/pydantic-ai__stream-openrouter-reasoning.yaml#0": COMMENTS,
    "chat/pydantic-ai__stream-openrouter-url-citations.yaml#0": COMMENTS,
    "chat/vercel-ai__stream-anthropic-compat-tool-index1.sse": "no final blank line; tool_calls index starts at 1",
    "chat/vercel-ai__stream-deepseek-reasoning-tool.chunks.txt": USAGE_ON_CHOICE,
    "chat/vercel-ai__stream-mistral-content-array-thinking.chunks.txt": "delta.content is an array of typed parts",
}
KNOWN_BODY_DEVIATIONS = {
    "chat/openai-python__json-n3-choices.json": N3,
    "chat/pydantic-ai__json-openrouter-error-429.yaml#0": "OpenRouter error has no type/param",
    "chat/pydantic-ai__json-openrouter-error-429.yaml#1": "OpenRouter error has no type/param",
    "chat/pydantic-ai__json-openrouter-error-429.yaml#2": "OpenRouter error has no type/param",
    "chat/pydantic-ai__json-openrouter-url-citations.yaml#0": "OpenRouter url_citation spans 0..0 (no span)",
}

STREAMS = samples("openai-chat", stream=True)
BODIES = samples("openai-chat", stream=False)


@pytest.mark.parametrize("sample", STREAMS, ids=[s.name for s in STREAMS])
def test_real_streams(sample):
    s = C.validate_stream(sample.body, strict=False)
    assert s.stop_reason in C.FINISH_REASONS or s.error is not None
    if sample.name in KNOWN_DEVIATIONS:
        with pytest.raises(AssertionError):
            C.validate_stream(sample.body)
    else:
        assert C.validate_stream(sample.body) == s


@pytest.mark.parametrize("sample", BODIES, ids=[s.name for s in BODIES])
def test_real_bodies(sample):
    if sample.ok:
        s = C.validate_completion(sample.body, strict=False)
        assert s.stop_reason in C.FINISH_REASONS
        if sample.name in KNOWN_BODY_DEVIATIONS:
            with pytest.raises(AssertionError):
                C.validate_completion(sample.body)
        else:
            assert C.validate_completion(sample.body) == s
        return
    assert C.validate_error_body(sample.body, strict=False)["message"]
    if sample.name in KNOWN_BODY_DEVIATIONS:
        with pytest.raises(AssertionError):
            C.validate_error_body(sample.body)
    else:
        C.validate_error_body(sample.body)


def test_real_summaries():
    par = next(s for s in STREAMS if "parallel-tools-agent-loop.yaml#0" in s.name)
    s = C.validate_stream(par.body)
    assert s.stop_reason == "tool_calls" and [t.name for t in s.tool_calls] == ["get_country", "get_product_name"]
    ds = next(s for s in STREAMS if "deepseek-reasoning-content" in s.name)
    s = C.validate_stream(ds.body, strict=False)
    assert s.thinking and s.text and s.usage["completion_tokens"] == 212
    err = next(s for s in STREAMS if "openrouter-midstream-error" in s.name)
    assert C.validate_stream(err.body, strict=False).error["message"] == "Token limit reached"


# --- hand-made streams

BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt"}


def chunk(delta=None, finish=None, **extra):
    return {**BASE, "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **extra}


def tc(index, id=None, name=None, args=None):
    d: dict = {"index": index}
    if id:
        d["id"] = id
        d["type"] = "function"
    fn = {}
    if name:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    d["function"] = fn
    return d


USAGE = {**BASE, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}


def good() -> list:
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "think"}),
        chunk({"content": "Hi"}),
        chunk({"tool_calls": [tc(0, "call_a", "f", "")]}),
        chunk({"tool_calls": [tc(1, "call_b", "g", '{"b"')]}),
        chunk({"tool_calls": [tc(0, args='{"a": 1}')]}),
        chunk({"tool_calls": [tc(1, args=": 2}")]}),
        chunk({}, "tool_calls"),
        USAGE,
        "[DONE]",
    ]


def render(chunks) -> bytes:
    return "".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks).encode()


def test_good_stream():
    s = C.validate_stream(render(good()))
    assert (s.id, s.text, s.thinking, s.stop_reason) == ("chatcmpl-1", "Hi", "think", "tool_calls")
    assert [(t.id, t.name, t.parsed()) for t in s.tool_calls] == [("call_a", "f", {"a": 1}), ("call_b", "g", {"b": 2})]
    assert s.output_tokens == 5


def test_error_chunk_ends_stream():
    s = C.validate_stream(
        render(
            [
                chunk({"role": "assistant", "content": "x"}),
                {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}},
            ]
        )
    )
    assert s.error["message"] == "boom"


def _m(i, obj):
    return lambda c: c[:i] + [obj] + c[i + 1 :]


BROKEN = {
    "no-done": (lambda c: c[:-1], r"does not end with data: \[DONE\]"),
    "after-done": (lambda c: c + [chunk({"content": "x"})], r"after \[DONE\]"),
    "no-role": (_m(0, chunk({"content": ""})), "delta.role must be 'assistant'"),
    "wrong-object": (_m(2, {**chunk({"content": "Hi"}), "object": "chat.completion"}), "object must be"),
    "id-changes": (_m(2, {**chunk({"content": "Hi"}), "id": "other"}), "id changed"),
    "no-created": (
        _m(2, {k: v for k, v in chunk({"content": "Hi"}).items() if k != "created"}),
        "created must be an int",
    ),
    "no-model": (_m(2, {k: v for k, v in chunk({"content": "Hi"}).items() if k != "model"}), "model must be a string"),
    "new-tool-without-id": (_m(3, chunk({"tool_calls": [tc(0, name="f", args="")]})), "must carry an id"),
    "new-tool-without-name": (_m(3, chunk({"tool_calls": [tc(0, "call_a", None, "")]})), "must carry function.name"),
    "tool-index-gap": (_m(4, chunk({"tool_calls": [tc(2, "call_b", "g", '{"b"')]})), "expected 1"),
    "tool-id-changes": (_m(5, chunk({"tool_calls": [{**tc(0, args='{"a": 1}'), "id": "call_z"}]})), "id changed"),
    "tool-bad-json": (_m(6, chunk({"tool_calls": [tc(1, args=": }")]})), "not valid JSON"),
    "no-finish": (lambda c: c[:7] + c[8:], "usage chunk before the finish_reason"),
    "two-finish": (lambda c: c[:8] + [chunk({}, "stop")] + c[8:], "after the finish_reason chunk"),
    "bad-finish": (_m(7, chunk({}, "done")), "finish_reason 'done'"),
    "content-after-finish": (lambda c: c[:8] + [chunk({"content": "late"})] + c[8:], "after the finish_reason chunk"),
    "usage-with-choices": (_m(8, {**chunk({}), "usage": USAGE["usage"]}), "usage must come in its own chunk"),
    "empty-choices-without-usage": (_m(8, {**BASE, "choices": []}), "must carry usage"),
    "usage-missing-field": (_m(8, {**USAGE, "usage": {"prompt_tokens": 1}}), "completion_tokens must be an int"),
    "two-choices": (_m(2, {**BASE, "choices": [chunk({"content": "a"})["choices"][0]] * 2}), "exactly one choice"),
    "content-not-string": (_m(2, chunk({"content": ["x"]})), "content must be a string"),
    "after-error": (
        lambda c: c[:3] + [{"error": {"message": "x", "type": "t", "param": None, "code": None}}] + c[3:],
        "after an error chunk",
    ),
    "tool-calls-finish-without-tools": (lambda c: [c[0], c[2], c[7], c[8], c[9]], "without any tool call"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_streams_rejected(name):
    mutate, msg = BROKEN[name]
    with pytest.raises(AssertionError, match=msg):
        C.validate_stream(render(mutate(good())))


def test_framing():
    good_bytes = render(good())
    with pytest.raises(AssertionError, match="no event: lines"):
        C.validate_stream(b"event: chunk\n" + good_bytes)
    with pytest.raises(AssertionError, match="comment line"):
        C.validate_stream(b": OPENROUTER PROCESSING\n\n" + good_bytes)
    assert C.validate_stream(b": keepalive\n\n" + good_bytes).text == "Hi"  # our keepalive, between events
    with pytest.raises(AssertionError, match="comment line"):
        C.validate_stream(b"data: {}\n: keepalive\n\n" + good_bytes)  # not inside an event
    assert C.validate_stream(b": keepalive\n\n" + good_bytes, strict=False).text == "Hi"


def test_completion_body():
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }
    s = C.validate_completion(body)
    assert s.tool_calls[0].name == "f" and s.text == ""
    msg = body["choices"][0]["message"]
    for mutate, err in [
        (lambda b: {**b, "object": "chat.completion.chunk"}, "object must be"),
        (lambda b: {**b, "choices": []}, "exactly one choice"),
        (lambda b: {**b, "choices": [{**b["choices"][0], "finish_reason": None}]}, "finish_reason"),
        (
            lambda b: {
                **b,
                "choices": [
                    {
                        **b["choices"][0],
                        "message": {
                            **msg,
                            "tool_calls": [
                                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{"}}
                            ],
                        },
                    }
                ],
            },
            "not valid JSON",
        ),
        (
            lambda b: {**b, "choices": [{**b["choices"][0], "message": {"role": "assistant", "content": None}}]},
            "without tool_calls",
        ),
        (lambda b: {**b, "usage": None}, "usage must be an object"),
        (
            lambda b: {**b, "choices": [{**b["choices"][0], "message": {"role": "assistant"}}]},
            "content must be present",
        ),
    ]:
        with pytest.raises(AssertionError, match=err):
            C.validate_completion(mutate(body))


def test_error_body():
    assert C.validate_error_body(b'{"error":{"message":"m","type":"t","param":null,"code":null}}')["message"] == "m"
    with pytest.raises(AssertionError, match="error.message"):
        C.validate_error_body(b'{"error":{"type":"t"}}')
    with pytest.raises(AssertionError, match="error.code must be present"):
        C.validate_error_body(b'{"error":{"message":"m","type":"t","param":null}}')


def test_several_choices_summarize_choice_0_and_strict_rejects_them():
    n3 = next(s for s in STREAMS if "n3-choices" in s.name)
    s = C.validate_stream(n3.body, strict=False)
    assert s.text == '{"city":"San Francisco","temperature":65,"units":"f"}'  # choice 0's deltas only
    assert s.stop_reason == "stop"
    with pytest.raises(AssertionError, match="choice index must be 0|exactly one choice"):
        C.validate_stream(n3.body)


def _with_details(*details: list) -> list:
    """``good()`` with its reasoning in two pieces, each chunk carrying the given reasoning_details."""
    c = good()
    pieces = [chunk({"reasoning_content": t}) for t in ("thi", "nk")]
    for p, d in zip(pieces, details, strict=True):
        p["choices"][0]["delta"]["reasoning_details"] = d
    return c[:1] + pieces + c[2:]


def _text(t: str, i: int = 0, **kw) -> dict:
    return {"type": "reasoning.text", "text": t, "index": i, **kw}


def test_reasoning_details_summarized():
    enc = {"type": "reasoning.encrypted", "data": "d", "format": "f", "index": 1}
    s = C.validate_stream(render(_with_details([_text("thi", format="f")], [_text("nk", signature="sig"), enc])))
    assert (s.thinking, s.signatures, s.redacted) == ("think", ["sig"], 1)
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}],
        "usage": USAGE["usage"],
    }
    body["choices"][0]["message"] |= {
        "reasoning_content": "think",
        "reasoning_details": [_text("think", signature="s")],
    }
    assert C.validate_completion(body).signatures == ["s"]


@pytest.mark.parametrize(
    ("details", "msg"),
    [
        (([_text("thi", format="f")], [_text("nk", format="f")]), "repeats 'format'"),
        (([_text("thi")], [_text("nk", 2)]), "new reasoning_details index 2, expected 1"),
        (([_text("thi")], [_text("n")]), "differs from the reasoning text"),
        (([_text("thi")], [{"type": "reasoning.text", "text": "nk"}]), "needs an int index"),
        (([{"type": "reasoning.other", "index": 0}], [_text("nk", 1)]), "unknown"),
    ],
)
def test_broken_reasoning_details_rejected(details, msg):
    with pytest.raises(AssertionError, match=msg):
        C.validate_stream(render(_with_details(*details)))
