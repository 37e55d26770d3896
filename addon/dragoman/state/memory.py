"""An in-memory response store: the state one WebSocket connection keeps for itself (the Responses API
continues ``store: false`` responses within the connection that created them; Codex sends only the new
items with ``previous_response_id`` there). Bounded by ``max_bytes``, oldest first; gone with the connection."""

from __future__ import annotations

import time
from collections import OrderedDict

from dragoman.state.record import StoredResponse
from dragoman.state.store import ResponseStore

DEFAULT_MEMORY_BYTES = 64 << 20


class MemoryStore(ResponseStore):
    def __init__(self, ttl: float = 86400.0, max_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
        super().__init__(ttl, max_bytes)
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._total = 0

    def describe(self) -> str:
        return "memory"

    def put(self, rec: StoredResponse) -> None:
        self._delete(rec.id)
        body = rec.dumps()
        self._items[rec.id] = (rec.created + self.ttl, body)
        self._total += len(body)
        while self._total > self.max_bytes and self._items:
            _, (_, old) = self._items.popitem(last=False)
            self._total -= len(old)

    def _get_many(self, ids: list[str]) -> list[bytes | None]:
        now = time.time()
        out: list[bytes | None] = []
        for rid in ids:
            item = self._items.get(rid)
            out.append(item[1] if item is not None and item[0] >= now else None)
        return out

    def _delete(self, rid: str) -> None:
        item = self._items.pop(rid, None)
        if item is not None:
            self._total -= len(item[1])

    def total_bytes(self) -> int:
        return self._total

    def close(self) -> None:
        self._items.clear()
        self._total = 0
