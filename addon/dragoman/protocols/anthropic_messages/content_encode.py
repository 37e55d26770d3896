"""IR parts -> Anthropic content blocks, one function per block type (requests toward an Anthropic upstream).

* Thinking in history: native signature -> ``thinking``; ``redacted_data`` -> ``redacted_thinking``;
  ``encrypted_content`` carried with ``carry.ANTHROPIC_TAG`` -> the original block; OpenRouter
  ``reasoning_details`` a Chat client handed back (``carry.OPENROUTER_TAG``) -> one block per entry in
  Anthropic's format (``reasoning.text`` with its signature -> ``thinking``, ``reasoning.encrypted`` ->
  ``redacted_thinking``); anything else has no valid signature, is dropped and recorded
  (``thinking_without_signature``).
* A ``data:`` URL image/document becomes a base64 source; a ``text/*`` file becomes a text document.
* Custom (freeform) tool calls carry their raw input as ``{"input": <string>}``.
* Tool call ids from other providers (Kimi's ``functions.get_weather:0``, MCP-derived ids with ``.``/``:``/``/``)
  break the API's ``^[a-zA-Z0-9_-]+$`` rule: such an id becomes its valid characters plus a short hash of the
  original (``tool_id``), the same on the ``tool_use`` and its ``tool_result``, so the pair stays matched and
  two ids never collide. Valid ids pass untouched.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

import orjson

from dragoman.ir import carry
from dragoman.ir import openrouter
from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Part
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.ir.search import WebSearchPart
from dragoman.protocols._data_url import split_data_url
from dragoman.protocols.anthropic_messages import search
from dragoman.protocols.base import Context

_TOOL_ID_OK = re.compile(r"[a-zA-Z0-9_-]+")
_TOOL_ID_BAD = re.compile(r"[^a-zA-Z0-9_-]")


def tool_id(raw: str) -> str:
    """A tool call id the API accepts: ``raw`` when valid, else its valid characters + a hash of ``raw``."""
    if _TOOL_ID_OK.fullmatch(raw):
        return raw
    digest = hashlib.blake2s(raw.encode(), digest_size=5).hexdigest()
    return f"{_TOOL_ID_BAD.sub('_', raw)}_{digest}"


def tool_input(part: ToolCallPart, ctx: Context) -> dict[str, Any]:
    """A tool call's arguments as the ``input`` object of a ``tool_use`` block."""
    if part.kind == "custom":
        return {CUSTOM_TOOL_PARAM: part.arguments}
    try:
        obj = orjson.loads(part.arguments) if part.arguments else {}
    except orjson.JSONDecodeError:
        ctx.dropped.add("tool_use.input(invalid_json)")
        return {}
    if not isinstance(obj, dict):
        ctx.dropped.add("tool_use.input(not_an_object)")
        return {}
    return obj


def _base64_source(url: str) -> dict[str, Any] | None:
    """A base64 ``data:`` URL -> a base64 source; None for any other URL."""
    split = split_data_url(url)
    if split is None:
        return None
    return {"type": "base64", "media_type": split[0] or "application/octet-stream", "data": split[1]}


def _image_block(p: ImagePart, ctx: Context) -> dict[str, Any] | None:
    if p.data is not None:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": p.media_type or "image/png", "data": p.data},
        }
    if p.url:
        return {"type": "image", "source": _base64_source(p.url) or {"type": "url", "url": p.url}}
    if p.file_id:
        return {"type": "image", "source": {"type": "file", "file_id": p.file_id}}
    ctx.dropped.add("image(empty)")
    return None


def _document_source(p: FilePart, ctx: Context) -> dict[str, Any] | None:
    if p.data is not None:
        media = p.media_type or "application/pdf"
        if not media.startswith("text/"):
            return {"type": "base64", "media_type": media, "data": p.data}
        try:
            text = base64.b64decode(p.data).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            ctx.dropped.add("document(undecodable)")
            return None
        return {"type": "text", "media_type": "text/plain", "data": text}
    if p.url:
        return _base64_source(p.url) or {"type": "url", "url": p.url}
    if p.file_id:
        return {"type": "file", "file_id": p.file_id}
    ctx.dropped.add("document(empty)")
    return None


