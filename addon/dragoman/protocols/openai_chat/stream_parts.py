"""The slower deltas of a Chat stream, for ``ChatStreamDecoder``: reasoning (OpenRouter ``reasoning_details``,
``reasoning_content``, ``reasoning``) and content given as parts (text, Mistral ``thinking``)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any
from typing import Protocol

from dragoman.ir.events import BlockKind
from dragoman.ir.events import StreamEvent
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.protocols.openai_chat.gemini import ChatBlocks
from dragoman.protocols.openai_chat.reasoning_details import Details
from dragoman.protocols.openai_chat.response import mistral_thinking

if TYPE_CHECKING:
    from dragoman.protocols.base import Context


class ChatDecoderParts(ChatBlocks, Protocol):
    """What these helpers use of the Chat stream decoder (structural: this module never imports it)."""

    ctx: Context


_TEXT = BlockKind.TEXT
_THINKING = BlockKind.THINKING


def reasoning(dec: ChatDecoderParts, delta: dict[str, Any], out: list[StreamEvent]) -> None:
    """``reasoning_details`` (OpenRouter: their text, if they have a text field, is the thinking text;
    the entries become the block's signature), else ``reasoning_content`` (DeepSeek, vLLM) or ``reasoning``."""
    rd = delta.get("reasoning_details")
    if rd and isinstance(rd, list) and any(isinstance(d, dict) for d in rd):
        idx = dec._switch(_THINKING, out)
        acc = dec._rd = dec._rd or Details()
        texts = acc.feed(rd)
        out.extend(ThinkingDelta(idx, t, summary=summary) for t, summary in texts if t)
        if texts:
            return
    r = delta.get("reasoning_content") or delta.get("reasoning")
    if r and isinstance(r, str):
        out.append(ThinkingDelta(dec._switch(_THINKING, out), r))


def content(dec: ChatDecoderParts, c: Any, out: list[StreamEvent]) -> None:
    """``content``: a string, or parts (text, Mistral ``thinking``)."""
    if isinstance(c, str):
        out.append(TextDelta(dec._switch(_TEXT, out), c))
        return
    if not isinstance(c, list):
        return
    for p in c:
        if not isinstance(p, dict):
            continue
        t = p.get("type")
        if t == "text":
            text = p.get("text")
            if text:
                out.append(TextDelta(dec._switch(_TEXT, out), text))
        elif t == "thinking":
            text = mistral_thinking(p.get("thinking"))
            if text:
                out.append(ThinkingDelta(dec._switch(_THINKING, out), text))
        else:
            dec.ctx.dropped.add(f"delta.content.{t}")
