"""IR -> Chat Completions upstream request.

Choices made for third-party Chat backends (DeepSeek, OpenRouter, vLLM, Ollama):

* System text goes into one leading ``system`` message with string content; a mid-conversation
  ``Message(role="system")`` (Claude Code's) stays a ``system`` message at its position.
* Tool results become ``tool`` messages (string content) placed right after the assistant message,
  before any other user content. Images inside a tool result cannot go in a ``tool`` message: the text
  stays in the ``tool`` message and the images go into the ``user`` message that follows.
* An assistant tool call left unanswered gets a synthetic ``tool`` message; a tool result whose call is
  not in the preceding assistant message becomes user text (Chat backends reject both otherwise).
* A refusal in history is sent as plain assistant text (``refusal`` on an input message is not
  understood by most third-party backends).
* Thinking goes back as ``reasoning_content`` (DeepSeek and others require it around tool calls) when
  ``ctx.chat_reasoning_field == "reasoning_content"``; OpenRouter ``reasoning_details`` a Chat upstream gave
  (carried in the thinking signature) go back as they came, and so do Gemini's thought signatures, on their
  tool calls as ``extra_content`` (see ``gemini``); other signatures cannot be carried.
"""

from __future__ import annotations

from typing import Any

import orjson

from dragoman.ir.carry import is_unsigned
from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.ir.search import WebSearchPart
from dragoman.ir.search import context_text
from dragoman.protocols._cache import OPENAI_RETENTIONS
from dragoman.protocols._cache import session_cache_key
from dragoman.protocols._custom_args import wrap_custom_args
from dragoman.protocols._data_url import data_url
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import gemini
from dragoman.protocols.openai_chat import profile_rules
from dragoman.protocols.openai_chat import reasoning_details
from dragoman.protocols.openai_chat import search
from dragoman.protocols.openai_chat.reasoning_ask import encode_reasoning

UNANSWERED_TOOL_CALL = "tool call was not answered"
CUSTOM_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {CUSTOM_TOOL_PARAM: {"type": "string", "description": "The raw input of the tool."}},
    "required": [CUSTOM_TOOL_PARAM],
    "additionalProperties": False,
}
_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def put_cache_key(req: Request, ctx: Context, out: dict[str, Any]) -> None:
    """``prompt_cache_key`` (and ``prompt_cache_retention``) where the provider profile takes them; the key is
    the client's own, or one derived from its session identity (``caching.session_cache_key``)."""
    key = req.prompt_cache_key or session_cache_key(req.user)
    if not ctx.profile.cache_key:
        if req.prompt_cache_key:
            ctx.dropped.add("prompt_cache_key")
        return
    if key:
        out["prompt_cache_key"] = key
    if req.cache_retention in OPENAI_RETENTIONS:
        out["prompt_cache_retention"] = req.cache_retention


def encode_request(req: Request, ctx: Context) -> dict[str, Any]:
    dropped = ctx.dropped
    out: dict[str, Any] = {"model": req.model, "messages": _encode_messages(req, ctx)}
    _encode_tools(req, ctx, out)
    if req.web_search is not None:
        search.put_search(req.web_search, req.model, ctx, out)
    if req.max_tokens is not None:
        out[ctx.profile.max_tokens_field or ctx.chat_max_tokens_field] = req.max_tokens
    if req.temperature is not None:
        out["temperature"] = req.temperature
    if req.top_p is not None:
        out["top_p"] = req.top_p
    if req.top_k is not None:
        dropped.add("top_k")
    if req.stop:
        out["stop"] = list(req.stop)
    if req.user is not None:
        out["user"] = req.user
    put_cache_key(req, ctx, out)
    encode_reasoning(req, ctx, out)
    rf = req.response_format
    if rf is not None:
        if rf.type == "json_schema":
            js: dict[str, Any] = {"name": rf.name or "response", "schema": rf.schema or {}}
            if rf.strict is not None:
                js["strict"] = rf.strict
            out["response_format"] = {"type": "json_schema", "json_schema": js}
        elif rf.type == "json_object":
            out["response_format"] = {"type": "json_object"}
    if req.stream:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    return out


# ---------------------------------------------------------------- tools and reasoning


