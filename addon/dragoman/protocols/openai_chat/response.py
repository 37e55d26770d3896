"""Whole Chat Completions responses both ways, and the usage, id and content helpers the streams share.

Decoding reads choice 0 (any other choice, n > 1, is named in ``ctx.dropped``); reasoning arrives as
``reasoning_content`` (DeepSeek, vLLM), ``reasoning`` or ``reasoning_details`` (OpenRouter, see
``reasoning_details``) or Mistral ``thinking`` content parts; Gemini's thought signatures on tool calls
are carried in a thinking part (see ``gemini``). Encoding writes one choice with ``content``,
``refusal``, ``reasoning_content``, ``reasoning_details`` (OpenRouter's shape, carrying Claude's thinking
signatures; see ``reasoning_details``) and ``tool_calls`` (custom tools wrapped as function calls; Gemini's
thought signatures on their calls as ``extra_content``, see ``gemini``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pydantic import ValidationError

from dragoman.errors import UpstreamProtocolError
from dragoman.ir.carry import is_unsigned
from dragoman.ir.common import Usage
from dragoman.ir.mapping import IR_TO_CHAT
from dragoman.ir.mapping import chat_stop
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import OutputPart
from dragoman.ir.response import Response
from dragoman.ir.search import WebSearchPart
from dragoman.protocols._checks import token_count
from dragoman.protocols._custom_args import unwrap_custom_args
from dragoman.protocols._custom_args import wrap_custom_args
from dragoman.protocols._wire import describe_validation_error
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import gemini
from dragoman.protocols.openai_chat import models as m
from dragoman.protocols.openai_chat import reasoning_details
from dragoman.protocols.openai_chat import search

#: what ``ctx.dropped`` names when an upstream answered with several choices (n > 1): all but choice 0
DROPPED_CHOICES = "choices[1:]"

# ---------------------------------------------------------------- shared helpers


def chat_id(ir_id: str | None) -> str:
    if ir_id and ir_id.startswith("chatcmpl"):
        return ir_id
    if ir_id:
        return "chatcmpl-" + ir_id
    return "chatcmpl-" + uuid.uuid4().hex


def mistral_thinking(v: Any) -> str:
    """A Mistral ``thinking`` part's value (a string or a list of text chunks) -> its text."""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "".join(p.get("text", "") for p in v if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def decode_usage(u: Any) -> Usage | None:
    """Chat usage (incl. DeepSeek ``prompt_cache_hit_tokens``) -> IR usage (input = total prompt)."""
    if not isinstance(u, dict):
        return None
    out = Usage()
    pt = u.get("prompt_tokens")
    if type(pt) is int:
        out.input_tokens = pt
    ct = u.get("completion_tokens")
    if type(ct) is int:
        out.output_tokens = ct
    ptd = u.get("prompt_tokens_details")
    if isinstance(ptd, dict):
        cached = ptd.get("cached_tokens")
        if type(cached) is int:
            out.cache_read_tokens = cached
        cw = ptd.get("cache_write_tokens")
        if type(cw) is int and cw:
            out.cache_creation_tokens = cw
    hit = u.get("prompt_cache_hit_tokens")
    if type(hit) is int and (out.cache_read_tokens is None or hit > out.cache_read_tokens):
        out.cache_read_tokens = hit
    ctd = u.get("completion_tokens_details")
    if isinstance(ctd, dict):
        rt = ctd.get("reasoning_tokens")
        if type(rt) is int:
            out.reasoning_tokens = rt
    out.web_search_requests = search.usage_searches(u)
    # counts no encoder can write (above 64 bits) or negative ones: a broken upstream, not a crash
    token_count(out.input_tokens, "prompt_tokens")
    token_count(out.output_tokens, "completion_tokens")
    token_count(out.cache_read_tokens, "cached_tokens")
    token_count(out.cache_creation_tokens, "cache_write_tokens")
    token_count(out.reasoning_tokens, "reasoning_tokens")
    return out


def encode_usage(u: Usage) -> dict[str, Any]:
    pt = u.input_tokens or 0
    ct = u.output_tokens or 0
    out: dict[str, Any] = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
    if u.cache_read_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": u.cache_read_tokens}
    if u.reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": u.reasoning_tokens}
    return out


# ---------------------------------------------------------------- decode


def decode_response(body: dict[str, Any], ctx: Context) -> Response:
    try:
        wire = m.COMPLETION_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise UpstreamProtocolError(f"invalid Chat Completions response: {describe_validation_error(e)}") from e
    if not wire.choices:
        raise UpstreamProtocolError("Chat Completions response has no choices")
    choice = wire.choices[0]
    if len(wire.choices) > 1:  # n > 1: the client's protocol has one answer
        ctx.dropped.add(DROPPED_CHOICES)
    msg = choice.message
    content = _message_content(msg, ctx)
    content.extend(gemini.sign_parts(content, msg.tool_calls, _tool_calls(msg, ctx.custom_tools())))
    return Response(
        id=wire.id,
        model=wire.model,
        content=content,
        stop_reason=chat_stop(choice.finish_reason, bool(msg.tool_calls)),
        usage=decode_usage(wire.usage) or Usage(),
        created=wire.created,
    )


