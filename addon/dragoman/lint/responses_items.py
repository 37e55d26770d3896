"""The item level of the OpenAI Responses grammar (``lint.responses``): the events inside one output item
(content and summary parts, text, refusals, arguments, reasoning), an item as done, and what an item must
carry wherever it is collected (a stream's terminal response or a whole response object)."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any

from dragoman.lint import Summary
from dragoman.lint import ToolCall
from dragoman.lint import is_int
from dragoman.lint import need

HOSTED_PREFIXES = (
    "response.web_search_call.",
    "response.file_search_call.",
    "response.code_interpreter_call.",
    "response.code_interpreter_call_code.",
    "response.mcp_call.",
    "response.mcp_call_arguments.",
    "response.mcp_list_tools.",
    "response.image_generation_call.",
)
ITEM_EVENTS = {
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.output_text.annotation.added",
    "response.refusal.delta",
    "response.refusal.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
}


@dataclass
class Part:
    type: str
    done: bool = False
    text_done: bool = False
    #: the deltas so far (joined when compared: a long part is not copied at every delta)
    chunks: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        if len(self.chunks) > 1:
            self.chunks[:] = ["".join(self.chunks)]
        return self.chunks[0] if self.chunks else ""

    def add(self, delta: str) -> None:
        self.chunks.append(delta)


@dataclass
class Item:
    id: str
    output_index: int
    type: str
    added: dict[str, Any]
    parts: list[Part] = field(default_factory=list)  # message content / reasoning content
    summary: list[Part] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    args_done: str | None = None
    done: dict[str, Any] | None = None


def essence(item: dict[str, Any]) -> dict[str, Any]:
    """What must agree between an item as done and the same item in the terminal response.
    (The API re-encrypts ``encrypted_content`` for the terminal object, so it is not compared.)"""
    t = item.get("type")
    out: dict[str, Any] = {"id": item.get("id"), "type": t}
    if t == "message":
        out["content"] = [(c.get("type"), c.get("text"), c.get("refusal")) for c in item.get("content") or []]
    elif t == "function_call":
        out.update({k: item.get(k) for k in ("call_id", "name", "arguments")})
    elif t == "custom_tool_call":
        out.update({k: item.get(k) for k in ("call_id", "name", "input")})
    elif t == "reasoning":
        out["summary"] = [c.get("text") for c in item.get("summary") or []]
        out["content"] = [c.get("text") for c in item.get("content") or []]
    return out


def collect_item(s: Summary, item: dict[str, Any], where: str, strict: bool) -> None:
    t = item.get("type")
    if t == "message":
        need(item.get("role") == "assistant", f"{where}: message item role must be 'assistant'")
        need(isinstance(item.get("content"), list), f"{where}: message item content must be a list")
        for p in item["content"]:
            if p.get("type") == "output_text":
                need(isinstance(p.get("text"), str), f"{where}: output_text.text must be a string")
                s.text += p["text"]
            elif p.get("type") == "refusal":
                need(isinstance(p.get("refusal"), str), f"{where}: refusal.refusal must be a string")
                s.refusal += p["refusal"]
            else:
                raise AssertionError(f"{where}: unknown message content part {p.get('type')!r}")
    elif t == "function_call":
        for k in ("call_id", "name", "arguments"):
            need(isinstance(item.get(k), str), f"{where}: function_call.{k} must be a string")
        need(bool(item["call_id"]) and bool(item["name"]), f"{where}: function_call call_id/name must be non-empty")
        s.tool_calls.append(ToolCall(item["call_id"], item["name"], item["arguments"]))
    elif t == "custom_tool_call":
        for k in ("call_id", "name", "input"):
            need(isinstance(item.get(k), str), f"{where}: custom_tool_call.{k} must be a string")
        s.tool_calls.append(ToolCall(item["call_id"], item["name"], item["input"], "custom"))
    elif t == "reasoning":
        need(isinstance(item.get("summary"), list), f"{where}: reasoning.summary must be a list")
        # summary parts are separate paragraphs to a reader: joined with a blank line
        texts = [
            "\n\n".join(p.get("text", "") for p in item["summary"]),
            "".join(p.get("text", "") for p in item.get("content") or []),
        ]
        s.thinking += "\n\n".join(t for t in texts if t)
        enc = item.get("encrypted_content")
        if enc:
            s.signatures.append(enc)
        elif not "".join(texts):
            s.redacted += 1
    else:
        s.server_tools.append(str(t))


def part_at(parts: list[Part], idx: Any, where: str, what: str) -> Part:
    need(is_int(idx) and 0 <= idx < len(parts), f"{where}: {what} {idx!r} was never added")
    return parts[idx]


def item_event(s: Summary, it: Item, t: str, obj: dict[str, Any], where: str, strict: bool) -> Any:
    """Check one event inside an item. -> for a delta, what takes the next delta's string (``replay``)."""
    if t == "response.content_part.added":
        need(it.type in ("message", "reasoning"), f"{where}: content part on a {it.type} item")
        need(
            obj.get("content_index") == len(it.parts),
            f"{where}: content_index {obj.get('content_index')!r}, expected {len(it.parts)}",
        )
        p = obj.get("part")
        need(isinstance(p, dict) and isinstance(p.get("type"), str), f"{where}: part must be an object with a type")
        if strict:
            need(p.get("text", p.get("refusal")) == "", f"{where}: a content part must start empty")
        it.parts.append(Part(p["type"]))
    elif t == "response.content_part.done":
        part = part_at(it.parts, obj.get("content_index"), where, "content part")
        need(not part.done, f"{where}: content part done twice")
        p = obj.get("part") or {}
        got = p.get("refusal") if part.type == "refusal" else p.get("text")
        need(got == part.text, f"{where}: content_part.done text differs from the concatenated deltas")
        if strict and part.type in ("output_text", "refusal"):
            need(part.text_done, f"{where}: content_part.done before {part.type}.done")
        part.done = True
    elif t in ("response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta"):
        part = part_at(it.parts, obj.get("content_index"), where, "content part")
        need(not part.done and not part.text_done, f"{where}: delta for a finished content part")
        need(isinstance(obj.get("delta"), str), f"{where}: delta must be a string")
        part.add(obj["delta"])
        return part.chunks.extend
    elif t in ("response.output_text.done", "response.refusal.done", "response.reasoning_text.done"):
        part = part_at(it.parts, obj.get("content_index"), where, "content part")
        key = "refusal" if t == "response.refusal.done" else "text"
        need(obj.get(key) == part.text, f"{where}: {key} differs from the concatenated deltas")
        need(not part.text_done, f"{where}: done twice")
        part.text_done = True
    elif t == "response.output_text.annotation.added":
        need(isinstance(obj.get("annotation"), dict), f"{where}: annotation must be an object")
    elif t == "response.function_call_arguments.delta":
        need(it.type == "function_call", f"{where}: arguments delta on a {it.type} item")
        need(it.args_done is None, f"{where}: arguments delta after arguments done")
        need(isinstance(obj.get("delta"), str), f"{where}: delta must be a string")
        it.args.append(obj["delta"])
        return it.args.extend
    elif t == "response.function_call_arguments.done":
        need(it.type == "function_call", f"{where}: arguments done on a {it.type} item")
        need(it.args_done is None, f"{where}: arguments done twice")
        need(obj.get("arguments") == "".join(it.args), f"{where}: arguments differ from the concatenated deltas")
        it.args_done = obj["arguments"]
    elif t == "response.custom_tool_call_input.delta":
        need(it.type == "custom_tool_call", f"{where}: input delta on a {it.type} item")
        need(it.args_done is None, f"{where}: input delta after input done")
        need(isinstance(obj.get("delta"), str), f"{where}: delta must be a string")
        it.args.append(obj["delta"])
        return it.args.extend
    elif t == "response.custom_tool_call_input.done":
        need(it.type == "custom_tool_call", f"{where}: input done on a {it.type} item")
        need(obj.get("input") == "".join(it.args), f"{where}: input differs from the concatenated deltas")
        it.args_done = obj["input"]
    elif t == "response.reasoning_summary_part.added":
        need(it.type == "reasoning", f"{where}: summary part on a {it.type} item")
        need(
            obj.get("summary_index") == len(it.summary),
            f"{where}: summary_index {obj.get('summary_index')!r}, expected {len(it.summary)}",
        )
        need(all(p.done for p in it.summary), f"{where}: summary part added while another is open")
        it.summary.append(Part("summary_text"))
    elif t == "response.reasoning_summary_text.delta":
        part = part_at(it.summary, obj.get("summary_index"), where, "summary part")
        need(not part.done and not part.text_done, f"{where}: delta for a finished summary part")
        need(isinstance(obj.get("delta"), str), f"{where}: delta must be a string")
        part.add(obj["delta"])
        return part.chunks.extend
    elif t == "response.reasoning_summary_text.done":
        part = part_at(it.summary, obj.get("summary_index"), where, "summary part")
        need(obj.get("text") == part.text, f"{where}: summary text differs from the concatenated deltas")
        part.text_done = True
    elif t == "response.reasoning_summary_part.done":
        part = part_at(it.summary, obj.get("summary_index"), where, "summary part")
        need(not part.done, f"{where}: summary part done twice")
        need((obj.get("part") or {}).get("text") == part.text, f"{where}: summary part text differs from the deltas")
        if strict:
            need(part.text_done, f"{where}: summary part done before reasoning_summary_text.done")
        part.done = True
    return None


