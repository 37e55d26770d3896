"""The SQLite ledger: one row per request in a WAL-mode file (the default store)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from dragoman.ledger.record import Row
from dragoman.ledger.record import UsageRecord
from dragoman.ledger.store import _TEXT_FIELDS
from dragoman.ledger.store import BATCH
from dragoman.ledger.store import MAX_QUEUE
from dragoman.ledger.store import LedgerError
from dragoman.ledger.store import LedgerMissing
from dragoman.ledger.store import QueuedLedger

_SCHEMA_VERSION = 1
_COLUMNS = (
    "ts",
    "client",
    "route",
    "upstream",
    "model",
    "client_model",
    "status",
    "error",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "estimated",
    "stream",
    "attempts",
)
_CREATE = f"""
CREATE TABLE IF NOT EXISTS usage (
    ts REAL NOT NULL,
    {", ".join(f"{c} TEXT NOT NULL" for c in _TEXT_FIELDS)},
    {", ".join(f"{c} INTEGER NOT NULL" for c in _COLUMNS[6:])}
);
CREATE INDEX IF NOT EXISTS usage_ts ON usage (ts);
"""
_INSERT = f"INSERT INTO usage ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
_SQL_GROUP = {
    "client": "client",
    "route": "route",
    "upstream": "upstream",
    "model": "model",
    "client_model": "client_model",
    "day": "strftime('%Y-%m-%d', ts, 'unixepoch')",
}
_SQL_METRICS = (
    "COUNT(*)",
    "SUM(error)",
    "SUM(input_tokens)",
    "SUM(output_tokens)",
    "SUM(cache_read_tokens)",
    "SUM(cache_write_tokens)",
    "SUM(estimated)",
)


def _sqlite_row(r: UsageRecord) -> tuple[Any, ...]:
    return tuple(int(v) if isinstance(v, bool) else v for v in (getattr(r, c) for c in _COLUMNS))


class SQLiteLedger(QueuedLedger):
    """One row per request in a SQLite file (WAL mode, so ``usage`` reads while Dragoman writes, and several
    processes on one machine can share the file). ``readonly`` opens an existing file for summaries only
    (``LedgerMissing`` when there is none) and starts no writer."""

    def __init__(
        self, path: str | os.PathLike[str], *, readonly: bool = False, max_queue: int = MAX_QUEUE, batch: int = BATCH
    ) -> None:
        self.path = Path(path).expanduser()
        self._conn: sqlite3.Connection | None = None
        if readonly:
            if not self.path.is_file():
                raise LedgerMissing(f"no usage ledger at {self.path}")
        else:
            try:
                self._create()
            except (OSError, sqlite3.Error) as e:
                raise LedgerError(f"cannot open the usage ledger {self.path}: {e}") from e
        super().__init__(start=not readonly, max_queue=max_queue, batch=batch)

    def describe(self) -> str:
        return str(self.path)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=10)
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _create(self) -> None:
        """Create the file and schema on the calling thread, so a bad path fails at configure time."""
        parent = self.path.parent
        if not parent.exists():
            parent.mkdir(mode=0o700, parents=True)
        conn = self._connect()
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > _SCHEMA_VERSION:
                raise LedgerError(
                    f"the usage ledger {self.path} has schema version {version}, newer than this Dragoman's "
                    f"({_SCHEMA_VERSION}): upgrade Dragoman or use another ledger file"
                )
            conn.execute("PRAGMA journal_mode = WAL")
            with conn:
                conn.executescript(_CREATE)
                conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        finally:
            conn.close()

    def _open_writer(self) -> None:
        self._conn = self._connect()

    def _close_writer(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _write(self, batch: list[UsageRecord]) -> None:
        rows = [_sqlite_row(r) for r in batch]
        if self._conn is None:
            raise LedgerError("not open")
        with self._conn:
            self._conn.executemany(_INSERT, rows)

    def _summary(self, since: float | None, group_by: tuple[str, ...]) -> list[Row]:
        if not self.path.is_file():
            raise LedgerMissing(f"no usage ledger at {self.path}")
        conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != _SCHEMA_VERSION:
                raise LedgerError(
                    f"{self.path} is not a usage ledger this Dragoman reads (schema version {version}, "
                    f"expected {_SCHEMA_VERSION})"
                )
            keys = ", ".join(_SQL_GROUP[c] for c in group_by)
            sql = f"SELECT {keys + ', ' if keys else ''}{', '.join(_SQL_METRICS)} FROM usage WHERE ts >= ?"
            if keys:
                sql += f" GROUP BY {keys}"
            result = conn.execute(sql, (float("-inf") if since is None else since,)).fetchall()
        finally:
            conn.close()
        n = len(group_by)
        rows = []
        for values in result:
            counters = [int(v or 0) for v in values[n:]]
            if counters[0]:
                rows.append(Row(dict(zip(group_by, map(str, values[:n]))), *counters))
        return rows


# -- Redis
