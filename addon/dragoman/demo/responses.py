"""OpenAI Responses replies: a whole ``response`` or its typed SSE stream (``sequence_number`` on every event).

Output items, in order: a ``reasoning`` item (summary + ``encrypted_content``), a ``message``, then the calls;
every item streams on its own (added, deltas, done), never two open at once, as the real API does (the Chat fake
interleaves parallel calls' argument deltas, as Chat upstreams do).
"""

from __future__ import annotations

import itertools
from typing import Any

from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.chat import error_body
from dragoman.demo.wire import MIDSTREAM_ERROR_MESSAGE
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from dragoman.demo.wire import mark_fault
from dragoman.demo.wire import sse


def rate_limited(message: str) -> Reply:
    return Reply(429, {"retry-after": "7"}, error_body("requests", message, "rate_limit_exceeded"))


def render(answer: Answer, request: Request) -> Reply:
    if not request.stream:
        return Reply(json_body=_final(answer, request.model))
    return _Stream(answer, request.model).run()


# -- whole objects ------------------------------------------------------------------------------------------


def _response(answer: Answer, model: str, status: str, output: list[dict[str, Any]], usage: bool) -> dict[str, Any]:
    return {
        "id": answer.ids.response,
        "object": "response",
        "created_at": answer.ids.created,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": _usage(answer) if usage else None,
    }


def _final(answer: Answer, model: str) -> dict[str, Any]:
    obj = _response(answer, model, "incomplete" if answer.length else "completed", _items(answer), True)
    if answer.length:
        obj["incomplete_details"] = {"reason": "max_output_tokens"}
    return obj


def _usage(answer: Answer) -> dict[str, Any]:
    return {
        "input_tokens": answer.usage_in,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": answer.usage_out,
        "output_tokens_details": {"reasoning_tokens": answer.reasoning_tokens},
        "total_tokens": answer.usage_in + answer.usage_out,
    }


def _reasoning_item(answer: Answer) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": "".join(answer.summary_pieces)}]
    return {"id": answer.ids.reasoning, "type": "reasoning", "summary": summary, "encrypted_content": answer.encrypted}


def _message_item(answer: Answer) -> dict[str, Any]:
    part = {"type": "output_text", "text": "".join(answer.text), "annotations": [], "logprobs": []}
    return {"id": answer.ids.message, "type": "message", "status": "completed", "role": "assistant", "content": [part]}


def _call_item(call: Call) -> dict[str, Any]:
    kind, payload = ("custom_tool_call", "input") if call.custom else ("function_call", "arguments")
    return {
        "id": call.item_id,
        "type": kind,
        "status": "completed",
        "call_id": call.call_id,
        "name": call.name,
        payload: call.arguments,
    }


def _items(answer: Answer) -> list[dict[str, Any]]:
    items = [_reasoning_item(answer)] if answer.thinking else []
    if answer.text:
        items.append(_message_item(answer))
    return items + [_call_item(c) for c in answer.calls]


# -- streaming ----------------------------------------------------------------------------------------------


class _Stream:
    """The events of one streamed answer; ``emit`` numbers them."""

    def __init__(self, answer: Answer, model: str) -> None:
        self.answer = answer
        self.model = model
        self.reply = Reply()
        self.seq = 0
        self.index = 0  # the next output_index

    def emit(self, kind: str, **fields: Any) -> None:
        obj = {"type": kind, **fields, "sequence_number": self.seq}
        self.seq += 1
        self.reply.events.append(sse(obj, kind))

    def run(self) -> Reply:
        answer = self.answer
        for kind in ("response.created", "response.in_progress"):
            self.emit(kind, response=_response(answer, self.model, "in_progress", [], False))
        if answer.thinking:
            self.reasoning(_reasoning_item(answer))
        if answer.text and not self.message(_message_item(answer)):
            return self.reply  # the in-stream error ended it
        for custom, group in itertools.groupby(answer.calls, key=lambda c: c.custom):
            if custom:
                for call in group:
                    self.custom_call(call)
            else:
                self.function_calls(list(group))
        terminal = "response.incomplete" if answer.length else "response.completed"
        self.emit(terminal, response=_final(answer, self.model))
        return self.reply

    def reasoning(self, item: dict[str, Any]) -> None:
        oi, iid, text = self.index, item["id"], item["summary"][0]["text"]
        self.emit("response.output_item.added", output_index=oi, item={"id": iid, "type": "reasoning", "summary": []})
        where = {"item_id": iid, "output_index": oi, "summary_index": 0}
        self.emit("response.reasoning_summary_part.added", **where, part={"type": "summary_text", "text": ""})
        for piece in self.answer.summary_pieces:
            self.emit("response.reasoning_summary_text.delta", **where, delta=piece)
        self.emit("response.reasoning_summary_text.done", **where, text=text)
        self.emit("response.reasoning_summary_part.done", **where, part={"type": "summary_text", "text": text})
        self.item_done(item)

    def message(self, item: dict[str, Any]) -> bool:
        """The message item; False: it broke off with the in-stream error."""
        oi, part = self.index, item["content"][0]
        self.emit("response.output_item.added", output_index=oi, item={**item, "status": "in_progress", "content": []})
        where = {"item_id": item["id"], "output_index": oi, "content_index": 0}
        self.emit("response.content_part.added", **where, part={"type": "output_text", "text": "", "annotations": []})
        for n, piece in enumerate(self.answer.text):
            self.emit("response.output_text.delta", **where, delta=piece, logprobs=[])
            if mark_fault(self.reply, self.answer.fault, n):
                self.emit("error", code="server_error", message=MIDSTREAM_ERROR_MESSAGE, param=None)
                return False
        self.emit("response.output_text.done", **where, text=part["text"], logprobs=[])
        self.emit("response.content_part.done", **where, part=part)
        self.item_done(item)
        return True

    def custom_call(self, call: Call) -> None:
        item, oi = _call_item(call), self.index
        self.emit("response.output_item.added", output_index=oi, item={**item, "status": "in_progress", "input": ""})
        for piece in call.fragments:
            self.emit("response.custom_tool_call_input.delta", item_id=item["id"], output_index=oi, delta=piece)
        self.emit("response.custom_tool_call_input.done", item_id=item["id"], output_index=oi, input=item["input"])
        self.item_done(item)

    def function_calls(self, calls: list[Call]) -> None:
        """Parallel function calls, one item after the other as the real API streams them (added, its
        argument deltas, done); never two items open at once."""
        for call in calls:
            item, oi = _call_item(call), self.index
            self.emit(
                "response.output_item.added", output_index=oi, item={**item, "status": "in_progress", "arguments": ""}
            )
            for fragment in call.fragments:
                self.emit("response.function_call_arguments.delta", item_id=item["id"], output_index=oi, delta=fragment)
            self.emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=oi,
                arguments=item["arguments"],
            )
            self.item_done(item)

    def item_done(self, item: dict[str, Any]) -> None:
        self.emit("response.output_item.done", output_index=self.index, item=item)
        self.index += 1