def check_item_done(it: Item, item: dict[str, Any], where: str, strict: bool) -> None:
    for p in it.parts:
        need(p.done or (not strict and it.type == "reasoning"), f"{where}: item {it.id} done with an open content part")
    for p in it.summary:
        need(p.done, f"{where}: item {it.id} done with an open summary part")
    if it.type == "message":
        content = item.get("content")
        need(
            isinstance(content, list) and len(content) == len(it.parts),
            f"{where}: message content has {len(content or [])} parts, {len(it.parts)} were streamed",
        )
        for i, (p, c) in enumerate(zip(it.parts, content)):
            need(c.get("type") == p.type, f"{where}: content[{i}] type {c.get('type')!r} != streamed {p.type!r}")
            got = c.get("refusal") if p.type == "refusal" else c.get("text")
            need(got == p.text, f"{where}: content[{i}] text differs from the streamed deltas")
    elif it.type in ("function_call", "custom_tool_call"):
        key = "arguments" if it.type == "function_call" else "input"
        streamed = "".join(it.args)
        if it.args or it.args_done is not None:
            need(item.get(key) == streamed, f"{where}: {it.type}.{key} differs from the streamed deltas")
        if strict:
            need(it.args_done is not None, f"{where}: {it.type} done without its {key} .done event")
        need(item.get("call_id") == it.added.get("call_id") or not it.added.get("call_id"), f"{where}: call_id changed")
        need(item.get("name") == it.added.get("name") or not it.added.get("name"), f"{where}: name changed")
    elif it.type == "reasoning":
        summ = item.get("summary")
        need(isinstance(summ, list), f"{where}: reasoning.summary must be a list")
        if it.summary:
            need(
                [p.get("text") for p in summ] == [p.text for p in it.summary],
                f"{where}: reasoning summary differs from the streamed deltas",
            )