def _document_block(p: FilePart, ctx: Context) -> dict[str, Any] | None:
    source = _document_source(p, ctx)
    if source is None:
        return None
    block: dict[str, Any] = {"type": "document", "source": source}
    if p.filename:
        block["title"] = p.filename
    return block


def _thinking_block(p: ThinkingPart, ctx: Context) -> dict[str, Any] | None:
    if p.redacted_data:
        return {"type": "redacted_thinking", "data": p.redacted_data}
    if p.signature and not carry.is_carried(p.signature):
        return {"type": "thinking", "thinking": p.text, "signature": p.signature}
    carried = carry.unwrap_anthropic(p.encrypted_content)
    if carried is not None:
        if carried.get("redacted"):
            return {"type": "redacted_thinking", "data": carried["redacted"]}
        if carried.get("sig"):
            return {"type": "thinking", "thinking": carried.get("text", ""), "signature": carried["sig"]}
    ctx.dropped.add("thinking_without_signature")
    return None


def _openrouter_blocks(p: ThinkingPart, ctx: Context) -> list[dict[str, Any]] | None:
    """The Anthropic blocks in the OpenRouter entries a thinking signature carries (None: it carries none).
    An entry is sent only when its ``format`` says Anthropic made it; the others are dropped and named."""
    restored = openrouter.restore(p.signature, p.text, ctx.dropped)
    if restored is None:
        return None
    blocks: list[dict[str, Any]] = []
    for e in restored[0]:
        kind, sig, data = e.get("type"), e.get("signature"), e.get("data")
        anthropic = e.get("format") == openrouter.ANTHROPIC_FORMAT
        if anthropic and kind == "reasoning.text" and isinstance(sig, str) and sig and not carry.is_carried(sig):
            text = e.get("text")
            blocks.append({"type": "thinking", "thinking": text if isinstance(text, str) else "", "signature": sig})
        elif anthropic and kind == "reasoning.encrypted" and isinstance(data, str) and data:
            blocks.append({"type": "redacted_thinking", "data": data})
        else:  # another provider's entry, or one without Claude's signature
            ctx.dropped.add("thinking_without_signature")
    if not restored[0]:
        ctx.dropped.add("thinking_without_signature")
    return blocks


def _tool_result_block(p: ToolResultPart, ctx: Context) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id(p.tool_call_id)}
    content = [b for b in (part_block(c, ctx) for c in p.content) if b is not None]
    if content:
        block["content"] = content
    if p.is_error:
        block["is_error"] = True
    return block


def part_blocks(p: Part, ctx: Context) -> list[dict[str, Any]]:
    """One IR part -> its content blocks: one, or none, except for thinking a Chat client handed back as
    several OpenRouter entries."""
    if type(p) is WebSearchPart:
        return search.history_blocks(p, ctx)
    if type(p) is TextPart and p.citations:
        b = search.history_text_block(p, ctx)
        return [] if b is None else [b]
    if type(p) is ThinkingPart and carry.is_openrouter(p.signature) and not p.redacted_data:
        blocks = _openrouter_blocks(p, ctx)
        if blocks is not None:
            return blocks
    b = part_block(p, ctx)
    return [] if b is None else [b]


def part_block(p: Part, ctx: Context) -> dict[str, Any] | None:
    """One IR part -> its content block; None (recorded in ``ctx.dropped`` when lost) for nothing to send."""
    if type(p) is TextPart or type(p) is RefusalPart:
        return {"type": "text", "text": p.text} if p.text else None
    if type(p) is ImagePart:
        return _image_block(p, ctx)
    if type(p) is FilePart:
        return _document_block(p, ctx)
    if type(p) is ThinkingPart:
        return _thinking_block(p, ctx)
    if type(p) is ToolCallPart:
        return {"type": "tool_use", "id": tool_id(p.id), "name": p.name, "input": tool_input(p, ctx)}
    if type(p) is ToolResultPart:
        return _tool_result_block(p, ctx)
    ctx.dropped.add(type(p).__name__)
    return None
