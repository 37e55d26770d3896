"""The Chat decoder's shortcut (``StreamDecoder.shortcut``): its plain deltas learnt as frames, read again unparsed.

A Chat stream is mostly one chunk over and over with another string: a text delta, a ``reasoning_content``
delta (DeepSeek, vLLM) or one call's arguments delta, each with the same id, model and (OpenAI) padding.
``ChatStreamDecoder.feed`` calls ``learn`` after decoding such a chunk the usual way as nothing but that
delta of an open block; ``shortcut`` then takes a frame that is the learnt one with another string
(``protocols._shape``) while the decoder is in the state it learnt in (the open text / thinking block; a
function call still open) and writes it through the encoder's ``literal``, doing what ``feed`` does for that
delta (a call's fragment joins its arguments, checked at the end). A frame it does not take goes through
``feed`` with nothing changed. Learning spends one of ``LEARNS`` tries per stream: once per shape, again only
after a whole frame missed every shape, so a stream whose frames never match soon stops trying.
"""

from __future__ import annotations

from typing import Any

from dragoman.ir.events import BlockKind
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.protocols._checks import add_token
from dragoman.protocols._shape import learn as cut
from dragoman.protocols.base import Literal
from dragoman.sse.events import SSEEvent

#: the decoder these functions serve (its attributes are set in its ``__init__``); typed loosely, as it imports
#: this module (an import back would be a circle)
ChatStreamDecoder = Any

#: tries per stream (``learn``)
LEARNS = 32
_TEXT = BlockKind.TEXT
_THINKING = BlockKind.THINKING
#: the ``learnt`` kind ``feed`` passes for a call's arguments delta
ARGS = BlockKind.TOOL_CALL
_KEYS = {_TEXT: b'"content":', _THINKING: b'"reasoning_content":', ARGS: b'"arguments":'}


def shortcut(dec: ChatStreamDecoder, raw: bytes, literal: Literal) -> bytes | None:
    """``ChatStreamDecoder.shortcut``: a whole frame that is a learnt delta again."""
    if dec.phase is not dec.STREAMING:
        return None
    kind = dec._cur_kind
    if kind is not None:
        shape = dec._shapes.get(kind)
        if shape is not None:
            tok = shape.match(raw)
            if tok is not None:
                cls = TextDelta if kind is _TEXT else ThinkingDelta
                dec.repeat = (shape, cls, dec._cur, None)  # nothing of the decoder changes: it may be repeated
                return literal(cls, dec._cur, tok)
    for shape, slot in dec._calls:
        tok = shape.match(raw)
        if tok is not None:
            # the fragment joins the call's arguments: what a repeat of this frame does too (parallel calls
            # whose frames alternate end each other's repeat: each frame then takes this way)
            dec.repeat = (shape, ToolArgsDelta, slot.block, slot.args)
            out = literal(ToolArgsDelta, slot.block, tok)
            if out is None:  # the client's encoder holds this call (one open at a time): never again
                dec._calls = [(s, sl) for s, sl in dec._calls if sl is not slot]
                dec._held.add(slot)
                return None
            add_token(slot.args, tok)  # what ``_tool_delta`` does with the fragment
            return out
    if raw[-2:] == b"\n\n":  # a whole frame (not the start of one split across reads): learn again
        dec._missed = True
    return None


def learn(dec: ChatStreamDecoder, ev: SSEEvent, obj: dict[str, Any], kind: BlockKind, delta: Any) -> None:
    """After ``feed`` decoded ``ev`` as nothing but ``delta`` (one text / thinking delta of the open block, or
    one call's arguments delta: ``kind``), with no usage and no finish, after a whole frame missed every shape
    (``shortcut`` sets ``_missed``; never where the translator does not call it): cut its frame."""
    if ev.event is not None or len(obj["choices"]) != 1:
        return
    if kind is ARGS:
        if type(delta) is not ToolArgsDelta:  # the call's start
            return
        tc = obj["choices"][0]["delta"]["tool_calls"][0]
        key = tc.get("index")
        slot = dec._tools.get(key if type(key) is int else 0)
        if slot is None or slot.custom or slot.block != delta.index or "extra_content" in tc or slot in dec._held:
            return
        old = next((s for s, sl in dec._calls if sl is slot), None)
        text = delta.fragment
    else:
        slot = None
        old = dec._shapes.get(kind)
        text = delta.text
    dec._missed = False
    pad = obj.get("obfuscation")  # OpenAI's padding, the chunk's last member
    if pad.__class__ is not str or next(reversed(obj)) != "obfuscation":
        pad = None
    shape = cut(ev.data, _KEYS[kind], text, pad)
    if shape is None or shape != old:  # the same frame again costs no try
        dec._learns -= 1
    if shape is None:
        return
    if slot is None:
        dec._shapes[kind] = shape
    else:
        dec._calls = [(s, sl) for s, sl in dec._calls if sl is not slot] + [(shape, slot)]