def _encode_tools(req: Request, ctx: Context, out: dict[str, Any]) -> None:
    """``tools``, ``tool_choice`` and ``parallel_tool_calls`` (none of them without a tool to call)."""
    tools = []
    for t in req.tools:
        enc = _encode_tool(t, ctx)
        if enc is not None:
            tools.append(enc)
    if not tools:
        return
    out["tools"] = tools
    tc = req.tool_choice
    if tc is not None:
        if tc.mode == "auto":
            out["tool_choice"] = "auto"
        elif tc.mode == "none":
            out["tool_choice"] = "none"
        elif tc.mode == "any":
            out["tool_choice"] = "required"
        else:
            out["tool_choice"] = {"type": "function", "function": {"name": tc.name}}
    if req.parallel_tool_calls is not None:
        out["parallel_tool_calls"] = req.parallel_tool_calls


def _encode_tool(t: Tool, ctx: Context) -> dict[str, Any] | None:
    if t.kind == "builtin":
        ctx.dropped.add(f"{t.source or 'tools'}.builtin")
        return None
    fn: dict[str, Any] = {"name": t.name}
    if t.kind == "custom":
        desc = t.description or ""
        fn["description"] = (
            desc + "\n\n" if desc else ""
        ) + f"Put the raw tool input in the string parameter `{CUSTOM_TOOL_PARAM}`."
        fn["parameters"] = CUSTOM_TOOL_PARAMETERS
        if t.format is not None:
            # the grammar is the only spec of the input (Codex's apply_patch): keep it as text, as for Anthropic
            fn["description"] += "\nInput format: " + orjson.dumps(t.format).decode()
        return {"type": "function", "function": fn}
    if t.description is not None:
        fn["description"] = t.description
    params = t.parameters if t.parameters is not None else _EMPTY_PARAMETERS
    fn["parameters"] = profile_rules.schema(params, ctx) if ctx.profile.schema_drop else params
    if t.strict is not None:
        fn["strict"] = t.strict
    return {"type": "function", "function": fn}


# ---------------------------------------------------------------- content parts


def _result_text(parts: list[TextPart | ImagePart | FilePart]) -> str:
    return "\n".join(p.text for p in parts if isinstance(p, TextPart))


def _image_part(p: ImagePart, ctx: Context) -> dict[str, Any] | None:
    if p.data is not None:
        url = data_url(p.media_type, p.data)
    elif p.url is not None:
        url = p.url
    else:
        ctx.dropped.add("image.file_id")
        return None
    iu: dict[str, Any] = {"url": url}
    if p.detail:
        iu["detail"] = p.detail
    return {"type": "image_url", "image_url": iu}


def _file_part(p: FilePart, ctx: Context) -> dict[str, Any] | None:
    f: dict[str, Any] = {}
    if p.data is not None:
        f["file_data"] = data_url(p.media_type, p.data)
    elif p.file_id is not None:
        f["file_id"] = p.file_id
    else:
        ctx.dropped.add("file.url")
        return None
    if p.filename:
        f["filename"] = p.filename
    return {"type": "file", "file": f}


def _media_part(p: ImagePart | FilePart, ctx: Context) -> dict[str, Any] | None:
    return _image_part(p, ctx) if isinstance(p, ImagePart) else _file_part(p, ctx)


def _user_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


# ---------------------------------------------------------------- messages


class _Messages:
    """The Chat message list being built, with the tool calls still waiting for their ``tool`` message."""

    __slots__ = ("out", "pending", "ctx")

    def __init__(self, ctx: Context) -> None:
        self.out: list[dict[str, Any]] = []
        self.pending: dict[str, None] = {}  # unanswered tool call ids of the last assistant message
        self.ctx = ctx

    def flush_pending(self) -> None:
        for cid in self.pending:
            self.out.append({"role": "tool", "tool_call_id": cid, "content": UNANSWERED_TOOL_CALL})
        self.pending.clear()


def _encode_messages(req: Request, ctx: Context) -> list[dict[str, Any]]:
    ms = _Messages(ctx)
    out = ms.out
    if req.system:
        out.append({"role": "system", "content": "\n".join(p.text for p in req.system)})
    reasoning_field = profile_rules.echoes_reasoning(ctx)
    sigs: dict[str, str] = {}  # Gemini's thought signatures by tool call id
    for msg in req.messages:
        ctx.dropped.at(msg.source)
        if msg.role == "system":
            ms.flush_pending()
            out.append({"role": "system", "content": "\n".join(p.text for p in msg.parts if isinstance(p, TextPart))})
        elif msg.role == "assistant":
            ms.flush_pending()
            out.append(_encode_assistant(msg, ctx, reasoning_field, sigs))
            for tc in out[-1].get("tool_calls") or ():
                ms.pending[tc["id"]] = None
        else:
            _encode_user(msg, ms)
    ms.flush_pending()
    ctx.dropped.leave()
    gemini.sign_calls(out, sigs, ctx.dropped)
    profile_rules.fill_history(out, ctx, reasoning_field)
    return out


