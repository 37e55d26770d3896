"""Gemini's thought signatures on Chat tool calls: carried in a thinking signature, restored on the calls.

Gemini's OpenAI-compatible endpoint (``generativelanguage.googleapis.com/v1beta/openai/``) gives thinking
models' tool calls an opaque ``extra_content: {"google": {"thought_signature": "<base64>"}}``, on the
message's ``tool_calls[i]`` and on the streamed ``delta.tool_calls[i]`` (ai.google.dev/gemini-api/docs/
thought-signatures, "OpenAI compatibility"). Of parallel calls only the first is signed; each step's first
call must come back with its signature exactly as received, or Gemini 3 answers the next request with 400.

Decoding, a signed call is preceded by a thinking block whose signature is ``carry.wrap_gemini({call id:
signature})``: the reasoning block right before the call when it has no signature of its own, else an empty
one. Streamed, the signature usually arrives on the call's first delta, so the block comes before the call's
block; one arriving on a later delta of the call gets its block then (an Anthropic client sees it after the
open tool block). An Anthropic or Responses client keeps it as a thinking signature / ``encrypted_content``
and hands it back; ``sign_calls`` then puts each signature back on its call (by id) for the Chat upstream.
Nothing is added where nothing was carried (OpenAI rejects unknown fields); an Anthropic upstream never
gets the value (``content_encode`` drops carried values that are not Anthropic's).

A Chat CLIENT gets these signatures (from a Chat upstream or a Gemini-native one, whose ``thoughtSignature``
on a ``functionCall`` part the Gemini decoders carry the same way) exactly as Google's compat layer gives
them: ``extra_content.google.thought_signature`` on the signed call, in the whole message and on the call's
first stream delta (on a later delta of the call when the signature arrives after it started). Its next
request hands them back on the assistant message's calls, which the request decoder reads into the same
carrier (``sign_parts``), so a Gemini upstream gets each on its ``functionCall`` part and a Chat upstream on
its call. A signature not keyed by a call id (Gemini's on a text part) has no place in Chat and is named
dropped (``thinking_signature``), as every other signature a Chat client cannot keep.

Thought summaries (``include_thoughts``, asked by the ``gemini`` profile): streamed as ``content`` deltas
flagged ``extra_content: {"google": {"thought": true}}``, the first one opening with ``<thought>``; the first
unflagged content after them starts with ``</thought>`` (shape from a Gemini log quoted in a public client's
test, ``delta.content "<thought>Okay, ..."`` ... ``"</thought>"`` beside the signed tool call). With the
profile on, flagged content is thinking and the tags are removed; a whole reply's content that starts with
``<thought>`` is split the same way (``split_thought``).
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import Protocol
from typing import TypeVar

from dragoman.ir import carry
from dragoman.ir.common import Dropped
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import StreamEvent
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import OutputPart

if TYPE_CHECKING:
    from dragoman.protocols.openai_chat.models import ToolCall


class ToolSlot(Protocol):
    """What the stream helpers below read and set on the Chat stream decoder's slot for one tool call."""

    id: str
    signed: bool


Slot = TypeVar("Slot", bound=ToolSlot)


class ChatBlocks(Protocol):
    """The block tracking of the Chat stream decoder that the Gemini helpers drive (structural, so this
    module never imports the decoder that imports it)."""

    in_thought: bool
    _cur: int
    _cur_kind: BlockKind | None
    _rd: Any

    def _switch(self, kind: BlockKind, out: list[StreamEvent]) -> int: ...
    def _close_current(self, out: list[StreamEvent]) -> None: ...
    def _new_block(self) -> int: ...
    def _tool_start(self, tc: dict[str, Any], key: int, name: str | None, out: list[StreamEvent]) -> Any: ...


#: what ``ctx.dropped`` names when a carried signature's tool call is not in the request
DROPPED = "tool_calls.extra_content.google.thought_signature"
THOUGHT_OPEN = "<thought>"
THOUGHT_CLOSE = "</thought>"


def thought_signature(tc: Any) -> str | None:
    """A Chat tool call's (or tool call delta's) ``extra_content.google.thought_signature``, or None."""
    if not isinstance(tc, dict):
        return None
    ec = tc.get("extra_content")
    google = ec.get("google") if isinstance(ec, dict) else None
    sig = google.get("thought_signature") if isinstance(google, dict) else None
    return sig if isinstance(sig, str) and sig else None


def extra_content(signature: str) -> dict[str, Any]:
    return {"google": {"thought_signature": signature}}


# ---------------------------------------------------------------- decoding


def is_thought(obj: dict[str, Any]) -> bool:
    """A delta flagged ``extra_content.google.thought``."""
    ec = obj.get("extra_content")
    google = ec.get("google") if isinstance(ec, dict) else None
    return isinstance(google, dict) and google.get("thought") is True


