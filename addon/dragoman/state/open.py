"""``open_store(spec)``: the response store a spec names (beside the backends, so none imports the factory)."""

from __future__ import annotations

from typing import Any

from dragoman.ledger.store import redact_url
from dragoman.state.redis import RedisStore
from dragoman.state.sqlite import SQLiteStore
from dragoman.state.store import DEFAULT_MAX_BYTES
from dragoman.state.store import DEFAULT_STORE
from dragoman.state.store import DEFAULT_TTL
from dragoman.state.store import ResponseStore
from dragoman.state.store import StoreError


def open_store(
    spec: str | None = None, *, ttl: float = DEFAULT_TTL, max_bytes: int = DEFAULT_MAX_BYTES, **options: Any
) -> ResponseStore:
    """The store ``spec`` names (a path, ``~`` expanded; ``sqlite://PATH``; a Redis URL). Raises ``StoreError``."""
    spec = (spec or "").strip() or DEFAULT_STORE
    scheme = spec.partition("://")[0].lower() if "://" in spec else ""
    if scheme in ("redis", "rediss", "unix"):
        return RedisStore(spec, ttl=ttl, max_bytes=max_bytes, **options)
    if scheme == "sqlite":
        path = spec[len("sqlite://") :]
        if not path:
            raise StoreError(f"response store {spec!r}: sqlite:// needs a path (sqlite:///path/responses.sqlite3)")
        return SQLiteStore(path, ttl=ttl, max_bytes=max_bytes)
    if scheme:
        raise StoreError(
            f"response store {redact_url(spec)!r}: unknown scheme {scheme}:// (a file path, sqlite://PATH or redis://...)"
        )
    return SQLiteStore(spec, ttl=ttl, max_bytes=max_bytes)