def _message_content(msg: m.ResponseMessage, ctx: Context) -> list[OutputPart]:
    """Reasoning, text and refusal of the reply, in that order."""
    content: list[OutputPart] = []
    reasoning = msg.reasoning_content if msg.reasoning_content is not None else msg.reasoning
    thinking = reasoning_details.thinking_part(msg.reasoning_details, reasoning)
    if thinking is not None:
        content.append(thinking)
    if isinstance(msg.content, str):
        text = msg.content
        if ctx.profile.thought_tags:  # Gemini's thought summary, <thought>-wrapped before the answer
            summary, text = gemini.split_thought(text)
            if summary:
                content.append(ThinkingPart(text=summary))
        if text:
            content.append(TextPart(text))
    elif msg.content:
        for p in msg.content:
            t = p.get("type")
            if t == "thinking":
                content.append(ThinkingPart(text=mistral_thinking(p.get("thinking"))))
            elif t == "text" and isinstance(p.get("text"), str):
                content.append(TextPart(p["text"]))
            elif t == "refusal" and isinstance(p.get("refusal"), str):
                content.append(RefusalPart(p["refusal"]))
            else:
                ctx.dropped.add(f"message.content.{t}")
    if msg.refusal:
        content.append(RefusalPart(msg.refusal))
    annotations = (msg.model_extra or {}).get("annotations")  # an extra field (no ``getattr`` miss: it raises)
    if annotations:
        cites = search.citations_from(annotations, ctx.dropped)
        texts = [p for p in content if type(p) is TextPart]
        if len(texts) == 1 and cites:  # the spans index the message's content string: its one text part
            texts[0].citations = cites
        elif cites:
            ctx.dropped.add("message.annotations")
    return content


def _tool_calls(msg: m.ResponseMessage, custom: set[str]) -> list[ToolCallPart]:
    out: list[ToolCallPart] = []
    for tc in msg.tool_calls or []:
        if tc.custom is not None:
            out.append(ToolCallPart(id=tc.id or "", name=tc.custom.name, arguments=tc.custom.input, kind="custom"))
            continue
        if tc.function is None or not tc.function.name:
            raise UpstreamProtocolError("Chat Completions tool call without function.name")
        args = tc.function.arguments or "{}"
        if tc.function.name in custom:
            out.append(
                ToolCallPart(id=tc.id or "", name=tc.function.name, arguments=unwrap_custom_args(args), kind="custom")
            )
        else:
            out.append(ToolCallPart(id=tc.id or "", name=tc.function.name, arguments=args))
    fc = msg.function_call
    if fc is not None and fc.name:
        out.append(ToolCallPart(id="call_legacy_1", name=fc.name, arguments=fc.arguments or "{}"))
    return out


# ---------------------------------------------------------------- encode


def encode_response(resp: Response, ctx: Context) -> dict[str, Any]:
    texts: list[str] = []
    thinking: list[str] = []
    details: list[dict[str, Any]] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    signed: dict[str, str] = {}  # Gemini's thought signatures by tool call id
    at = 0
    for p in resp.content:
        if isinstance(p, TextPart):
            annotations.extend(search.annotation(c, at, len(p.text)) for c in p.citations or [])
            texts.append(p.text)
            at += len(p.text)
        elif isinstance(p, ThinkingPart):
            if p.text:
                thinking.append(p.text)
            entry = reasoning_details.answer_entry(p, len(details))
            if entry is not None:
                details.append(entry)
            carried = p.redacted_data or reasoning_details.anthropic_signature(p.signature)  # in the entry
            if gemini.restore(p.signature, signed):  # Gemini's go on their calls (below)
                carried = "gemini"
            if not carried and ((p.signature and not is_unsigned(p.signature)) or p.encrypted_content):
                ctx.dropped.add("thinking_signature")
        elif isinstance(p, RefusalPart):
            refusals.append(p.text)
        elif isinstance(p, WebSearchPart):  # Chat has no search call: its sources reach the client as annotations
            ctx.dropped.add("web_search_call")
        elif isinstance(p, ToolCallPart):
            args = wrap_custom_args(p.arguments) if p.kind == "custom" else (p.arguments or "{}")
            calls.append({"id": p.id, "type": "function", "function": {"name": p.name, "arguments": args}})
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": "".join(refusals) if refusals else None,
    }
    if thinking:
        message["reasoning_content"] = "".join(thinking)
    if details:
        message["reasoning_details"] = details
    if calls:
        message["tool_calls"] = calls
        gemini.sign_tool_calls(calls, signed)
    if signed:  # not keyed by a call of this answer (Gemini's on a text part): Chat has no place for it
        ctx.dropped.add("thinking_signature")
    if annotations:
        message["annotations"] = annotations
    finish = IR_TO_CHAT.get(resp.stop_reason, "stop") if resp.stop_reason is not None else "stop"
    return {
        "id": chat_id(resp.id),
        "object": "chat.completion",
        "created": resp.created if resp.created is not None else int(time.time()),
        "model": resp.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": encode_usage(resp.usage),
    }
