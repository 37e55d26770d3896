"""Where stored responses go: ``open_store(spec)`` gives a ``ResponseStore`` backed by SQLite (default, one
file per machine: a ``0600`` file in WAL mode) or Redis (shared by several Dragoman instances). The spec
reads as the usage ledger's (a path, ``sqlite://PATH``, ``redis://``/``rediss://``/``unix://``).

Unlike the ledger, the store is written before the client sees the end of the answer (a client may send
the next turn at once, to another instance): ``put`` is synchronous. Measured by ``make bench``
(``bench/responses_state.py``). Every record expires after ``ttl`` seconds; past ``max_bytes`` of records
the oldest go first.
"""

from __future__ import annotations

from abc import ABC
from abc import abstractmethod

from dragoman.state.record import StoredResponse

DEFAULT_STORE = "~/.dragoman/responses.sqlite3"
DEFAULT_TTL = 30 * 86400  # the API's own retention
DEFAULT_MAX_BYTES = 1 << 30


class StoreError(Exception):
    """The store cannot be opened, read or written. The message is safe to show (no password)."""


class ResponseStore(ABC):
    """Records by response id. ``get`` answers None for an unknown, expired or someone else's id."""

    def __init__(self, ttl: float = DEFAULT_TTL, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if ttl <= 0 or max_bytes <= 0:
            raise StoreError("the response store needs a TTL and a size cap above 0")
        self.ttl = ttl
        self.max_bytes = max_bytes

    @abstractmethod
    def put(self, rec: StoredResponse) -> None:
        """Store ``rec`` (replacing a record of the same id), then evict the oldest past ``max_bytes``."""

    @abstractmethod
    def _get_many(self, ids: list[str]) -> list[bytes | None]:
        """The serialized records of ``ids`` (None for missing or expired), in order."""

    @abstractmethod
    def _delete(self, rid: str) -> None: ...

    @abstractmethod
    def describe(self) -> str:
        """Where the store is, fit to print (a Redis password masked)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store. Idempotent."""

    def get_many(self, ids: list[str], owner: str) -> list[StoredResponse | None]:
        out: list[StoredResponse | None] = []
        for raw in self._get_many(ids) if ids else []:
            rec = StoredResponse.loads(raw) if raw is not None else None
            out.append(rec if rec is not None and rec.owner == owner else None)
        return out

    def get(self, rid: str, owner: str) -> StoredResponse | None:
        return self.get_many([rid], owner)[0]

    def delete(self, rid: str, owner: str) -> bool:
        """Forget ``rid``; False when ``owner`` has no such record."""
        if self.get(rid, owner) is None:
            return False
        self._delete(rid)
        return True

    def chain(self, rid: str, owner: str) -> list[StoredResponse] | None:
        """The records a continuation of ``rid`` expands to, oldest first; None when ``rid`` or any record
        before it is unknown, expired or someone else's (the conversation cannot be rebuilt whole)."""
        last = self.get(rid, owner)
        if last is None:
            return None
        if not last.chain:
            return [last]
        before = self.get_many(last.chain, owner)
        if any(r is None for r in before):
            return None
        return [r for r in before if r is not None] + [last]

    def __enter__(self) -> ResponseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
