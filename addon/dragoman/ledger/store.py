"""Where usage records go: ``open_ledger(spec)`` gives a ``Ledger`` backed by SQLite (default, one file per
machine) or Redis (shared by several Dragoman processes).

``Ledger.add`` runs on mitmproxy's event loop, so it only puts the record on a bounded in-memory queue
(a few microseconds, ``make bench-ledger``); one background thread per ledger writes the queue in
batches. When the queue is full (the store is down or too slow) records are dropped, counted and logged
once; ``add`` never raises. Only names are stored: a record holds no key, and ``describe`` masks a
password in a Redis URL.
"""

from __future__ import annotations

import atexit
import logging
import math
import queue
import threading
import time
from abc import ABC
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any
from typing import ClassVar
from urllib.parse import urlsplit
from urllib.parse import urlunsplit

from dragoman.ledger.record import DEFAULT_GROUP_BY
from dragoman.ledger.record import Row
from dragoman.ledger.record import UsageRecord
from dragoman.ledger.record import check_group_by
from dragoman.logsafe import logsafe

logger = logging.getLogger(__name__)

DEFAULT_LEDGER = "~/.dragoman/usage.sqlite3"
MAX_QUEUE = 10_000  # records waiting for the writer (~2 MB at most), beyond which add() drops
BATCH = 500  # records per write transaction
#: the writer looks at its queue this often (seconds) instead of waiting on it, so the records of that moment share
#: one wake-up and one transaction: a wake-up per record made the event loop's thread hand the GIL to the writer once
#: per request (issue 31); a record reaches the store at most this much later. 0: wait on the queue.
LINGER = 0.05
MAX_TEXT = 200  # names longer than this are cut (a client can send any model name)
_TEXT_FIELDS = ("client", "route", "upstream", "model", "client_model")


class LedgerError(Exception):
    """The ledger cannot be opened or read. The message is safe to show (no password)."""


class LedgerMissing(LedgerError):
    """A read-only open found no ledger there (nothing was ever recorded)."""


@dataclass(frozen=True, slots=True)
class LedgerStats:
    written: int  # records stored
    dropped: int  # records add() refused: queue full, or the ledger closed
    failed: int  # records the store refused (write errors, malformed records)
    pending: int  # records waiting in the queue


