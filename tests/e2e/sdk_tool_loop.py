"""A two-turn tool loop with an official SDK, as an agent runs it (run by test_profiles.py on the client
interpreter): turn 1 asks with thinking on and gets a tool call, turn 2 sends the whole history back (the
assistant turn exactly as the SDK assembled it) with the tool result and gets the answer.

Usage: ``python sdk_tool_loop.py '<json>'`` with ``sdk`` (anthropic | openai-responses), ``base_url``, ``model``,
``stream`` (bool) and ``switch`` (bool: skip turn 1 and start from a history another model produced: a tool
round without any reasoning state). Prints one JSON object: ``{"ok": true, "turns": [...]}`` (each turn's
text, thinking, tool calls, stop and usage) or ``{"ok": false, "error": ...}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

QUESTION = "What is the weather in Paris?"
SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",  # as Claude Code's tool schemas carry it
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def anthropic_loop(sc: dict[str, Any]) -> list[dict[str, Any]]:
    import anthropic

    client = anthropic.Anthropic(base_url=sc["base_url"], api_key="test-client-key", max_retries=0)
    kw: dict[str, Any] = {
        "model": sc["model"],
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{"name": "get_weather", "description": "Weather for a city", "input_schema": SCHEMA}],
    }

    def ask(messages: list[dict[str, Any]]) -> Any:
        if sc["stream"]:
            with client.messages.stream(messages=messages, **kw) as s:
                return s.get_final_message()
        return client.messages.create(messages=messages, **kw)

    def turn(msg: Any) -> dict[str, Any]:
        return {
            "stop": msg.stop_reason,
            "text": "".join(b.text for b in msg.content if b.type == "text"),
            "thinking": [b.thinking for b in msg.content if b.type == "thinking"],
            "signed": [bool(b.signature) for b in msg.content if b.type == "thinking"],
            "calls": [{"id": b.id, "name": b.name, "input": b.input} for b in msg.content if b.type == "tool_use"],
            "usage": {"input": msg.usage.input_tokens, "output": msg.usage.output_tokens},
        }

    history: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    turns = []
    if sc["switch"]:
        call_id = "toolu_01ForeignModelCall"
        history.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call_id, "name": "get_weather", "input": {"city": "Paris"}}],
            }
        )
    else:
        first = ask(history)
        turns.append(turn(first))
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]})
        call_id = next(b.id for b in first.content if b.type == "tool_use")
    history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "sunny"}]})
    turns.append(turn(ask(history)))
    return turns


def responses_loop(sc: dict[str, Any]) -> list[dict[str, Any]]:
    import openai

    client = openai.OpenAI(base_url=sc["base_url"], api_key="test-client-key", max_retries=0)
    kw: dict[str, Any] = {
        "model": sc["model"],
        "tools": [{"type": "function", "name": "get_weather", "description": "Weather", "parameters": SCHEMA}],
        "reasoning": {"effort": "medium", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "store": False,
    }

    def ask(items: list[dict[str, Any]]) -> Any:
        if sc["stream"]:
            with client.responses.stream(input=items, **kw) as s:
                return s.get_final_response()
        return client.responses.create(input=items, **kw)

    def turn(resp: Any) -> dict[str, Any]:
        thinking = []
        for item in resp.output:
            if item.type == "reasoning":
                thinking += [s.text for s in item.summary] + [c.text for c in (item.content or [])]
        return {
            "stop": resp.status,
            "text": resp.output_text,
            "thinking": thinking,
            "signed": [bool(i.encrypted_content) for i in resp.output if i.type == "reasoning"],
            "calls": [{"id": i.call_id, "name": i.name} for i in resp.output if i.type == "function_call"],
            "usage": {"input": resp.usage.input_tokens, "output": resp.usage.output_tokens},
        }

    items: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    turns = []
    if sc["switch"]:
        call_id = "call_foreign_model_1"
        items.append(
            {"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": '{"city": "Paris"}'}
        )
    else:
        first = ask(items)
        turns.append(turn(first))
        items += [i.model_dump(exclude_none=True) for i in first.output]
        call_id = next(i.call_id for i in first.output if i.type == "function_call")
    items.append({"type": "function_call_output", "call_id": call_id, "output": "sunny"})
    turns.append(turn(ask(items)))
    return turns


def main() -> None:
    sc = json.loads(sys.argv[1])
    try:
        turns = anthropic_loop(sc) if sc["sdk"] == "anthropic" else responses_loop(sc)
        print(json.dumps({"ok": True, "turns": turns}))
    except Exception as e:  # noqa: BLE001 - the test prints what went wrong
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))


if __name__ == "__main__":
    main()
