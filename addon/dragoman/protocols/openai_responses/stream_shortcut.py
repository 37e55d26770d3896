"""The Responses decoder's shortcut (``StreamDecoder.shortcut``): its plain deltas learnt as frames, read unparsed.

A Responses stream is mostly one ``*.delta`` event over and over for one item: ``response.output_text.delta``
(a message's first part), ``response.reasoning_summary_text.delta`` and
``response.function_call_arguments.delta``, each frame the same but for the string, the padding
(``obfuscation``) and the ``sequence_number`` (``protocols._shape`` slots: no decoder reads either). After
a whole frame missed the shortcut, the next such delta ``feed`` decodes as nothing but that delta of an
open item learns its frame (``learn``); ``shortcut`` then takes a frame of that shape while the item and
its block are still the ones learnt and open, writes it through the encoder's ``literal`` and does what
``feed`` does for the delta: the characters emitted (the ``.done`` events' check), a call's fragment kept
for the arguments check and its CRC. A summary delta's IR event carries ``summary=True``, which no encoder
reads: ``literal`` writes it as a thinking delta. A frame it does not take goes through ``feed``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import orjson

from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.protocols._shape import learn as cut
from dragoman.protocols.base import Literal
from dragoman.protocols.openai_responses.stream_decode_items import ARGS_CRC
from dragoman.protocols.openai_responses.stream_decode_items import ARGS_KEY
from dragoman.protocols.openai_responses.stream_decode_items import Block
from dragoman.protocols.openai_responses.stream_decode_items import Item
from dragoman.protocols.openai_responses.stream_decode_items import ItemKind
from dragoman.protocols.openai_responses.stream_decode_items import Phase
from dragoman.sse.events import SSEEvent

#: the decoder these functions serve (its attributes are set in its ``__init__``); typed loosely, as it imports
#: this module (an import back would be a circle)
ResponsesStreamDecoder = Any

#: tries per stream spent in vain (no shape cut, or an item's own shape missed one of its deltas)
LEARNS = 32
#: the learnt frames kept (one per item streaming; items come one after another)
_KEEP = 3
_STREAMING = Phase.STREAMING
_loads = orjson.loads
#: delta event type -> (IR delta, the item kind it needs)
_KINDS: dict[str, tuple[type, ItemKind]] = {
    "response.output_text.delta": (TextDelta, ItemKind.MESSAGE),
    "response.reasoning_summary_text.delta": (ThinkingDelta, ItemKind.REASONING),
    "response.function_call_arguments.delta": (ToolArgsDelta, ItemKind.FUNCTION),
}
_KEY = b'"delta":'

#: one learnt frame: its shape, IR delta, item id, item, block, and the ``emitted`` key it counts (None: args)
Learnt = tuple[Any, type, str, Item, Block, "tuple[str, int] | None"]


def shortcut(dec: ResponsesStreamDecoder, raw: bytes, literal: Literal) -> bytes | None:
    """``ResponsesStreamDecoder.shortcut``: a whole frame that is a learnt delta of its open item again."""
    if dec.phase is _STREAMING:
        for shape, cls, item_id, st, b, key in dec._learnt:
            tok = shape.match(raw)
            if tok is None:
                continue
            # what ``feed`` checks: the item is the one learnt, its block still open (and a summary part started)
            if dec._items.get(item_id) is not st or not b.open or (key is not None and key not in b.emitted):
                break
            out = literal(cls, b.index, tok)
            if out is not None:
                keep = _keeper(dec, b, key)
                keep(tok)
                dec.repeat = (shape, cls, b.index, keep)  # the same frame again only does ``keep``
            return out
    if raw[-2:] == b"\n\n":  # a whole frame (not the start of one split across reads): learn again
        dec._missed = True
    return None


def _keeper(dec: ResponsesStreamDecoder, b: Block, key: tuple[str, int] | None) -> Callable[[bytes], None]:
    """What taking a delta of block ``b`` does with its token (``feed`` does it too): the characters emitted
    counted (``key``: the part; None: a call's arguments, whose fragment is also kept with its CRC)."""
    emitted = b.emitted
    if key is not None:

        def keep_text(tok: bytes) -> None:
            text = tok[1:-1].decode() if 92 not in tok else _loads(tok)
            emitted[key] = emitted.get(key, 0) + len(text)

        return keep_text
    add = dec._args.add
    index = b.index

    def keep_args(tok: bytes) -> None:  # what ``_delta`` does with a call's fragment
        text = tok[1:-1].decode() if 92 not in tok else _loads(tok)
        emitted[ARGS_KEY] = emitted.get(ARGS_KEY, 0) + len(text)
        emitted[ARGS_CRC] = zlib.crc32(text.encode(), emitted.get(ARGS_CRC, 0))
        add(index, text)

    return keep_args


def learn(dec: ResponsesStreamDecoder, ev: SSEEvent, obj: dict[str, Any], t: str, delta: Any) -> None:
    """After ``feed`` decoded ``ev`` (parsed: ``obj``, of type ``t``) as nothing but ``delta`` of an open item
    while streaming: cut its frame."""
    dec._missed = False
    kinds = _KINDS.get(t)
    if kinds is None or delta.__class__ is not kinds[0] or not dec._learns or obj.get("logprobs"):
        return
    ir: Any = delta  # one of the three deltas (mypy narrows ``delta`` to ``object`` above)
    item_id = obj.get("item_id")
    st = dec._items.get(item_id) if type(item_id) is str else None
    if st is None or st.kind is not kinds[1]:
        return
    if t == "response.output_text.delta":
        if obj.get("content_index"):
            return
        b, key = st.parts.get(0), ("text", 0)
    elif t == "response.reasoning_summary_text.delta":
        si = obj.get("summary_index") or 0
        b, key = st.block, ("summary", si)
    else:
        b, key = st.block, None
    if b is None or not b.open or b.index != ir.index or type(item_id) is not str:
        return
    text = ir.fragment if kinds[0] is ToolArgsDelta else ir.text
    pad = obj.get("obfuscation")
    seq = obj.get("sequence_number")
    event = b"event: " + ev.event.encode() + b"\n" if ev.event else b""
    shape = cut(
        ev.data, _KEY, text, pad if pad.__class__ is str else None, event, seq if seq.__class__ is int else None
    )
    old = [x for x in dec._learnt if x[3] is st and x[4] is b and x[5] == key]
    if shape is None or old:  # in vain: not cut, or this item's own frame missed
        dec._learns -= 1
    if shape is not None:
        keep = [x for x in dec._learnt if x[4].open and x not in old]
        dec._learnt = [*keep[-(_KEEP - 1) :], (shape, kinds[0], item_id, st, b, key)]
