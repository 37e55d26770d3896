"""Upstream whole Responses object -> IR ``Response``; usage and the terminal stop reason (shared with
the stream decoder)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import Dropped
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.mapping import RESPONSES_INCOMPLETE_TO_IR
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import OutputPart
from dragoman.ir.response import Response
from dragoman.protocols._checks import token_count
from dragoman.protocols._wire import describe_validation_error
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import search
from dragoman.protocols.openai_responses.models import RESPONSE_ADAPTER
from dragoman.protocols.openai_responses.request_decode import reasoning_part


def decode_usage(u: dict[str, Any] | None) -> Usage | None:
    if not u or not isinstance(u, dict):
        return None
    itd = u.get("input_tokens_details")
    otd = u.get("output_tokens_details")
    itd = itd if isinstance(itd, dict) else {}
    otd = otd if isinstance(otd, dict) else {}
    return Usage(
        input_tokens=_count(u, "input_tokens"),
        output_tokens=_count(u, "output_tokens"),
        cache_read_tokens=_count(itd, "cached_tokens"),
        cache_creation_tokens=_count(itd, "cache_write_tokens"),
        reasoning_tokens=_count(otd, "reasoning_tokens"),
    )


def _count(d: dict[str, Any], name: str) -> int | None:
    """A token count: an int that fits 64 bits (else ``UpstreamProtocolError``); any other type is ignored."""
    v = d.get(name)
    if type(v) is not int:
        return None
    return token_count(v, name)


def terminal_stop(status: str | None, incomplete: dict[str, Any] | None, tool_use: bool) -> StopReason:
    if status == "incomplete":
        reason = (incomplete or {}).get("reason")
        if reason is None:
            return StopReason.MAX_TOKENS
        return RESPONSES_INCOMPLETE_TO_IR.get(reason, StopReason.MAX_TOKENS)
    if status == "failed":
        return StopReason.ERROR
    return StopReason.TOOL_USE if tool_use else StopReason.END_TURN


def decode_response(body: dict[str, Any], ctx: Context) -> Response:
    try:
        r = RESPONSE_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise UpstreamProtocolError(f"invalid Responses response: {describe_validation_error(e)}") from e
    content: list[OutputPart] = []
    tool_use = False
    for item in r.output or []:
        itype = item.get("type")
        if itype == "message":
            _message(item, content, ctx.dropped)
        elif itype == "reasoning":
            content.append(reasoning_part(item))
        elif itype == search.CALL:
            content.append(search.part_from_item(item))
        elif itype == "function_call" or itype == "custom_tool_call":
            tool_use = True
            content.append(_tool_call(item, custom=itype == "custom_tool_call"))
        else:
            ctx.dropped.add(f"output.{itype}")
    return Response(
        id=r.id,
        model=r.model,
        content=content,
        stop_reason=terminal_stop(r.status, r.incomplete_details, tool_use),
        usage=decode_usage(r.usage) or Usage(),
        created=int(r.created_at) if r.created_at is not None else None,
    )


def _message(item: dict[str, Any], content: list[OutputPart], dropped: Dropped) -> None:
    for p in item.get("content") or []:
        ptype = p.get("type")
        if ptype == "output_text":
            cites = search.citations_from(p.get("annotations"), dropped) if p.get("annotations") else None
            content.append(TextPart(p.get("text") or "", cites))
        elif ptype == "refusal":
            content.append(RefusalPart(p.get("refusal") or ""))
        else:
            dropped.add(f"output.content.{ptype}")


def _tool_call(item: dict[str, Any], *, custom: bool) -> ToolCallPart:
    call_id = item.get("call_id") or item.get("id") or ""
    name = item.get("name") or ""
    item_id = item.get("id")
    if custom:
        return ToolCallPart(id=call_id, name=name, arguments=item.get("input") or "", kind="custom", item_id=item_id)
    return ToolCallPart(id=call_id, name=name, arguments=item.get("arguments") or "{}", item_id=item_id)
