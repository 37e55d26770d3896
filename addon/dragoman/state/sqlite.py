"""The SQLite response store: one row per response in a ``0600`` WAL-mode file. A running byte total
(kept by triggers in the same transaction) makes the size cap's check O(1); eviction deletes the oldest
rows by their creation time (indexed)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from dragoman.state.record import StoredResponse
from dragoman.state.store import DEFAULT_MAX_BYTES
from dragoman.state.store import DEFAULT_TTL
from dragoman.state.store import ResponseStore
from dragoman.state.store import StoreError

_SCHEMA_VERSION = 1
_CREATE = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    size INTEGER NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_created ON responses (created);
CREATE INDEX IF NOT EXISTS responses_expires ON responses (expires);
CREATE TABLE IF NOT EXISTS total (k INTEGER PRIMARY KEY CHECK (k = 0), bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO total (k, bytes) VALUES (0, 0);
CREATE TRIGGER IF NOT EXISTS responses_add AFTER INSERT ON responses
    BEGIN UPDATE total SET bytes = bytes + new.size WHERE k = 0; END;
CREATE TRIGGER IF NOT EXISTS responses_del AFTER DELETE ON responses
    BEGIN UPDATE total SET bytes = bytes - old.size WHERE k = 0; END;
"""
#: expired rows are purged at most this often (seconds); reads skip them anyway
_PURGE_EVERY = 60.0
_EVICT_BATCH = 64


class SQLiteStore(ResponseStore):
    """One SQLite file, shared by the processes of one machine (WAL: readers never wait for the writer)."""

    def __init__(
        self, path: str | os.PathLike[str], *, ttl: float = DEFAULT_TTL, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        super().__init__(ttl, max_bytes)
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._purged = 0.0
        try:
            self._conn: sqlite3.Connection | None = self._open()
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot open the response store {self.path}: {e}") from e

    def describe(self) -> str:
        return str(self.path)

    def _open(self) -> sqlite3.Connection:
        parent = self.path.parent
        if not parent.exists():
            parent.mkdir(mode=0o700, parents=True)
        # created 0600 before SQLite opens it (SQLite gives its -wal and -shm files the same mode)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        conn = sqlite3.connect(self.path, timeout=10, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout = 10000")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > _SCHEMA_VERSION:
                raise StoreError(
                    f"the response store {self.path} has schema version {version}, newer than this Dragoman's "
                    f"({_SCHEMA_VERSION}): upgrade Dragoman or use another file"
                )
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(f"BEGIN; {_CREATE} PRAGMA user_version = {_SCHEMA_VERSION}; COMMIT;")
        except BaseException:
            conn.close()
            raise
        return conn

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the response store {self.path} is closed")
        return self._conn

    def put(self, rec: StoredResponse) -> None:
        body = rec.dumps()
        now = time.time()
        try:
            with self._lock:
                db = self._db()
                db.execute("BEGIN IMMEDIATE")
                try:
                    # a DELETE first: REPLACE's implicit delete fires no trigger (the total would drift)
                    db.execute("DELETE FROM responses WHERE id = ?", (rec.id,))
                    db.execute(
                        "INSERT INTO responses (id, created, expires, size, body) VALUES (?, ?, ?, ?, ?)",
                        (rec.id, rec.created, rec.created + self.ttl, len(body), body),
                    )
                    if now - self._purged > _PURGE_EVERY:
                        self._purged = now
                        db.execute("DELETE FROM responses WHERE expires < ?", (now,))
                    self._evict(db)
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
        except sqlite3.Error as e:
            raise StoreError(f"cannot write to the response store {self.path}: {e}") from e

    def _evict(self, db: sqlite3.Connection) -> None:
        """Delete the oldest rows, one by one, until the total is under the cap."""
        total = db.execute("SELECT bytes FROM total WHERE k = 0").fetchone()[0]
        while total > self.max_bytes:
            rows = db.execute("SELECT id, size FROM responses ORDER BY created LIMIT ?", (_EVICT_BATCH,)).fetchall()
            if not rows:
                return
            for rid, size in rows:
                if total <= self.max_bytes:
                    return
                db.execute("DELETE FROM responses WHERE id = ?", (rid,))
                total -= size

    def _get_many(self, ids: list[str]) -> list[bytes | None]:
        found: dict[str, bytes] = {}
        now = time.time()
        try:
            with self._lock:
                db = self._db()
                for i in range(0, len(ids), 500):
                    part = ids[i : i + 500]
                    rows = db.execute(
                        f"SELECT id, body FROM responses WHERE expires >= ? AND id IN ({','.join('?' * len(part))})",
                        (now, *part),
                    ).fetchall()
                    found.update((r[0], r[1]) for r in rows)
        except sqlite3.Error as e:
            raise StoreError(f"cannot read the response store {self.path}: {e}") from e
        return [found.get(i) for i in ids]

    def _delete(self, rid: str) -> None:
        try:
            with self._lock:
                self._db().execute("DELETE FROM responses WHERE id = ?", (rid,))
        except sqlite3.Error as e:
            raise StoreError(f"cannot write to the response store {self.path}: {e}") from e

    def total_bytes(self) -> int:
        with self._lock:
            return int(self._db().execute("SELECT bytes FROM total WHERE k = 0").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