def thought(dec: ChatBlocks, delta: dict[str, Any], c: Any, out: list[StreamEvent]) -> Any:
    """A delta's content: a flagged thought becomes thinking text without its tags (None is returned); other
    content loses the ``</thought>`` that closes a thought and is returned to be decoded as text."""
    if isinstance(c, str) and is_thought(delta):
        text = c
        if not dec.in_thought and text.startswith(THOUGHT_OPEN):
            text = text[len(THOUGHT_OPEN) :]
        dec.in_thought = True
        if text.endswith(THOUGHT_CLOSE):
            text, dec.in_thought = text[: -len(THOUGHT_CLOSE)], False
        if text:
            out.append(ThinkingDelta(dec._switch(BlockKind.THINKING, out), text))
        return None
    if isinstance(c, str) and c:
        return after_thought(dec, c)
    return c


def after_thought(dec: ChatBlocks, c: str) -> str:
    """Text content: the first after a thought loses its leading ``</thought>``."""
    if dec.in_thought:
        dec.in_thought = False
        if c.startswith(THOUGHT_CLOSE):
            return c[len(THOUGHT_CLOSE) :]
    return c


def split_thought(content: str) -> tuple[str | None, str]:
    """A whole reply's content -> (thought summary or None, the answer text)."""
    if content.startswith(THOUGHT_OPEN):
        end = content.find(THOUGHT_CLOSE)
        if end >= 0:
            return content[len(THOUGHT_OPEN) : end], content[end + len(THOUGHT_CLOSE) :]
    return None, content


def stream_signature(
    dec: ChatBlocks, tc: dict[str, Any], key: int, slot: Slot | None, out: list[StreamEvent]
) -> Slot | None:
    """A tool call delta's signature -> the thinking block carrying it, before the call's block when the call
    starts here (then started here too); the call's slot. Only a call's first signature counts."""
    sig = thought_signature(tc)
    if sig is None or (slot is not None and slot.signed):
        return slot
    tid = slot.id if slot is not None else tc.get("id") or f"call_{key}"
    value = carry.wrap_gemini({str(tid): sig})
    if slot is None and dec._cur_kind is BlockKind.THINKING and dec._rd is None:  # the reasoning before the call
        out.append(SignatureDelta(dec._cur, signature=value))
    else:
        dec._close_current(out)
        idx = dec._new_block()
        out += (BlockStart(idx, BlockKind.THINKING), SignatureDelta(idx, signature=value), BlockStop(idx))
    if slot is None:
        fn = tc.get("function")
        slot = dec._tool_start(tc, key, fn.get("name") if isinstance(fn, dict) else None, out)
    slot.signed = True
    return slot


def sign_parts(content: Sequence[Any], wire: list[ToolCall] | None, calls: list[ToolCallPart]) -> list[OutputPart]:
    """A whole message's tool call parts (an upstream's answer, or a Chat client's assistant message in its
    history), each signed one preceded by its carrying thinking part as the stream decoder makes it (the
    reasoning part right before the first call, when unsigned, carries it instead)."""
    out: list[OutputPart] = []
    wire = wire or []
    for i, part in enumerate(calls):  # one part per wire call, then a legacy function_call
        sig = thought_signature(wire[i].model_extra) if i < len(wire) else None
        if sig is not None:
            value = carry.wrap_gemini({part.id: sig})
            last = out[-1] if out else content[-1] if content else None
            if not out and isinstance(last, ThinkingPart) and last.signature is None:
                last.signature = value
            else:
                out.append(ThinkingPart(signature=value))
        out.append(part)
    return out


# ---------------------------------------------------------------- encoding (toward a Chat upstream)


def restore(signature: str | None, into: dict[str, str]) -> bool:
    """Add the signatures a thinking signature carries to ``into``; False when it is not ours."""
    sigs = carry.unwrap_gemini(signature)
    if sigs is None:
        return False
    into.update(sigs)
    return True


def sign_tool_calls(calls: Iterable[dict[str, Any]], sigs: dict[str, str]) -> None:
    """Put the signature of each call (by id) on it, taking it out of ``sigs``."""
    for c in calls:
        sig = sigs.pop(c["id"], None)
        if sig is not None:
            c["extra_content"] = extra_content(sig)


def sign_calls(messages: list[dict[str, Any]], sigs: dict[str, str], dropped: Dropped) -> None:
    """Put each carried signature on its assistant tool call (by id); one whose call is gone is named."""
    if not sigs:
        return
    for m in messages:
        if m.get("role") == "assistant":
            sign_tool_calls(m.get("tool_calls") or (), sigs)
    if sigs:
        dropped.add(DROPPED)


# ---------------------------------------------------------------- encoding (toward a Chat client)


def late_signature(tindex: int, signature: str) -> dict[str, Any]:
    """The stream delta giving an already started call (Chat index ``tindex``) its signature (with an empty
    arguments piece: the official SDK's accumulator requires ``function`` on every delta of a function call)."""
    return {"tool_calls": [{"index": tindex, "function": {"arguments": ""}, "extra_content": extra_content(signature)}]}