class Ledger(ABC):
    """Usage records in, summaries out. ``add`` is cheap and never raises; ``close`` flushes."""

    # how exactly summary(since=...) cuts: "exact" (per record) or "day" (from the start of since's UTC day)
    since_granularity: ClassVar[str] = "exact"

    @abstractmethod
    def add(self, rec: UsageRecord) -> None:
        """Count ``rec``. Never blocks for long and never raises (failures are logged and counted)."""

    @abstractmethod
    def summary(self, since: float | None = None, group_by: tuple[str, ...] = DEFAULT_GROUP_BY) -> list[Row]:
        """Per group (sorted by the group's values), the counters of the records at or after ``since`` (epoch
        seconds; ``None`` = all). Records added before the call are included. Raises ``LedgerError``."""

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record added so far is written (or failed). False on timeout."""
        return True

    def effective_since(self, since: float | None) -> float | None:
        """The cut ``summary(since)`` really applies: ``since`` itself, or the start of its UTC day."""
        if since is None or self.since_granularity == "exact":
            return since
        return since - since % 86400

    @abstractmethod
    def close(self) -> None:
        """Write what is queued, then release the store. Idempotent; ``add`` after it drops."""

    @abstractmethod
    def stats(self) -> LedgerStats: ...

    @abstractmethod
    def describe(self) -> str:
        """Where the ledger is, fit to print (a Redis password masked)."""

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_STOP = object()


class QueuedLedger(Ledger):
    """The shared machinery: a bounded queue filled by ``add`` and one writer thread calling ``_write``."""

    def __init__(self, *, start: bool, max_queue: int = MAX_QUEUE, batch: int = BATCH, linger: float = LINGER) -> None:
        if max_queue < 1 or batch < 1:
            raise ValueError("max_queue and batch must be >= 1")
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._max = max_queue
        self._batch = batch
        self._linger = linger
        self._lock = threading.Lock()
        self._closed = not start
        self._written = self._dropped = self._failed = 0
        self._drop_logged = self._malformed_logged = False
        self._failing = False
        self._thread: threading.Thread | None = None
        if start:
            self._thread = threading.Thread(target=self._run, name="dragoman-ledger", daemon=True)
            self._thread.start()
            atexit.register(self.close)

    # -- the calling thread (mitmproxy's event loop)

    def add(self, rec: UsageRecord) -> None:
        try:
            if self._closed:
                self._drop(full=False)
            elif self._q.qsize() >= self._max:
                self._drop(full=True)
            else:
                self._q.put(rec)
        except Exception:  # add() must never raise into the addon
            logger.exception("usage ledger: cannot queue a record")
            with self._lock:
                self._failed += 1

    def _drop(self, full: bool) -> None:
        with self._lock:
            self._dropped += 1
            if self._drop_logged:
                return
            self._drop_logged = True
        why = f"its queue is full ({self._max} records wait for the writer)" if full else "it is closed"
        logger.warning(
            "usage ledger %s: dropping usage records because %s; the dropped ones are counted", self.describe(), why
        )

    def flush(self, timeout: float | None = None) -> bool:
        t = self._thread
        if t is None or not t.is_alive():
            return True
        done = threading.Event()
        self._q.put(done)
        return done.wait(timeout)

    def summary(self, since: float | None = None, group_by: tuple[str, ...] = DEFAULT_GROUP_BY) -> list[Row]:
        group_by = check_group_by(group_by)
        if not self.flush(timeout=10):
            logger.warning("usage ledger: the writer is slow; the summary may miss the latest records")
        try:
            rows = self._summary(since, group_by)
        except LedgerError:
            raise
        except Exception as e:
            raise LedgerError(f"cannot read the usage ledger {self.describe()}: {e}") from e
        return sorted(rows, key=lambda r: tuple(r.group.values()))

    def close(self, timeout: float = 10.0) -> None:
        with self._lock:
            if self._closed and (self._thread is None or not self._thread.is_alive()):
                self._closed = True
                return
            self._closed = True
        atexit.unregister(self.close)
        if self._thread is not None:
            self._q.put(_STOP)
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.warning("usage ledger %s: the writer did not finish within %.0f s", self.describe(), timeout)
                return
        lost = 0  # added while closing, after the writer's last look
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, threading.Event):
                item.set()
            elif item is not _STOP:
                lost += 1
        with self._lock:
            self._dropped += lost
            dropped = self._dropped
        if dropped or self._failed:
            logger.warning(
                "usage ledger %s: %d records dropped and %d failed in this run", self.describe(), dropped, self._failed
            )

    def stats(self) -> LedgerStats:
        with self._lock:
            return LedgerStats(self._written, self._dropped, self._failed, self._q.qsize())

    # -- the writer thread

    def _run(self) -> None:
        try:
            self._open_writer()
        except Exception as e:
            logger.error("usage ledger %s: cannot open for writing: %s; usage is not recorded", self.describe(), e)
            self._failing = True
        stop = False
        while not stop:
            batch: list[UsageRecord] = []
            events: list[threading.Event] = []
            if self._linger > 0:
                # polled, never waited on: ``add`` then never has a waiting thread to wake (a wake-up per record
                # handed the GIL to this thread once per request); a record waits at most ``linger`` here
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    time.sleep(self._linger)
                    continue
            else:
                item = self._q.get()
            while True:
                if item is _STOP:
                    stop = True
                elif isinstance(item, threading.Event):
                    events.append(item)
                else:
                    batch.append(item)
                if len(batch) >= self._batch and not stop:
                    break
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
            for i in range(0, len(batch), self._batch):
                self._write_safely(batch[i : i + self._batch])
            for ev in events:
                ev.set()
        try:
            self._close_writer()
        except Exception as e:
            logger.debug("usage ledger %s: close: %s", self.describe(), e)

    def _write_safely(self, batch: list[UsageRecord]) -> None:
        good: list[UsageRecord] = []
        for rec in batch:
            try:
                good.append(normalize(rec))
            except (TypeError, ValueError, OverflowError) as e:
                with self._lock:
                    self._failed += 1
                    first = not self._malformed_logged
                    self._malformed_logged = True
                log = logger.error if first else logger.debug
                log(
                    "usage ledger: a malformed usage record is not counted (the next are counted silently): %s",
                    logsafe(e),
                )
        if not good:
            return
        try:
            self._write(good)
        except Exception as e:
            with self._lock:
                self._failed += len(good)
            if not self._failing:
                self._failing = True
                logger.warning("usage ledger %s: cannot write %d records: %s", self.describe(), len(good), e)
            else:
                logger.debug("usage ledger %s: cannot write %d records: %s", self.describe(), len(good), e)
            return
        with self._lock:
            self._written += len(good)
        if self._failing:
            self._failing = False
            logger.warning("usage ledger %s: writing again (%d records failed so far)", self.describe(), self._failed)

    # -- what a backend provides

    def _open_writer(self) -> None:
        """Runs first on the writer thread (e.g. to open a thread-bound connection)."""

    def _close_writer(self) -> None:
        """Runs last on the writer thread."""

    @abstractmethod
    def _write(self, batch: list[UsageRecord]) -> None:
        """Store ``batch`` (normalized records) all or nothing, on the writer thread; raising counts the
        batch failed."""

    @abstractmethod
    def _summary(self, since: float | None, group_by: tuple[str, ...]) -> list[Row]: ...


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a str, got {type(value).__name__}")
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT]


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an int, got {type(value).__name__}")
    return value


def normalize(rec: object) -> UsageRecord:
    """``rec`` checked field by field (names cut to ``MAX_TEXT`` characters, flags made bools).
    Raises ``TypeError``/``ValueError`` for anything that is not a well-formed ``UsageRecord``."""
    if not isinstance(rec, UsageRecord):
        raise TypeError(f"not a UsageRecord: {type(rec).__name__}")
    if isinstance(rec.ts, bool) or not isinstance(rec.ts, int | float):
        raise TypeError(f"ts: expected a number, got {type(rec.ts).__name__}")
    ts = float(rec.ts)
    if not math.isfinite(ts):
        raise ValueError(f"ts is not a finite time: {rec.ts!r}")
    counts = {
        f: _int(getattr(rec, f)) for f in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    }
    if min(counts.values()) < 0:
        raise ValueError(f"negative token count: {counts}")
    return UsageRecord(
        ts=ts,
        client=_text(rec.client),
        route=_text(rec.route),
        upstream=_text(rec.upstream),
        model=_text(rec.model),
        client_model=_text(rec.client_model),
        status=_int(rec.status),
        error=bool(rec.error),
        estimated=bool(rec.estimated),
        stream=bool(rec.stream),
        attempts=_int(rec.attempts),
        **counts,
    )


def utc_day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


# -- SQLite


def _strs(values: Any) -> list[str]:
    """Redis replies as str (the client decodes them), typed loosely by redis-py."""
    return [v if isinstance(v, str) else bytes(v).decode() for v in values]


def redact_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
