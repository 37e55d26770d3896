"""IR -> upstream Responses request: ``input`` items (one message item per run of content parts, one item
per reasoning / tool call / tool result), tools, tool choice, reasoning and options."""

from __future__ import annotations

from typing import Any

from dragoman.ir import carry
from dragoman.ir.common import Dropped
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import Part
from dragoman.ir.request import Reasoning
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import Request
from dragoman.ir.request import ResponseFormat
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.ir.search import SEARCH_NATIVE
from dragoman.ir.search import WebSearchPart
from dragoman.protocols._cache import OPENAI_RETENTIONS
from dragoman.protocols._cache import session_cache_key
from dragoman.protocols._data_url import data_url
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import search
from dragoman.protocols.openai_responses.models import BUILTIN_TOOL_TYPES

_TOOL_CHOICE_MODES = {"auto": "auto", "any": "required", "none": "none"}


def encode_request(req: Request, ctx: Context) -> dict[str, Any]:
    body: dict[str, Any] = {"model": req.model}
    dropped = ctx.dropped
    if req.system:
        body["instructions"] = "\n\n".join(p.text for p in req.system)
    items: list[dict[str, Any]] = []
    for msg in req.messages:
        ctx.dropped.at(msg.source)
        _encode_message(msg, items, ctx)
    ctx.dropped.leave()
    body["input"] = items
    tools = [tool for tool in (_encode_tool(t, dropped) for t in req.tools) if tool is not None]
    if req.web_search is not None:
        tools.append(search.tool_from_spec(req.web_search, ctx))
        ctx.search = SEARCH_NATIVE
    if tools:
        body["tools"] = tools
    tc = req.tool_choice
    if tc is not None and (tools or tc.mode == "none"):
        if tc.mode == "tool" and tc.name and _names_search(req, tc.name):
            # Claude Code's WebSearch sub-request forces its web_search server tool; Responses has no
            # tool_choice naming the hosted web_search (a function choice would be a 400), "required" forces it
            body["tool_choice"] = "required"
            if len(tools) > 1:
                dropped.add("tool_choice.web_search")
        elif tc.mode == "tool" and tc.name:
            kind = "custom" if tc.name in req.custom_tool_names() else "function"
            body["tool_choice"] = {"type": kind, "name": tc.name}
        else:
            body["tool_choice"] = _TOOL_CHOICE_MODES.get(tc.mode, "auto")
    if req.parallel_tool_calls is not None and tools:
        body["parallel_tool_calls"] = req.parallel_tool_calls
    r = req.reasoning
    if r is not None and _wants_reasoning(r):
        body["reasoning"] = _encode_reasoning(r)
        body["include"] = ["reasoning.encrypted_content"]
    if req.web_search is not None:  # the sources of each search (otherwise only the query comes back)
        body["include"] = [*body.get("include", []), search.SOURCES_INCLUDE]
    body["store"] = False
    _encode_options(req, body, dropped)
    if req.stream:
        body["stream"] = True
    return body


def _names_search(req: Request, name: str) -> bool:
    """A forced tool choice that names the hosted web search (no client tool of that name)."""
    return req.web_search is not None and all(t.name != name for t in req.tools)


