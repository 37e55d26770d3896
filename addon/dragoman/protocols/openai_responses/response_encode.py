"""IR ``Response`` -> the client's whole Responses object, and the item / object builders the stream
encoder shares (so a streamed ``response.completed`` carries exactly what a whole response would)."""

from __future__ import annotations

import time
from typing import Any

import orjson

from dragoman.ir import carry
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.mapping import IR_TO_RESPONSES_STATUS
from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import Response
from dragoman.ir.search import WebSearchPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import search
from dragoman.protocols.openai_responses.request_decode import EXTRA_ECHO
from dragoman.protocols.openai_responses.request_decode import EXTRA_NAMESPACES

#: IR tool name -> (namespace, name) of the client's namespaced tools (see ``request_decode``)
NamespaceMap = dict[str, tuple[str, str]]


def encode_response(resp: Response, ctx: Context) -> dict[str, Any]:
    rid = response_id(resp.id)
    suffix = rid[5:]
    created = resp.created if resp.created is not None else int(time.time())
    status, reason = stop_status(resp.stop_reason)
    obj = base_object(rid, resp.model, created, ctx, status)
    custom = ctx.custom_tools()
    nsmap = namespaces(ctx)
    output: list[dict[str, Any]] = []
    cited = any(isinstance(p, TextPart) and p.citations for p in resp.content)
    for n, p in enumerate(resp.content):
        if isinstance(p, TextPart) and cited and n and isinstance(resp.content[n - 1], TextPart):
            continue  # joined into the message of the first text part of its run (below)
        if isinstance(p, TextPart) and cited:
            output.append(message_item(f"msg_{suffix}_{n}", cited_text_part(resp.content, n)))
        elif isinstance(p, TextPart):
            output.append(message_item(f"msg_{suffix}_{n}", text_part(p.text)))
        elif isinstance(p, WebSearchPart):
            output.append(search.call_item(p, search.item_id(p)))
        elif isinstance(p, RefusalPart):
            output.append(message_item(f"msg_{suffix}_{n}", refusal_part(p.text)))
        elif isinstance(p, ThinkingPart):
            enc = thinking_enc(p.signature, p.encrypted_content, p.text, p.redacted_data)
            output.append(reasoning_item(p.item_id or f"rs_{suffix}_{n}", p.text, enc))
        elif isinstance(p, ToolCallPart):
            output.append(_call(p, f"{suffix}_{n}", custom, nsmap))
    obj["output"] = output
    obj["usage"] = encode_usage(resp.usage)
    if status == "incomplete":
        obj["incomplete_details"] = {"reason": reason}
    if status == "failed":
        obj["error"] = {"code": "server_error", "message": "the upstream response failed"}
    return obj


def _call(p: ToolCallPart, suffix: str, custom: set[str], nsmap: NamespaceMap) -> dict[str, Any]:
    is_custom = p.kind == "custom" or p.name in custom
    value = p.arguments if p.kind == "custom" or not is_custom else unwrap_custom_input(p.arguments)
    ns = nsmap.get(p.name)
    name = ns[1] if ns else p.name
    item_id = p.item_id or f"{'ctc' if is_custom else 'fc'}_{suffix}"
    return call_item(item_id, p.id, name, value, custom=is_custom, namespace=ns[0] if ns else None)


# ---------------------------------------------------------------- shared with the stream encoder


def response_id(source_id: str) -> str:
    if source_id.startswith("resp_"):
        return source_id
    return "resp_" + "".join(c for c in source_id if c.isalnum() or c in "-_")


def encode_usage(u: Usage | None) -> dict[str, Any]:
    u = u or Usage()
    inp = u.input_tokens or 0
    out = u.output_tokens or 0
    return {
        "input_tokens": inp,
        "input_tokens_details": {
            "cached_tokens": u.cache_read_tokens or 0,
            "cache_write_tokens": u.cache_creation_tokens or 0,
        },
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens or 0},
        "total_tokens": inp + out,
    }


def base_object(rid: str, model: str, created: int, ctx: Context, status: str) -> dict[str, Any]:
    """The response object with the request echo fields (as the client sent them)."""
    echo: dict[str, Any] = {}
    if ctx.request is not None:
        echo = ctx.request.extra.get(EXTRA_ECHO) or {}
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": echo.get("instructions"),
        "max_output_tokens": echo.get("max_output_tokens"),
        "model": model,
        "output": [],
        "parallel_tool_calls": echo.get("parallel_tool_calls", True),
        "previous_response_id": echo.get("previous_response_id"),
        "reasoning": echo.get("reasoning") or {"effort": None, "summary": None},
        "store": bool(echo.get("store", False)),
        "temperature": echo.get("temperature", 1.0),
        "text": echo.get("text") or {"format": {"type": "text"}},
        "tool_choice": echo.get("tool_choice", "auto"),
        "tools": echo.get("tools") or [],
        "top_p": echo.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None,
        "user": echo.get("user"),
        "metadata": {},
    }


def namespaces(ctx: Context) -> NamespaceMap:
    if ctx.request is None:
        return {}
    nsmap: NamespaceMap = ctx.request.extra.get(EXTRA_NAMESPACES) or {}
    return nsmap


def unwrap_custom_input(arguments: str) -> str:
    """A custom tool offered as a function with one string parameter: its call's raw ``input``."""
    try:
        obj = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(obj, dict) and isinstance(obj.get(CUSTOM_TOOL_PARAM), str):
        value: str = obj[CUSTOM_TOOL_PARAM]
        return value
    if isinstance(obj, str):
        return obj
    return arguments


def message_item(item_id: str, part: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": [part]}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def cited_text_part(content: list[Any], start: int) -> dict[str, Any]:
    """The run of text parts from ``start`` as ONE ``output_text`` with their citations as ``url_citation``
    annotations over the joined text (an Anthropic upstream cites in blocks of their own; the real API sends
    one text with annotations)."""
    texts: list[str] = []
    annotations: list[dict[str, Any]] = []
    at = 0
    for p in content[start:]:
        if not isinstance(p, TextPart):
            break
        annotations.extend(search.annotation(c, at, len(p.text)) for c in p.citations or [])
        texts.append(p.text)
        at += len(p.text)
    return {"type": "output_text", "text": "".join(texts), "annotations": annotations, "logprobs": []}


def refusal_part(text: str) -> dict[str, Any]:
    return {"type": "refusal", "refusal": text}


def reasoning_item(item_id: str, text: str, encrypted_content: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}] if text else [],
    }
    if encrypted_content is not None:
        item["encrypted_content"] = encrypted_content
    return item


def call_item(
    item_id: str, call_id: str, name: str, value: str, *, custom: bool, namespace: str | None, status: str = "completed"
) -> dict[str, Any]:
    item: dict[str, Any] = {"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name}
    if custom:
        item["type"] = "custom_tool_call"
        item["input"] = value
    else:
        item["arguments"] = value
    if namespace is not None:
        item["namespace"] = namespace
    return item


def thinking_enc(p_signature: str | None, p_enc: str | None, text: str, redacted: str | None) -> str:
    """``encrypted_content`` for a reasoning item: the upstream's own, or an Anthropic block carried."""
    if p_enc is not None and not carry.is_carried(p_enc):
        return p_enc
    sig = p_signature if p_signature is not None and not carry.is_unsigned(p_signature) else None
    return carry.wrap_anthropic(sig, text, redacted)


def stop_status(stop: StopReason | None) -> tuple[str, str | None]:
    return IR_TO_RESPONSES_STATUS.get(stop or StopReason.END_TURN, ("completed", None))
