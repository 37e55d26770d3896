"""The Anthropic stream decoder's shortcut (``LearntDeltas``): a plain delta's frame learnt, read again unparsed.

Claude streams one block at a time, each mostly one ``content_block_delta`` over and over (``text_delta``,
``thinking_delta``, ``input_json_delta``), its frame the same but for the string and the spaces Claude pads
it with. The first plain delta of a block that ``feed`` decodes after a frame missed the shortcut learns
its frame (``protocols._shape``, the ``event:`` line included); a later frame of that shape, its block
still open as the same kind, goes to the encoder's ``literal`` without a parse. What ``feed`` would have
done for it is done here too: a tool call's fragment is kept for the arguments check at ``message_delta``.
A text block that turned cited (``citations_delta``) is another kind: its deltas take ``feed`` (it counts
their text for the citations' spans).
"""

from __future__ import annotations

from typing import Any

import orjson

from dragoman.ir.events import ToolArgsDelta
from dragoman.protocols._checks import ToolArgs
from dragoman.protocols._shape import Shape
from dragoman.protocols._shape import learn
from dragoman.protocols.base import Literal
from dragoman.protocols.base import Repeat
from dragoman.sse.events import SSEEvent

_loads = orjson.loads
#: how many times a stream may learn a frame in vain (no shape cut, or a block's own shape missed one of its
#: deltas); a new block's first delta learns its frame without counting
_LEARNS = 32


class LearntDeltas:
    """``shortcut`` and ``_learn`` for ``AnthropicStreamDecoder`` (its ``_open`` blocks and ``_args``)."""

    #: block kind -> (its plain delta's IR class, the key before the delta's string): set by the decoder
    LEARNT: dict[Any, tuple[type, bytes]]
    _open: dict[int, Any]
    _args: ToolArgs

    #: ``StreamDecoder.repeat`` (set by ``shortcut``)
    repeat: Repeat | None = None

    def __init__(self) -> None:
        #: the learnt frame of the last plain delta, its block index and kind, its IR delta class
        self._shape: Shape | None = None
        self._sidx = -1
        self._skind: Any = None
        self._scls: type = ToolArgsDelta
        #: a whole frame missed the shortcut: the next plain delta ``feed`` decodes learns its frame
        self._missed = False
        self._learns = _LEARNS

    def shortcut(self, raw: bytes, literal: Literal) -> bytes | None:
        """A whole frame that is the learnt delta of its block again, the block still open as the same kind
        (what ``feed``'s hot path checks; the shape proves the event, its index, the delta's type, its string)."""
        shape = self._shape
        if shape is not None:
            idx = self._sidx
            kind = self._skind
            if self._open.get(idx) is kind:  # blocks are open only while STREAMING
                tok = shape.match(raw)
                if tok is not None:
                    cls = self._scls
                    out = literal(cls, idx, tok)
                    if cls is ToolArgsDelta:
                        frags = self._args.fragments(idx)
                        self.repeat = (shape, cls, idx, frags) if frags is not None else None
                        if out is not None:  # kept for the check, as ``feed`` keeps it
                            self._args.add(idx, tok[1:-1].decode() if b"\\" not in tok else _loads(tok))
                    else:  # nothing of the decoder changes: the translator may repeat it
                        self.repeat = (shape, cls, idx, None)
                    return out
        if raw[-2:] == b"\n\n":  # a whole frame (not the start of one split across reads): learn again
            self._missed = True
        return None

    def _learn(self, ev: SSEEvent, idx: int, kind: Any, value: str) -> None:
        """Learn the frame of ``ev``, the plain delta ``value`` of open block ``idx`` of ``kind``."""
        self._missed = False
        if not self._learns:
            return
        name = ev.event
        event = b"event: " + name.encode() + b"\n" if name else b""
        cls, key = self.LEARNT[kind]
        shape = learn(ev.data, key, value, None, event)
        if shape is None or (idx == self._sidx and kind is self._skind):  # in vain: the block's shape missed
            self._learns -= 1
        if shape is not None:
            self._shape, self._sidx, self._skind, self._scls = shape, idx, kind, cls