def _encode_options(req: Request, body: dict[str, Any], dropped: Dropped) -> None:
    if req.max_tokens is not None:
        body["max_output_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.top_k is not None:
        dropped.add("top_k")
    if req.stop:
        dropped.add("stop_sequences")
    if req.user:
        body["user"] = req.user
    key = req.prompt_cache_key or session_cache_key(req.user)
    if key:
        body["prompt_cache_key"] = key
    if req.cache_retention in OPENAI_RETENTIONS:
        body["prompt_cache_retention"] = req.cache_retention
    rf = req.response_format
    if rf is not None and rf.type != "text":
        body["text"] = {"format": _encode_format(rf)}


def _encode_format(rf: ResponseFormat) -> dict[str, Any]:
    if rf.type != "json_schema":
        return {"type": "json_object"}
    fmt: dict[str, Any] = {"type": "json_schema", "name": rf.name or "response", "schema": rf.schema or {}}
    if rf.strict is not None:
        fmt["strict"] = rf.strict
    return fmt


def _wants_reasoning(r: Reasoning) -> bool:
    return r.enabled is not False and bool(r.enabled or r.effort or r.budget_tokens or r.adaptive or r.summary)


def _encode_reasoning(r: Reasoning) -> dict[str, Any]:
    effort = r.effort
    if effort is None and r.budget_tokens is not None:
        effort = _effort_from_budget(r.budget_tokens)
    if effort is None:
        effort = "medium"
    return {"effort": effort, "summary": r.summary or "auto"}


def _effort_from_budget(budget: int) -> str:
    if budget <= 2048:
        return "low"
    if budget <= 8192:
        return "medium"
    return "high"


def _encode_tool(t: Tool, dropped: Dropped) -> dict[str, Any] | None:
    if t.kind == "function":
        tool: dict[str, Any] = {
            "type": "function",
            "name": t.name,
            "parameters": t.parameters if t.parameters is not None else {"type": "object", "properties": {}},
            "strict": bool(t.strict),
        }
        if t.description:
            tool["description"] = t.description
        return tool
    if t.kind == "custom":
        tool = {"type": "custom", "name": t.name}
        if t.description:
            tool["description"] = t.description
        if t.format is not None:
            tool["format"] = t.format
        return tool
    if t.raw is not None and t.raw.get("type") in BUILTIN_TOOL_TYPES:
        return t.raw
    dropped.add(f"{t.source or 'tools'}.{t.name}")
    return None


# ---------------------------------------------------------------- input items


def _encode_message(msg: Message, items: list[dict[str, Any]], ctx: Context) -> None:
    """One IR message -> input items: its content parts gather into message items, closed (flushed) before
    each reasoning / tool call / tool result item so the order of the conversation is kept."""
    # a system message inside the conversation goes back as the role the client used (developer by default)
    role = msg.role if msg.role != "system" else ("system" if msg.source_role == "system" else "developer")
    assistant = msg.role == "assistant"
    pending: list[dict[str, Any]] = []  # content parts of the message item being built
    for p in msg.parts:
        if isinstance(p, (TextPart, RefusalPart, ImagePart, FilePart)):
            part = _content_part(p, assistant, ctx)
            if part is not None:
                pending.append(part)
            continue
        if pending:
            items.append({"type": "message", "role": role, "content": list(pending)})
            pending.clear()
        item = _item(p, ctx)
        if item is not None:
            items.append(item)
    if pending:
        items.append({"type": "message", "role": role, "content": list(pending)})


def _content_part(
    p: TextPart | RefusalPart | ImagePart | FilePart, assistant: bool, ctx: Context
) -> dict[str, Any] | None:
    if isinstance(p, TextPart):
        if assistant:
            if p.citations:
                ctx.dropped.add("citations")
            return {"type": "output_text", "text": p.text, "annotations": []}
        return {"type": "input_text", "text": p.text}
    if isinstance(p, RefusalPart):
        if assistant:
            return {"type": "refusal", "refusal": p.text}
        return {"type": "input_text", "text": p.text}
    if assistant:
        ctx.dropped.add("assistant.image" if isinstance(p, ImagePart) else "assistant.file")
        return None
    return _input_part(p, ctx)


def _item(p: Part, ctx: Context) -> dict[str, Any] | None:
    """A reasoning / tool call / tool result part -> its input item (None when it cannot be carried)."""
    if isinstance(p, WebSearchPart):
        return search.history_item(p, ctx)
    if isinstance(p, ThinkingPart):
        if p.encrypted_content and not carry.is_carried(p.encrypted_content):
            item: dict[str, Any] = {"type": "reasoning"}
            if p.item_id:
                item["id"] = p.item_id
            item["summary"] = [{"type": "summary_text", "text": p.text}] if p.text else []
            item["encrypted_content"] = p.encrypted_content
            return item
        ctx.dropped.add("thinking")
        return None
    if isinstance(p, ToolCallPart):
        if p.kind == "custom":
            item = {"type": "custom_tool_call", "call_id": p.id, "name": p.name, "input": p.arguments}
        else:
            item = {"type": "function_call", "call_id": p.id, "name": p.name, "arguments": p.arguments or "{}"}
        if p.item_id and p.item_id.startswith(("fc_", "fc-", "ctc_")):
            item["id"] = p.item_id
        return item
    if isinstance(p, ToolResultPart):
        if p.is_error:
            ctx.dropped.add("tool_result.is_error")
        output: str | list[dict[str, Any]]
        if all(isinstance(c, TextPart) for c in p.content):
            output = "".join(c.text for c in p.content if isinstance(c, TextPart))
        else:
            output = [x for x in (_input_part(c, ctx) for c in p.content) if x is not None]
        kind = "custom_tool_call_output" if p.kind == "custom" else "function_call_output"
        return {"type": kind, "call_id": p.tool_call_id, "output": output}
    return None


def _input_part(p: TextPart | ImagePart | FilePart, ctx: Context) -> dict[str, Any] | None:
    if isinstance(p, TextPart):
        return {"type": "input_text", "text": p.text}
    if isinstance(p, ImagePart):
        out: dict[str, Any] = {"type": "input_image", "detail": p.detail or "auto"}
        if p.data is not None:
            out["image_url"] = data_url(p.media_type, p.data)
        elif p.url is not None:
            out["image_url"] = p.url
        elif p.file_id is not None:
            out["file_id"] = p.file_id
        else:
            ctx.dropped.add("image")
            return None
        return out
    out = {"type": "input_file"}
    if p.data is not None:
        out["file_data"] = data_url(p.media_type, p.data)
    elif p.url is not None:
        out["file_url"] = p.url
    elif p.file_id is not None:
        out["file_id"] = p.file_id
    else:
        ctx.dropped.add("file")
        return None
    if p.filename:
        out["filename"] = p.filename
    elif p.data is not None:
        out["filename"] = "file.pdf" if p.media_type == "application/pdf" else "file"
    return out
