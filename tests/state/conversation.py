"""A fake model for conversation-state tests: every answer thinks (signed), then calls ``get_weather``
unless the last message is a tool result, then answers in text. Its ids are derived from the history it
was sent, so the same history always gets the same answer (a chain expanded from the store and the same
conversation sent whole are answered alike), and two different histories never share an id."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.answer import Ids
from dragoman.demo.answer import pieces
from dragoman.demo.render import render
from dragoman.demo.wire import ANTHROPIC
from dragoman.demo.wire import CHAT
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request


def history_of(protocol: str, body: dict[str, Any]) -> Any:
    return body.get("input") if protocol not in (ANTHROPIC, CHAT) else body.get("messages")


def last_is_tool_result(protocol: str, body: dict[str, Any]) -> bool:
    hist = history_of(protocol, body) or []
    if not isinstance(hist, list) or not hist:
        return False
    last = hist[-1]
    if protocol == ANTHROPIC:
        content = last.get("content")
        return isinstance(content, list) and any(p.get("type") == "tool_result" for p in content)
    if protocol == CHAT:
        return last.get("role") == "tool"
    return last.get("type") == "function_call_output"


def conversation(request: Request) -> Reply:
    body = request.body
    digest = hashlib.sha256(json.dumps(history_of(request.protocol, body), sort_keys=True).encode()).hexdigest()[:20]
    ids = Ids(
        message=f"msg_{digest}", completion=f"chatcmpl-{digest}", response=f"resp_{digest}", reasoning=f"rs_{digest}"
    )
    thinking = pieces(f"Thinking about turn {digest[:6]}.")
    if last_is_tool_result(request.protocol, body):
        return render(
            request,
            Answer(
                thinking=thinking,
                signature=f"sig-{digest}",
                encrypted=f"enc-{digest}",
                text=pieces(f"It is sunny ({digest[:6]})."),
                ids=ids,
            ),
        )
    call_id = ("toolu_" if request.protocol == ANTHROPIC else "call_") + digest
    call = Call(call_id, "get_weather", pieces(json.dumps({"city": f"Paris-{digest[:4]}"})), item_id=f"fc_{digest}")
    return render(
        request, Answer(thinking=thinking, signature=f"sig-{digest}", encrypted=f"enc-{digest}", calls=(call,), ids=ids)
    )
