"""Fake Chat-compatible providers that enforce each provider's documented request rule with a 400, and answer a
two-step tool loop in the provider's recorded shape: a scenario on ``dragoman.demo.FakeUpstream``.

Turn 1 (the last message is the user's): reasoning, then one call of ``get_weather``. Turn 2 (the last message
is a tool result): reasoning, then text. Every request is kept (``requests``) so tests can check what came back.

Rules (400 exactly where the provider documents one):
* ``gemini``: in the current turn (after the last user message), each assistant message's first tool call must
  carry ``extra_content.google.thought_signature`` (ai.google.dev thought-signatures: "Function call is missing
  a thought_signature in functionCall parts"); a signature must be one Gemini issued or the documented
  ``skip_thought_signature_validator``; tool parameters must not contain ``$schema``.
* ``deepseek`` (V4): unless ``thinking.type`` is ``disabled``, every assistant message with tool calls must carry
  ``reasoning_content`` ("The `reasoning_content` in the thinking mode must be passed back to the API.").
* ``deepseek-r1``: no message may carry ``reasoning_content`` (api-docs.deepseek.com reasoning_model: 400).

Shapes:
* DeepSeek: tests/corpus/chat/vercel-ai__stream-deepseek-reasoning-tool.chunks.txt (real DeepSeek traffic,
  vercel/ai, Apache-2.0): first delta ``{"role", "content": null, "reasoning_content": ""}``, reasoning deltas
  ``{"content": null, "reasoning_content"}``, indexed tool_calls, last chunk with finish_reason and usage
  (``prompt_cache_hit_tokens``, ``completion_tokens_details.reasoning_tokens``); non-streamed as
  tests/corpus/chat/pydantic-ai__json-deepseek-reasoning-parallel-tools.yaml.
* Gemini (OpenAI endpoint, ``include_thoughts``): thought deltas ``{"content": "<thought>...", "extra_content":
  {"google": {"thought": true}}, "role": "assistant"}``, then ``{"content": "</thought>", "tool_calls": [{
  "extra_content": {"google": {"thought_signature": ...}}, "function", "id", "type"}]}`` (no ``index``), as a
  Gemini log quoted in a public client's test shows; ``finish_reason: "stop"`` after tool calls and usage on the
  last chunk, as a live-verified Gemini 3 stream quoted in another client's tests shows.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from dragoman.demo import FakeUpstream
from dragoman.demo import Reply
from dragoman.demo import Request
from dragoman.demo.wire import sse

SKIP_SIGNATURE = "skip_thought_signature_validator"
THOUGHT_1 = "The user wants the weather; I will call get_weather for Paris."
THOUGHT_2 = "The tool answered; I can reply now."
ANSWER = "It is sunny in Paris."
CALL_ARGS = '{"city": "Paris"}'
DEEPSEEK_ID = "cca85624-4056-401f-b220-d77601d1f70d"
USAGE = {"prompt_tokens": 339, "completion_tokens": 83, "total_tokens": 422}


def provider_problem(provider: str, body: dict[str, Any], signatures: set[str]) -> str | None:
    """The provider's documented 400 for this Chat request body, or None (``signatures``: the thought signatures
    this provider issued)."""
    messages = body.get("messages") or []
    if provider == "gemini":
        for t in body.get("tools") or ():
            if "$schema" in json.dumps(t.get("function", {}).get("parameters", {})):
                return "Invalid JSON payload received. Unknown name \"$schema\" at 'tools[0].function.parameters'"
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        for m in messages[last_user + 1 :]:
            calls = m.get("tool_calls") if m.get("role") == "assistant" else None
            if not calls:
                continue
            sig = ((calls[0].get("extra_content") or {}).get("google") or {}).get("thought_signature")
            if sig is None:
                return "Function call is missing a thought_signature in functionCall parts."
            if sig != SKIP_SIGNATURE and sig not in signatures:
                return "Corrupted thought signature."
    if provider == "deepseek" and (body.get("thinking") or {}).get("type") != "disabled":
        for m in messages:
            if m.get("role") == "assistant" and m.get("tool_calls") and "reasoning_content" not in m:
                return "The `reasoning_content` in the thinking mode must be passed back to the API."
    if provider == "deepseek-r1" and any("reasoning_content" in m for m in messages):
        return "deepseek-reasoner does not support reasoning_content in the input messages"
    return None


def bad_request(message: str, provider: str) -> Reply:
    if provider == "gemini":
        err = {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}
    else:
        err = {"message": message, "type": "invalid_request_error", "param": None, "code": "invalid_request_error"}
    return Reply(400, json_body={"error": err})


@dataclass
class ProviderUpstream:
    provider: str  # gemini | deepseek | deepseek-r1
    signatures: set[str] = field(default_factory=set)
    reasoning_issued: list[str] = field(default_factory=list)
    _n: itertools.count = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.server = FakeUpstream(answer=self._answer).start()

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self.server.lock:
            return [r.body for r in self.server.requests]

    def stop(self) -> None:
        self.server.stop()

    # -- rules

    def problem(self, body: dict[str, Any]) -> str | None:
        return provider_problem(self.provider, body, self.signatures)

    # -- answers

    def _answer(self, request: Request) -> Reply:
        body = request.body
        problem = self.problem(body)
        if problem is not None:
            return bad_request(problem, self.provider)
        messages = body.get("messages") or []
        tool_turn = bool(messages) and messages[-1].get("role") == "tool"
        n = next(self._n)
        if self.provider == "gemini":
            return self._gemini(request.stream, tool_turn, n)
        return self._deepseek(request.stream, tool_turn, n, body.get("model", "deepseek-v4-pro"))

    def _deepseek(self, stream: bool, tool_turn: bool, n: int, model: str) -> Reply:
        thought = THOUGHT_2 if tool_turn else THOUGHT_1
        self.reasoning_issued.append(thought)
        call = None if tool_turn else {"index": 0, "id": f"call_00_ds{n}", "type": "function"}
        head = {"id": DEEPSEEK_ID, "object": "chat.completion.chunk", "created": 1764664568, "model": model}
        usage = {
            **USAGE,
            "prompt_tokens_details": {"cached_tokens": 320},
            "completion_tokens_details": {"reasoning_tokens": 39},
            "prompt_cache_hit_tokens": 320,
            "prompt_cache_miss_tokens": 19,
        }
        finish = "stop" if tool_turn else "tool_calls"
        if not stream:
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": ANSWER if tool_turn else "",
                "reasoning_content": thought,
            }
            if call is not None:
                del call["index"]
                msg["tool_calls"] = [{**call, "function": {"name": "get_weather", "arguments": CALL_ARGS}}]
            choice = {"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}
            return Reply(json_body={**head, "object": "chat.completion", "choices": [choice], "usage": usage})

        def chunk(delta: dict[str, Any], fr: str | None = None, u: Any = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": fr}
            return sse({**head, "choices": [choice], "usage": u})

        events = [chunk({"role": "assistant", "content": None, "reasoning_content": ""})]
        events += [chunk({"content": None, "reasoning_content": w}) for w in _words(thought)]
        if call is None:
            events += [chunk({"content": w}) for w in _words(ANSWER)]
        else:
            events.append(chunk({"tool_calls": [{**call, "function": {"name": "get_weather", "arguments": ""}}]}))
            events += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in _halves(CALL_ARGS)]
        events.append(chunk({"content": "", "reasoning_content": None}, finish, usage))
        events.append(b"data: [DONE]\n\n")
        return Reply(events=events)

    def _gemini(self, stream: bool, tool_turn: bool, n: int) -> Reply:
        thought = THOUGHT_2 if tool_turn else THOUGHT_1
        sig = f"EiYKJGUyNDgzMGE3LTVjZDYtNDJmZS05OThi{n:04d}=="
        head = {"id": f"gem-{n}", "object": "chat.completion.chunk", "created": 1764664600, "model": "gemini-3-pro"}
        call = None
        if not tool_turn:
            self.signatures.add(sig)
            call = {
                "extra_content": {"google": {"thought_signature": sig}},
                "function": {"arguments": CALL_ARGS, "name": "get_weather"},
                "id": f"gm{n}call",
                "type": "function",
            }
        if not stream:
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": f"<thought>{thought}</thought>" + (ANSWER if tool_turn else ""),
            }
            if call is not None:
                msg["tool_calls"] = [call]
            choice = {"index": 0, "message": msg, "finish_reason": "stop"}
            return Reply(json_body={**head, "object": "chat.completion", "choices": [choice], "usage": USAGE})

        def chunk(delta: dict[str, Any], fr: str | None = None, u: Any = None) -> bytes:
            obj: dict[str, Any] = {
                **head,
                "choices": [{"delta": delta, "index": 0, **({"finish_reason": fr} if fr else {})}],
            }
            if u is not None:
                obj["usage"] = u
            return sse(obj)

        words = _words(thought)
        flag = {"google": {"thought": True}}
        events = [chunk({"content": "<thought>" + words[0], "extra_content": flag, "role": "assistant"})]
        events += [chunk({"content": w, "extra_content": flag, "role": "assistant"}) for w in words[1:]]
        if call is None:
            events.append(chunk({"content": "</thought>" + ANSWER[:6], "role": "assistant"}))
            events.append(chunk({"content": ANSWER[6:], "role": "assistant"}))
        else:
            events.append(chunk({"content": "</thought>", "role": "assistant", "tool_calls": [call]}))
        events.append(chunk({"role": "assistant"}, "stop", USAGE))
        events.append(b"data: [DONE]\n\n")
        return Reply(events=events)


def _words(text: str) -> list[str]:
    parts = text.split(" ")
    return [parts[0]] + [" " + p for p in parts[1:]]


def _halves(s: str) -> list[str]:
    return [s[: len(s) // 2], s[len(s) // 2 :]]
