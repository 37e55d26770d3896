"""What the Anthropic stream encoder holds back: per-block state and the events of blocks not yet on the wire.

The Anthropic wire has one open block at a time; a source that interleaves blocks (Chat's parallel
tool calls) has its later blocks HELD while a tool block is open. A held block's deltas are joined into
``Run``s as they arrive (memory proportional to the text, not to the number of fragments) and replayed
as one delta each when the block reaches the wire.
"""

from __future__ import annotations

from enum import Enum

from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta

TextEvent = TextDelta | ThinkingDelta | ToolArgsDelta
#: the events of one block (a held block's buffer keeps them, deltas joined into ``Run``)
BlockEvent = TextDelta | ThinkingDelta | ToolArgsDelta | SignatureDelta | BlockStop

#: held pieces of one run joined every this many appends
_COMPACT = 256


class BlockStatus(Enum):
    PENDING = "pending"  # buffered: another (tool) block is open on the wire
    OPEN = "open"  # the block open on the wire
    SUSPENDED = "suspended"  # closed on the wire early (interrupted), not yet stopped in the IR
    DONE = "done"


class Run:
    """Consecutive buffered deltas of one type, kept as text pieces (compacted every ``_COMPACT``
    appends) instead of one IR object per fragment: a buffered tool call costs memory proportional to
    its text. Replayed as ONE delta of the joined text (the client concatenates fragments anyway)."""

    __slots__ = ("cls", "index", "parts", "limit")

    def __init__(self, cls: type[TextEvent], index: int, text: str) -> None:
        self.cls = cls
        self.index = index
        self.parts = [text]
        self.limit = _COMPACT

    def add(self, text: str) -> None:
        parts = self.parts
        parts.append(text)
        if len(parts) >= self.limit:
            start = self.limit - _COMPACT
            parts[start:] = ["".join(parts[start:])]
            self.limit = start + 1 + _COMPACT

    def event(self) -> TextEvent:
        return self.cls(self.index, "".join(self.parts))


class OutBlock:
    """One IR block as the encoder sees it: its status on the wire, its wire index, what is held for it."""

    __slots__ = (
        "kind",
        "status",
        "start",
        "buffer",
        "signature",
        "encrypted",
        "item_id",
        "wire_index",
        "prefix",
        "fast",
    )

    def __init__(self, start: BlockStart, fast: type[TextEvent] | None) -> None:
        self.kind = start.kind
        self.status = BlockStatus.PENDING
        self.start = start
        self.buffer: list[BlockEvent | Run] = []
        self.signature: str | None = None
        self.encrypted: str | None = None
        self.item_id = start.item_id
        self.wire_index = -1
        #: the bytes of a content_block_delta event up to its text value (set when opened on the wire)
        self.prefix = b""
        #: the IR delta type written from ``prefix`` while the block is open (None: never)
        self.fast = fast


def hold(b: OutBlock, ev: BlockEvent) -> None:
    """Hold ``ev`` for a block not on the wire; consecutive deltas of one type join into one ``Run``."""
    buf = b.buffer
    if isinstance(ev, ToolArgsDelta):
        text = ev.fragment
    elif isinstance(ev, (TextDelta, ThinkingDelta)):
        text = ev.text
    else:
        buf.append(ev)
        return
    t = type(ev)
    last = buf[-1] if buf else None
    if type(last) is Run and last.cls is t and last.index == ev.index:
        last.add(text)
    else:
        buf.append(Run(t, ev.index, text))
