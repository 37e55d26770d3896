"""The Responses stream encoder's search half (``SearchItems``, between ``ItemFraming`` and
``ResponsesStreamEncoder``): a ``WebSearch`` as a ``web_search_call`` item (held like any item while another is
on the wire), a ``CitationDelta`` as a ``url_citation`` annotation of its message (``annotation.added``), and
consecutive text blocks joined into one message while search is in play (an Anthropic upstream sends each cited
span as a block of its own: ``_linger`` keeps the message open until the next event shows whether text
continues it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from dragoman.errors import UpstreamProtocolError
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import CitationDelta
from dragoman.ir.events import WebSearch
from dragoman.protocols.openai_responses import search
from dragoman.protocols.openai_responses.stream_encode_items import ItemFraming
from dragoman.protocols.openai_responses.stream_encode_items import OutItem


class SearchItems(ItemFraming):
    phase: Any
    _blocks: dict[int, OutItem]
    _live: OutItem | None
    _held: deque[OutItem]
    #: the message item whose text block stopped, kept open for the next text block (search in play)
    _linger: OutItem | None
    #: where each joined text block starts in its message's text (citation offsets)
    _base: dict[int, int]
    _release: Callable[[], bytes]
    _mint: Callable[[str, str | None], str]

    def _rejoin(self, ev: BlockStart) -> bytes:
        """The next text block continues the lingering message."""
        b = self._linger
        assert b is not None
        if ev.index in self._blocks:
            raise UpstreamProtocolError(f"duplicate BlockStart for block {ev.index} (phase {self.phase.value})")
        self._linger = None
        b.open = True
        self._base[ev.index] = sum(len(c) for c in b.chunks)
        self._blocks[ev.index] = b
        return b""

    def _close_linger(self) -> bytes:
        b = self._linger
        assert b is not None
        self._linger = None
        self._live = None
        return self._block_stop(b) + self._release()

    def _search(self, ev: WebSearch) -> bytes:
        oi = len(self._output)
        b = OutItem(BlockKind.TEXT, oi, self._mint("ws", search.item_id(ev.search)))
        b.search = ev.search
        b.open = False
        self._output.append(None)
        if self._live is not None:
            b.held = True
            self._held.append(b)
            return b""
        return self._replay(b) + self._block_stop(b)

    def _citation(self, ev: CitationDelta) -> bytes:
        b = self._block(ev.index, "CitationDelta")
        if b.kind is not BlockKind.TEXT:
            self.ctx.dropped.add("citations")
            return b""
        base = self._base.get(ev.index, 0)
        a = search.annotation(ev.citation, base, sum(len(c) for c in b.chunks) - base)
        b.annotations.append(a)
        return b"" if b.held else self._annotation_ev(b, len(b.annotations) - 1, a)
