"""Anthropic Messages client request -> IR ``Request``.

Carried reasoning (``dragoman.ir.carry``): a thinking ``signature`` starting with ``RESPONSES_TAG`` is a
Responses reasoning item we gave this client earlier; it is unwrapped into ``encrypted_content`` +
``item_id``. ``carry.UNSIGNED`` means "no signature". Native signatures are kept as they are.

What the IR cannot carry is recorded by NAME in ``Request.dropped``: unknown top-level fields
(``cache_control``, ``context_management``, ``mcp_servers``, ``container``, ``service_tier``, ...),
``cache_control`` on blocks, ``citations``, server-tool blocks (``server_tool_use``,
``web_search_tool_result``, ``mcp_tool_use``, ...).
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from pydantic import ValidationError

from dragoman.errors import ClientRequestError
from dragoman.ir import carry
from dragoman.ir.common import Dropped
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import Part
from dragoman.ir.request import Reasoning
from dragoman.ir.request import Request
from dragoman.ir.request import ResponseFormat
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolChoice
from dragoman.ir.request import ToolResultPart
from dragoman.protocols import _wire
from dragoman.protocols.anthropic_messages import models as m
from dragoman.protocols.anthropic_messages import search

#: Anthropic effort names that are not OpenAI effort names
_EFFORT_TO_IR = {"max": "xhigh"}

#: a block that becomes a text, image or file part wherever it appears
_MEDIA_BLOCKS = (m.TextBlock, m.ImageBlock, m.DocumentBlock)


def thinking_part(text: str, signature: str | None) -> ThinkingPart:
    """A thinking block -> ThinkingPart, unwrapping carried signatures."""
    if not signature or carry.is_unsigned(signature):
        return ThinkingPart(text=text)
    carried = carry.unwrap_responses(signature)
    if carried is not None:
        return ThinkingPart(text=text, encrypted_content=carried.get("enc"), item_id=carried.get("id"))
    return ThinkingPart(text=text, signature=signature)


# ---------------------------------------------------------------- content blocks


def _source_to_image(src: m.Source, dropped: Dropped) -> ImagePart | None:
    if isinstance(src, m.Base64Source):
        return ImagePart(data=src.data, media_type=src.media_type)
    if isinstance(src, m.UrlSource):
        return ImagePart(url=src.url)
    if isinstance(src, m.FileSource):
        return ImagePart(file_id=src.file_id)
    dropped.add(f"source.{src.type}")
    return None


def _source_to_file(block: m.DocumentBlock, dropped: Dropped) -> FilePart | None:
    src = block.source
    if isinstance(src, m.Base64Source):
        return FilePart(data=src.data, media_type=src.media_type, filename=block.title)
    if isinstance(src, m.UrlSource):
        return FilePart(url=src.url, filename=block.title)
    if isinstance(src, m.FileSource):
        return FilePart(file_id=src.file_id, filename=block.title)
    if isinstance(src, m.TextSource):
        data = base64.b64encode(src.data.encode()).decode()
        return FilePart(data=data, media_type=src.media_type or "text/plain", filename=block.title)
    dropped.add(f"source.{src.type}")
    return None


def _note_block_extras(block: object, dropped: Dropped) -> None:
    if getattr(block, "cache_control", None) is not None:
        dropped.add("cache_control")
    if getattr(block, "citations", None) and not isinstance(block, m.TextBlock):
        dropped.add("citations")


def _media_part(
    b: m.TextBlock | m.ImageBlock | m.DocumentBlock, dropped: Dropped
) -> TextPart | ImagePart | FilePart | None:
    """A text, image or document block -> its part; None when its source cannot be carried."""
    if isinstance(b, m.TextBlock):
        return TextPart(b.text)
    if isinstance(b, m.ImageBlock):
        return _source_to_image(b.source, dropped)
    return _source_to_file(b, dropped)


def _tool_result_content(
    content: str | list[dict[str, Any]] | None, dropped: Dropped
) -> list[TextPart | ImagePart | FilePart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    try:
        blocks = m.TOOL_RESULT_CONTENT_ADAPTER.validate_python(content)
    except ValidationError as e:
        raise ClientRequestError(f"invalid tool_result content: {_wire.describe_validation_error(e)}") from e
    out: list[TextPart | ImagePart | FilePart] = []
    for k, b in enumerate(blocks):
        dropped.at(f"content[{k}]", depth=2)
        _note_block_extras(b, dropped)
        if isinstance(b, _MEDIA_BLOCKS):
            part = _media_part(b, dropped)
            if part is not None:
                out.append(part)
        else:
            dropped.add(b.type)
    dropped.leave(2)
    return out


def _block_to_part(b: m.ContentBlock, dropped: Dropped) -> Part | None:
    if isinstance(b, _MEDIA_BLOCKS):
        return _media_part(b, dropped)
    if isinstance(b, m.ToolUseBlock):
        return ToolCallPart(id=b.id, name=b.name, arguments=orjson.dumps(b.input).decode())
    if isinstance(b, m.ToolResultBlock):
        return ToolResultPart(
            tool_call_id=b.tool_use_id,
            content=_tool_result_content(b.content, dropped),
            is_error=bool(b.is_error),
        )
    if isinstance(b, m.ThinkingBlock):
        return thinking_part(b.thinking, b.signature)
    if isinstance(b, m.RedactedThinkingBlock):
        return ThinkingPart(redacted_data=b.data)
    dropped.add(b.type)
    return None


def _search_block(b: m.OtherBlock, pairing: search.SearchPairing, dropped: Dropped) -> Part | None:
    """A ``server_tool_use`` (web search) -> its search part; its ``web_search_tool_result`` fills that part
    (a part of its own when the call is not in this message); any other server block is dropped."""
    raw = b.model_dump()
    if b.type == "server_tool_use":
        part = pairing.call(raw)
        if part is not None:
            return part
    elif b.type == search.RESULT:
        fresh = raw.get("tool_use_id") not in pairing.calls
        part = pairing.result(raw)
        return part if fresh else None
    dropped.add(b.type)
    return None


def _blocks_to_parts(blocks: list[m.ContentBlock], dropped: Dropped) -> list[Part]:
    parts: list[Part] = []
    pairing: search.SearchPairing | None = None  # made for a message with server blocks only (rare)
    for j, b in enumerate(blocks):
        dropped.at(f"content[{j}]", depth=1)
        _note_block_extras(b, dropped)
        if type(b) is m.TextBlock and b.citations:
            parts.append(search.text_part(b.text, b.citations, dropped))
            continue
        if type(b) is m.OtherBlock and b.type in ("server_tool_use", search.RESULT):
            if pairing is None:
                pairing = search.SearchPairing()
            part = _search_block(b, pairing, dropped)
            if part is not None:
                parts.append(part)
            continue
        part = _block_to_part(b, dropped)
        if part is not None:
            parts.append(part)
    dropped.leave(1)
    return parts


# ---------------------------------------------------------------- request fields


def _system_to_ir(system: str | list[m.TextBlock] | None, dropped: Dropped) -> list[TextPart]:
    if isinstance(system, str):
        return [TextPart(system)] if system else []
    out: list[TextPart] = []
    for j, b in enumerate(system or []):
        dropped.at(f"system[{j}]")
        _note_block_extras(b, dropped)
        out.append(TextPart(b.text))
    dropped.leave()
    return out


def _tool_to_ir(t: m.ToolParam, dropped: Dropped) -> Tool:
    if t.cache_control is not None:
        dropped.add("cache_control")
    if t.type not in (None, "custom"):
        return Tool(name=t.name, description=t.description, kind="builtin", raw=t.model_dump(exclude_none=True))
    for extra in t.model_extra or {}:
        dropped.add(extra)
    return Tool(name=t.name, description=t.description, parameters=t.input_schema, kind="function")


def _tool_choice_to_ir(tc: m.ToolChoiceParam | None) -> tuple[ToolChoice | None, bool | None]:
    """(``tool_choice``, ``parallel_tool_calls``)."""
    if tc is None:
        return None, None
    return ToolChoice(mode=tc.type, name=tc.name), (False if tc.disable_parallel_tool_use else None)


def _reasoning_to_ir(req: m.MessagesRequest, dropped: Dropped) -> tuple[Reasoning | None, ResponseFormat | None]:
    reasoning: Reasoning | None = None
    th = req.thinking
    if th is not None:
        if th.type == "enabled":
            reasoning = Reasoning(enabled=True, budget_tokens=th.budget_tokens)
        elif th.type == "adaptive":
            reasoning = Reasoning(enabled=True, adaptive=True)
        else:
            reasoning = Reasoning(enabled=False)
        for extra in th.model_extra or {}:
            dropped.add(f"thinking.{extra}")
    fmt: ResponseFormat | None = None
    for key, value in (req.output_config or {}).items():
        if key == "effort" and isinstance(value, str):
            if reasoning is None:
                reasoning = Reasoning()
            reasoning.effort = _EFFORT_TO_IR.get(value, value)
        elif key == "format" and isinstance(value, dict) and value.get("type") == "json_schema":
            fmt = ResponseFormat(type="json_schema", schema=value.get("schema"))
        else:
            dropped.add(f"output_config.{key}")
    return reasoning, fmt


def _user_to_ir(metadata: m.MetadataParam | None, dropped: Dropped) -> str | None:
    if metadata is None:
        return None
    for key in metadata.model_extra or {}:
        dropped.add(f"metadata.{key}")
    return metadata.user_id


# ---------------------------------------------------------------- the request


def decode_request(body: dict[str, Any]) -> Request:
    try:
        wire = m.REQUEST_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise ClientRequestError(f"invalid Anthropic Messages request: {_wire.describe_validation_error(e)}") from e
    dropped = Dropped()
    for key in wire.model_extra or {}:
        dropped.add(key)
    system = _system_to_ir(wire.system, dropped)
    messages: list[Message] = []
    for i, msg in enumerate(wire.messages):
        dropped.at(f"messages[{i}]")
        if isinstance(msg.content, str):
            parts: list[Part] = [TextPart(msg.content)]
        else:
            parts = _blocks_to_parts(msg.content, dropped)
        messages.append(Message(role=msg.role, parts=parts, source=f"messages[{i}]"))
    tools = []
    for i, t in enumerate(wire.tools or []):
        dropped.at(f"tools[{i}]")
        tools.append(_tool_to_ir(t, dropped))
        tools[-1].source = f"tools[{i}]"
    dropped.leave()
    web = next((t for t in tools if t.kind == "builtin" and search.is_search_tool(t.raw)), None)
    if web is not None:
        tools.remove(web)
    tool_choice, parallel = _tool_choice_to_ir(wire.tool_choice)
    reasoning, fmt = _reasoning_to_ir(wire, dropped)
    return Request(
        model=wire.model,
        messages=messages,
        system=system,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        max_tokens=wire.max_tokens,
        temperature=wire.temperature,
        top_p=wire.top_p,
        top_k=wire.top_k,
        stop=list(wire.stop_sequences or []),
        stream=bool(wire.stream),
        user=_user_to_ir(wire.metadata, dropped),
        reasoning=reasoning,
        response_format=fmt,
        web_search=search.spec_from_tool(web.raw or {}) if web is not None else None,
        dropped=dropped,
    )
