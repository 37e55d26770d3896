"""Each profile's provider reply, streamed (over every chunking) and whole, decodes to the thinking and the answer
it carries, with the provider's profile in the context.

Shapes and their sources:
* deepseek: tests/corpus/chat/vercel-ai__stream-deepseek-reasoning-tool.chunks.txt and
  pydantic-ai__json-deepseek-reasoning-content.yaml (real DeepSeek traffic; see tests/corpus/INDEX.tsv);
* openrouter: tests/corpus/chat/pydantic-ai__stream-openrouter-reasoning.yaml (real OpenRouter traffic);
* gemini: thought deltas flagged ``extra_content.google.thought`` with ``<thought>`` tags, as a Gemini log quoted
  in a public client's test shows (see tests/provider_upstream.py);
* glm: GLM-4.6 chunks as captured from Z.ai and quoted in a public proxy's tests (``role`` on every delta,
  ``reasoning_content``, no ``finish_reason`` key until the last chunk);
* kimi: Moonshot's documented stream for kimi-k2-thinking (``reasoning_content`` deltas, then ``content``);
* qwen: Alibaba Cloud Model Studio's documented OpenAI-compatible stream (``reasoning_content``, ``usage: null``
  on every chunk, usage on a last chunk with ``choices: []``);
* ollama: Ollama's OpenAI-compatible stream for gpt-oss (``reasoning`` beside an empty ``content``,
  ``system_fingerprint: "fp_ollama"``);
* vllm: vLLM's reasoning-parser output (``reasoning_content`` deltas; newer versions name it ``reasoning``);
* openai / generic / deepseek-r1: plain text (OpenAI) and R1's ``reasoning_content`` (as DeepSeek).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import corpus_loader
from conftest import chunkings
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.protocols import profiles
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC

from .helpers import decode_stream

THINK = "Let me think."
ANSWER = "Hello there."


def _halves(s: str) -> tuple[str, str]:
    return s[: len(s) // 2], s[len(s) // 2 :]


def glm() -> list[dict[str, Any]]:
    head = {"id": "2026021010253871cb1b6ec9e54d6b", "created": 1770690338, "object": "chat.completion.chunk"}
    head["model"] = "glm-4.6"
    out = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": t}}]}
        for t in _halves(THINK)
    ]
    out += [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": t}}]} for t in _halves(ANSWER)]
    usage = {"prompt_tokens": 8, "completion_tokens": 9, "total_tokens": 17}
    out.append(
        {
            **head,
            "choices": [{"index": 0, "finish_reason": "stop", "delta": {"role": "assistant", "content": ""}}],
            "usage": usage,
        }
    )
    return out


def kimi() -> list[dict[str, Any]]:
    head = {
        "id": "chatcmpl-6905a6c8d5b8",
        "object": "chat.completion.chunk",
        "created": 1761978056,
        "model": "kimi-k2-thinking",
    }
    out = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    out += [
        {**head, "choices": [{"index": 0, "delta": {"reasoning_content": t}, "finish_reason": None}]}
        for t in _halves(THINK)
    ]
    out += [
        {**head, "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]} for t in _halves(ANSWER)
    ]
    usage = {"prompt_tokens": 8, "completion_tokens": 9, "total_tokens": 17, "cached_tokens": 0}
    out.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "usage": usage}]})
    return out


def qwen() -> list[dict[str, Any]]:
    head = {"object": "chat.completion.chunk", "created": 1745485391, "system_fingerprint": None, "model": "qwen-plus"}
    head["id"] = "chatcmpl-e2edaf2c-8aaf-9e4b-90c5-0a6b5e5fb9b2"

    def c(delta: dict[str, Any], fr: str | None = None) -> dict[str, Any]:
        choice = {"delta": delta, "index": 0, "logprobs": None, "finish_reason": fr}
        return {"choices": [choice], "usage": None, **head}

    out = [c({"content": None, "role": "assistant", "reasoning_content": ""})]
    out += [c({"content": None, "reasoning_content": t}) for t in _halves(THINK)]
    out += [c({"content": t, "reasoning_content": None}) for t in _halves(ANSWER)]
    out.append(c({"content": "", "reasoning_content": None}, "stop"))
    out.append({"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": 9, "total_tokens": 17}, **head})
    return out


def ollama() -> list[dict[str, Any]]:
    head = {"id": "chatcmpl-462", "object": "chat.completion.chunk", "created": 1754407540, "model": "gpt-oss:20b"}
    head["system_fingerprint"] = "fp_ollama"
    c = [
        {"index": 0, "delta": {"role": "assistant", "content": "", "reasoning": t}, "finish_reason": None}
        for t in _halves(THINK)
    ]
    c += [{"index": 0, "delta": {"role": "assistant", "content": t}, "finish_reason": None} for t in _halves(ANSWER)]
    c.append({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "stop"})
    return [{**head, "choices": [x]} for x in c]


def vllm() -> list[dict[str, Any]]:
    head = {"id": "chatcmpl-b3f1", "object": "chat.completion.chunk", "created": 1750000000, "model": "Qwen/Qwen3-8B"}
    c = [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]
    c += [
        {"index": 0, "delta": {"reasoning_content": t}, "logprobs": None, "finish_reason": None} for t in _halves(THINK)
    ]
    c += [{"index": 0, "delta": {"content": t}, "logprobs": None, "finish_reason": None} for t in _halves(ANSWER)]
    c.append({"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": "stop", "stop_reason": None})
    return [{**head, "choices": [x]} for x in c]


def gemini() -> list[dict[str, Any]]:
    head = {"id": "gem-1", "object": "chat.completion.chunk", "created": 1764664600, "model": "gemini-3-pro"}
    flag = {"google": {"thought": True}}
    a, b = _halves(THINK)
    deltas = [
        {"content": "<thought>" + a, "extra_content": flag, "role": "assistant"},
        {"content": b, "extra_content": flag, "role": "assistant"},
        {"content": "</thought>" + ANSWER, "role": "assistant"},
    ]
    out = [{**head, "choices": [{"delta": d, "index": 0}]} for d in deltas]
    usage = {"prompt_tokens": 8, "completion_tokens": 9, "total_tokens": 17}
    out.append(
        {**head, "choices": [{"delta": {"role": "assistant"}, "finish_reason": "stop", "index": 0}], "usage": usage}
    )
    return out


def whole_of(chunks: list[dict[str, Any]], thought_tags: bool) -> dict[str, Any]:
    """The non-streamed reply the same provider gives: one message with the whole reasoning and content."""
    first = chunks[0]
    msg: dict[str, Any] = {"role": "assistant", "content": ANSWER}
    if thought_tags:
        msg["content"] = f"<thought>{THINK}</thought>{ANSWER}"
    else:
        field = (
            "reasoning"
            if any("reasoning" in (c["choices"] or [{}])[0].get("delta", {}) for c in chunks)
            else "reasoning_content"
        )
        msg[field] = THINK
    choice = {"index": 0, "message": msg, "finish_reason": "stop"}
    return {
        "id": first["id"],
        "object": "chat.completion",
        "created": first["created"],
        "model": first["model"],
        "choices": [choice],
    }


HAND_WRITTEN = {"glm": glm, "kimi": kimi, "qwen": qwen, "ollama": ollama, "vllm": vllm, "gemini": gemini}


def sse(chunks: list[dict[str, Any]]) -> bytes:
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


def texts(events: list[Any]) -> tuple[str, str]:
    thinking = "".join(e.text for e in events if type(e) is ThinkingDelta)
    return thinking, "".join(e.text for e in events if type(e) is TextDelta)


@pytest.mark.parametrize("name", HAND_WRITTEN)
def test_each_providers_stream_and_whole_reply_decode_to_thinking_and_text(name):
    profile = profiles.get(name)
    chunks = HAND_WRITTEN[name]()
    for label, pieces in chunkings(sse(chunks)):
        assert texts(decode_stream(pieces, Context(profile=profile))) == (THINK, ANSWER), label
    resp = CODEC.decode_response(whole_of(chunks, profile.thought_tags), Context(profile=profile))
    parts = [(type(p), p.text) for p in resp.content]
    assert parts == [(ThinkingPart, THINK), (TextPart, ANSWER)]


@pytest.mark.parametrize(
    "name,sample",
    [
        ("deepseek", "chat/vercel-ai__stream-deepseek-reasoning-tool.chunks.txt"),
        ("deepseek-r1", "chat/pydantic-ai__stream-deepseek-reasoning-content.yaml#0"),
        ("openrouter", "chat/pydantic-ai__stream-openrouter-reasoning.yaml#0"),
        ("openai", "chat/vercel-ai__stream-plain-text-usage.chunks.txt"),
        ("generic", "chat/vercel-ai__stream-xai-reasoning-tool.chunks.txt"),
    ],
)
def test_recorded_streams_decode_the_same_under_their_profile(name, sample):
    """A profile changes requests (and Gemini's thought tags), not how these providers' replies are read."""
    [s] = [s for s in corpus_loader.load_all() if s.name == sample]
    generic = decode_stream([s.body])
    profiled = decode_stream([s.body], Context(profile=profiles.get(name)))
    assert profiled == generic
    thinking, text = texts(profiled)
    signed = any(type(e) is SignatureDelta for e in profiled)  # OpenRouter's o3: encrypted reasoning only
    assert (thinking or signed or name == "openai") and (text or name in ("deepseek", "generic"))
