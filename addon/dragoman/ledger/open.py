"""Choosing the ledger backend a spec names (a file path, ``sqlite://``, ``redis://``). Beside the backends, so
that the base module (``store``) never imports them back."""

from __future__ import annotations

from typing import Any

from dragoman.ledger.redis import RedisLedger
from dragoman.ledger.sqlite import SQLiteLedger
from dragoman.ledger.store import DEFAULT_LEDGER
from dragoman.ledger.store import Ledger
from dragoman.ledger.store import LedgerError
from dragoman.ledger.store import redact_url


def open_ledger(spec: str | None = None, *, readonly: bool = False, **options: Any) -> Ledger:
    """The ledger ``spec`` names: a file path (``~`` expanded; default ``~/.dragoman/usage.sqlite3``),
    ``sqlite://PATH`` (``sqlite:///var/lib/dragoman/usage.sqlite3``), or ``redis://``/``rediss://``/
    ``unix://`` URL. ``options`` go to the backend (``max_queue``, ``batch``; ``prefix`` for Redis).
    Raises ``LedgerError`` (``LedgerMissing`` for a read-only open of a missing file)."""
    spec = (spec or "").strip() or DEFAULT_LEDGER
    scheme = spec.partition("://")[0].lower() if "://" in spec else ""
    if scheme in ("redis", "rediss", "unix"):
        return RedisLedger(spec, readonly=readonly, **options)
    if scheme == "sqlite":
        path = spec[len("sqlite://") :]
        if not path:
            raise LedgerError(f"usage ledger {spec!r}: sqlite:// needs a path (sqlite:///path/usage.sqlite3)")
        return SQLiteLedger(path, readonly=readonly, **options)
    if scheme:
        raise LedgerError(
            f"usage ledger {redact_url(spec)!r}: unknown scheme {scheme}:// (a file path, sqlite://PATH or redis://...)"
        )
    return SQLiteLedger(spec, readonly=readonly, **options)