def _encode_user(msg: Message, ms: _Messages) -> None:
    """Tool results first (as ``tool`` messages), then one ``user`` message with the rest."""
    ctx = ms.ctx
    content: list[dict[str, Any]] = []
    for p in msg.parts:
        if isinstance(p, ToolResultPart):
            _encode_tool_result(p, ms, content)
        elif isinstance(p, TextPart):
            content.append({"type": "text", "text": p.text})
        elif isinstance(p, (ImagePart, FilePart)):
            enc = _media_part(p, ctx)
            if enc is not None:
                content.append(enc)
        else:
            ctx.dropped.add(f"user.{type(p).__name__}")
    ms.flush_pending()
    if content:
        ms.out.append({"role": "user", "content": _user_content(content)})


def _encode_tool_result(p: ToolResultPart, ms: _Messages, content: list[dict[str, Any]]) -> None:
    if p.is_error:
        ms.ctx.dropped.add("tool_result.is_error")
    if p.tool_call_id not in ms.pending:  # orphan result: no matching call before it
        text = _result_text(p.content)
        content.append({"type": "text", "text": f"[result of tool call {p.tool_call_id}]\n{text}"})
        return
    del ms.pending[p.tool_call_id]
    ms.out.append({"role": "tool", "tool_call_id": p.tool_call_id, "content": _result_text(p.content)})
    for rp in p.content:  # images and files cannot go in a tool message: the user message after it
        if isinstance(rp, (ImagePart, FilePart)):
            enc = _media_part(rp, ms.ctx)
            if enc is not None:
                content.append(enc)


def _encode_assistant(msg: Message, ctx: Context, reasoning_field: bool, sigs: dict[str, str]) -> dict[str, Any]:
    texts: list[str] = []
    thinking: list[str] = []
    details: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for p in msg.parts:
        if isinstance(p, (TextPart, RefusalPart)):
            texts.append(p.text)
            if isinstance(p, TextPart) and p.citations:
                ctx.dropped.add("citations")
        elif isinstance(p, WebSearchPart):  # a search another API ran: its query and sources as context
            ctx.dropped.add("web_search_call(as_text)")
            texts.append(context_text(p) + "\n\n")
        elif isinstance(p, ThinkingPart):
            _thinking(p, ctx, thinking if reasoning_field else None, details, sigs)
        elif isinstance(p, ToolCallPart):
            args = wrap_custom_args(p.arguments) if p.kind == "custom" else (p.arguments or "{}")
            calls.append({"id": p.id, "type": "function", "function": {"name": p.name, "arguments": args}})
        else:
            ctx.dropped.add(f"assistant.{type(p).__name__}")
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if thinking:
        out["reasoning_content"] = "".join(thinking)
    if details:
        out["reasoning_details"] = details
    if calls:
        out["tool_calls"] = calls
    return out


def _thinking(
    p: ThinkingPart, ctx: Context, thinking: list[str] | None, details: list[dict[str, Any]], sigs: dict[str, str]
) -> None:
    """A thinking part: OpenRouter ``reasoning_details`` it carries back as they came, Gemini's signatures into
    ``sigs``, its text into ``thinking`` (``reasoning_content``; None: not sent); what cannot be carried named
    in ``ctx.dropped``."""
    restored = reasoning_details.restore(p.signature, p.text, ctx.dropped)
    if restored is not None:
        details.extend(restored[0])
    elif gemini.restore(p.signature, sigs):
        pass
    elif p.signature and not is_unsigned(p.signature):
        ctx.dropped.add("thinking.signature")
    if p.encrypted_content:
        ctx.dropped.add("reasoning.encrypted_content")
    if p.redacted_data:
        ctx.dropped.add("redacted_thinking")
    if p.text:
        if thinking is not None:
            thinking.append(p.text)
        elif restored is None or not restored[1]:  # else the text went back in reasoning_details
            ctx.dropped.add("thinking")
