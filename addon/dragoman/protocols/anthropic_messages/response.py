"""Anthropic Messages whole (non-streamed) responses: upstream message -> IR, IR -> client message.

Also the pieces the stream codecs share with them: usage in both directions, message ids, the
thinking signature a client gets, a custom tool's raw input.

Usage: the IR ``input_tokens`` is the whole prompt (cache reads and writes included); Anthropic's
``input_tokens`` excludes both cache fields.
"""

from __future__ import annotations

import secrets
from typing import Any

import orjson
from pydantic import ValidationError

from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.common import Usage
from dragoman.ir.mapping import IR_TO_ANTHROPIC
from dragoman.ir.mapping import anthropic_stop
from dragoman.ir.mapping import refused_stop
from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import OutputPart
from dragoman.ir.response import Response
from dragoman.ir.search import WebSearchPart
from dragoman.protocols import _wire
from dragoman.protocols._checks import token_count
from dragoman.protocols.anthropic_messages import models as m
from dragoman.protocols.anthropic_messages import search
from dragoman.protocols.anthropic_messages.content_encode import tool_input
from dragoman.protocols.anthropic_messages.request_decode import thinking_part
from dragoman.protocols.base import Context

# ---------------------------------------------------------------- shared with the stream codecs


def usage_to_ir(
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read: int | None,
    cache_creation: int | None,
) -> Usage:
    """Anthropic usage -> IR usage (IR ``input_tokens`` includes both cache fields).

    A count that does not fit 64 bits (or is negative) is an ``UpstreamProtocolError``."""
    total: int | None = None
    if input_tokens is not None or cache_read is not None or cache_creation is not None:
        total = token_count((input_tokens or 0) + (cache_read or 0) + (cache_creation or 0), "input_tokens")
    token_count(input_tokens, "input_tokens")
    token_count(output_tokens, "output_tokens")
    token_count(cache_read, "cache_read_input_tokens")
    token_count(cache_creation, "cache_creation_input_tokens")
    return Usage(
        input_tokens=total,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read,
        cache_creation_tokens=cache_creation,
    )


def usage_to_wire(u: Usage | None, *, with_cache: bool = True) -> dict[str, int]:
    """IR usage -> Anthropic usage (``input_tokens`` excludes the cache fields)."""
    u = u or Usage()
    cr = u.cache_read_tokens or 0
    cc = u.cache_creation_tokens or 0
    out = {"input_tokens": max((u.input_tokens or 0) - cr - cc, 0)}
    if with_cache:
        out["cache_creation_input_tokens"] = cc
        out["cache_read_input_tokens"] = cr
    out["output_tokens"] = u.output_tokens or 0
    return out


def message_id(ir_id: str | None) -> str:
    if ir_id and ir_id.startswith("msg_"):
        return ir_id
    if ir_id:
        return "msg_" + ir_id
    return "msg_" + secrets.token_hex(12)


def thinking_signature(signature: str | None, encrypted_content: str | None, item_id: str | None) -> str:
    """The signature an Anthropic client gets for a thinking block (native, carried or UNSIGNED); OpenRouter
    ``reasoning_details`` and Gemini thought signatures already carried by the Chat decoder pass as they are."""
    if signature and (not carry.is_carried(signature) or carry.is_openrouter(signature) or carry.is_gemini(signature)):
        return signature
    if encrypted_content:
        return carry.wrap_responses(item_id, encrypted_content)
    return carry.UNSIGNED


def custom_input(arguments_obj: Any) -> str:
    """The raw input of a custom tool offered as ``{"input": string}`` (anything else: its JSON text)."""
    if isinstance(arguments_obj, dict):
        raw = arguments_obj.get(CUSTOM_TOOL_PARAM)
        if isinstance(raw, str):
            return raw
    return orjson.dumps(arguments_obj).decode()


# ---------------------------------------------------------------- decode (upstream -> IR)


def _content_to_ir(blocks: list[m.ContentBlock], ctx: Context) -> list[OutputPart]:
    custom = ctx.custom_tools()
    content: list[OutputPart] = []
    pairing = search.SearchPairing()
    for b in blocks:
        if isinstance(b, m.TextBlock):
            content.append(search.text_part(b.text, b.citations, ctx.dropped) if b.citations else TextPart(b.text))
        elif type(b) is m.OtherBlock and b.type == "server_tool_use" and (call := pairing.call(b.model_dump())):
            content.append(call)
        elif type(b) is m.OtherBlock and b.type == search.RESULT:
            raw = b.model_dump()
            fresh = raw.get("tool_use_id") not in pairing.calls
            part = pairing.result(raw)
            if fresh:
                content.append(part)
        elif isinstance(b, m.ThinkingBlock):
            content.append(thinking_part(b.thinking, b.signature))
        elif isinstance(b, m.RedactedThinkingBlock):
            content.append(ThinkingPart(redacted_data=b.data))
        elif isinstance(b, m.ToolUseBlock):
            if b.name in custom:
                content.append(ToolCallPart(id=b.id, name=b.name, arguments=custom_input(b.input), kind="custom"))
            else:
                content.append(ToolCallPart(id=b.id, name=b.name, arguments=orjson.dumps(b.input).decode()))
        else:
            ctx.dropped.add(b.type)
    return content


def decode_response(body: dict[str, Any], ctx: Context) -> Response:
    try:
        wire = m.MESSAGE_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise UpstreamProtocolError(f"invalid Anthropic message: {_wire.describe_validation_error(e)}") from e
    u = wire.usage
    usage = usage_to_ir(u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens)
    usage.web_search_requests = search.usage_searches(u.model_extra)
    return Response(
        id=wire.id,
        model=wire.model,
        content=_content_to_ir(wire.content, ctx),
        stop_reason=anthropic_stop(wire.stop_reason),
        stop_sequence=wire.stop_sequence,
        usage=usage,
    )


# ---------------------------------------------------------------- encode (IR -> client)


def _part_to_wire(p: OutputPart, ctx: Context) -> dict[str, Any] | None:
    if type(p) is RefusalPart:
        return {"type": "text", "text": p.text}
    if type(p) is ThinkingPart:
        if p.redacted_data:
            return {"type": "redacted_thinking", "data": p.redacted_data}
        sig = thinking_signature(p.signature, p.encrypted_content, p.item_id)
        return {"type": "thinking", "thinking": p.text, "signature": sig}
    if type(p) is ToolCallPart:
        return {"type": "tool_use", "id": p.id, "name": p.name, "input": tool_input(p, ctx)}
    ctx.dropped.add(type(p).__name__)
    return None


def encode_response(resp: Response, ctx: Context) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for p in resp.content:
        if type(p) is TextPart:
            content.extend(search.text_blocks(p))
        elif type(p) is WebSearchPart:
            content.extend(search.search_blocks(p))
        elif (b := _part_to_wire(p, ctx)) is not None:
            content.append(b)
    stop = refused_stop(resp.stop_reason, any(type(p) is RefusalPart for p in resp.content))
    return {
        "id": message_id(resp.id),
        "type": "message",
        "role": "assistant",
        "model": resp.model,
        "content": content,
        "stop_reason": IR_TO_ANTHROPIC[stop] if stop is not None else None,
        "stop_sequence": resp.stop_sequence,
        "usage": search.with_searches(usage_to_wire(resp.usage), resp.usage, search.count_searches(resp.content)),
    }
