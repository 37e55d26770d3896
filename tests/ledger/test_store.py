"""Records in, summary out, on SQLite and on a real Redis server; the queue in front of both: bounded,
never raising into the caller, safe under many threads; ``open_ledger`` specs; nothing secret shown."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
from dataclasses import replace

import pytest

from dragoman.ledger import LedgerError
from dragoman.ledger import LedgerMissing
from dragoman.ledger import RedisLedger
from dragoman.ledger import Row
from dragoman.ledger import SQLiteLedger
from dragoman.ledger import UsageRecord
from dragoman.ledger import open_ledger
from dragoman.ledger.store import redact_url

from .conftest import redis_available
from .conftest import redis_server
from .records import DAY1
from .records import HOUR
from .records import mixed_records
from .records import rec
from .records import reference


def test_one_record_in_one_row_out(ledger_backend):
    ledger = ledger_backend()
    ledger.add(rec(client="alice", input_tokens=120, output_tokens=30, cache_read_tokens=7, cache_write_tokens=3))
    assert ledger.summary() == [
        Row(
            {"client": "alice", "upstream": "deepseek", "model": "deepseek-chat"},
            requests=1,
            errors=0,
            input_tokens=120,
            output_tokens=30,
            cache_read_tokens=7,
            cache_write_tokens=3,
            estimated=0,
        )
    ]


@pytest.mark.parametrize(
    "group_by",
    [("client", "upstream", "model"), ("client",), ("route", "client_model"), ("day", "upstream"), ()],
    ids=lambda g: ",".join(g) or "none",
)
def test_summary_of_a_mixed_run_equals_the_records(ledger_backend, group_by):
    records = mixed_records()
    ledger = ledger_backend()
    for r in records:
        ledger.add(r)
    got = ledger.summary(group_by=group_by)
    assert got == reference(records, group_by)
    assert sum(r.requests for r in got) == 60 and sum(r.errors for r in got) == 9
    assert ledger.stats().written == 60


def test_summary_reads_what_an_earlier_process_wrote(ledger_backend):
    records = mixed_records()
    with ledger_backend() as writer:
        for r in records:
            writer.add(r)
    # close() wrote everything without a flush; a read-only ledger (the CLI's) sees it
    reader = ledger_backend(readonly=True)
    assert reader.summary(group_by=("client", "day")) == reference(records, ("client", "day"))
    reader.add(rec())  # a read-only ledger counts nothing
    assert reader.stats().dropped == 1


def test_since_is_exact_on_sqlite_and_whole_days_on_redis(ledger_backend):
    ledger = ledger_backend()
    late_day1, early_day2, noon_day2 = DAY1 + 23 * HOUR, DAY1 + 25 * HOUR, DAY1 + 36 * HOUR
    for ts in (late_day1, early_day2, noon_day2):
        ledger.add(rec(ts))
    since = DAY1 + 30 * HOUR  # 2026-11-02 06:00 UTC
    (row,) = ledger.summary(since=since)
    if ledger_backend.backend == "sqlite":
        assert (row.requests, ledger.effective_since(since)) == (1, since)
    else:
        assert (row.requests, ledger.effective_since(since)) == (2, DAY1 + 24 * HOUR)
    assert ledger.summary(since=DAY1 + 72 * HOUR) == []
    assert ledger.summary(since=None)[0].requests == 3


def test_many_threads_adding_lose_nothing(ledger_backend):
    ledger = ledger_backend(max_queue=100_000)
    threads, per_thread = 8, 1000

    def worker(n: int) -> None:
        for i in range(per_thread):
            ledger.add(rec(DAY1 + i, client=f"client-{n}", input_tokens=i, output_tokens=1))

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    rows = ledger.summary(group_by=("client",))
    assert [r.group["client"] for r in rows] == [f"client-{n}" for n in range(threads)]
    expected_input = sum(range(per_thread))
    assert all(r.requests == per_thread and r.input_tokens == expected_input for r in rows)
    assert ledger.stats() == type(ledger.stats())(written=threads * per_thread, dropped=0, failed=0, pending=0)


def test_many_threads_against_a_tiny_queue_account_for_every_record(ledger_backend):
    ledger = ledger_backend(max_queue=8, batch=4)
    threads, per_thread = 6, 500
    pool = [
        threading.Thread(target=lambda: [ledger.add(rec(DAY1 + i)) for i in range(per_thread)]) for _ in range(threads)
    ]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    ledger.flush()
    stats = ledger.stats()
    assert stats.written + stats.dropped + stats.failed == threads * per_thread
    assert stats.failed == 0 and stats.pending == 0
    assert sum(r.requests for r in ledger.summary()) == stats.written


def test_a_full_queue_drops_counts_and_logs_once(ledger_backend, caplog):
    entered, release = threading.Event(), threading.Event()
    backend_cls = SQLiteLedger if ledger_backend.backend == "sqlite" else RedisLedger

    class Stalled(backend_cls):  # the store hangs in the middle of a write
        def _write(self, batch):
            entered.set()
            assert release.wait(30)
            super()._write(batch)

    ledger = ledger_backend(Stalled, max_queue=5, batch=1)
    ledger.add(rec())
    assert entered.wait(10)  # the writer holds record 1; the queue is empty again
    caplog.set_level(logging.WARNING, logger="dragoman.ledger")
    for i in range(12):
        ledger.add(rec(DAY1 + i))  # 5 fit, 7 are dropped
    stats = ledger.stats()
    assert (stats.dropped, stats.pending, stats.written) == (7, 5, 0)
    drops = [r for r in caplog.records if "dropping" in r.getMessage()]
    assert len(drops) == 1 and "queue is full (5 records" in drops[0].getMessage()
    release.set()
    assert ledger.flush(timeout=10)
    assert ledger.stats().written == 6
    assert ledger.summary()[0].requests == 6


def test_add_never_raises_malformed_records_are_counted(ledger_backend, caplog):
    ledger = ledger_backend()
    caplog.set_level(logging.DEBUG, logger="dragoman.ledger")
    ledger.add(None)  # type: ignore[arg-type]
    ledger.add("a record")  # type: ignore[arg-type]
    ledger.add(rec(input_tokens="12"))  # a str where an int belongs
    ledger.add(rec(output_tokens=-1))
    ledger.add(rec(ts=float("nan")))
    ledger.add(rec(client=None))
    ledger.add(rec(input_tokens=7))
    ledger.flush()
    assert ledger.stats().failed == 6
    assert [(r.requests, r.input_tokens) for r in ledger.summary()] == [(1, 7)]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "malformed" in errors[0].getMessage()  # logged once, then counted silently


def test_add_after_close_is_dropped_not_raised(ledger_backend):
    ledger = ledger_backend()
    ledger.add(rec())
    ledger.close()
    ledger.add(rec())
    ledger.close()  # idempotent
    assert (ledger.stats().written, ledger.stats().dropped) == (1, 1)


def test_close_writes_everything_queued(ledger_backend):
    ledger = ledger_backend()
    for i in range(3000):
        ledger.add(rec(DAY1 + i))
    ledger.close()
    assert ledger.stats().written == 3000
    assert ledger_backend(readonly=True).summary()[0].requests == 3000


def test_long_names_are_cut(ledger_backend):
    ledger = ledger_backend()
    ledger.add(rec(model="m" * 5000, client="c" * 300))
    (row,) = ledger.summary()
    assert (len(row.group["model"]), len(row.group["client"])) == (200, 200)


def test_unknown_group_column_is_refused(ledger_backend):
    with pytest.raises(ValueError, match="cannot group by 'key'"):
        ledger_backend().summary(group_by=("client", "key"))


# -- store failures: counted and logged, never raised into add()


def test_sqlite_write_failure_is_counted_logged_once_and_recovers(tmp_path, caplog):
    path = tmp_path / "usage.sqlite3"
    ledger = SQLiteLedger(path)
    ledger.add(rec())
    ledger.flush()
    caplog.set_level(logging.WARNING, logger="dragoman.ledger")
    with sqlite3.connect(path) as other:
        other.execute("ALTER TABLE usage RENAME TO usage_moved")
    for _ in range(3):
        ledger.add(rec())
        ledger.flush()
    assert ledger.stats().failed == 3
    failures = [r.getMessage() for r in caplog.records if "cannot write" in r.getMessage()]
    assert len(failures) == 1 and "no such table" in failures[0]
    with sqlite3.connect(path) as other:
        other.execute("ALTER TABLE usage_moved RENAME TO usage")
    ledger.add(rec())
    ledger.flush()
    assert any("writing again" in r.getMessage() for r in caplog.records)
    assert ledger.summary()[0].requests == 2
    ledger.close()


@pytest.mark.skipif(bool(redis_available()), reason=redis_available() or "")
def test_redis_going_away_is_counted_not_raised(tmp_path, caplog):
    with redis_server(tmp_path) as url:
        ledger = RedisLedger(url)
        ledger.add(rec())
        ledger.flush()
    # the server is gone now
    caplog.set_level(logging.WARNING, logger="dragoman.ledger")
    for _ in range(3):
        ledger.add(rec())
    assert ledger.flush(timeout=30)
    assert (ledger.stats().written, ledger.stats().failed) == (1, 3)
    assert any("cannot write" in r.getMessage() for r in caplog.records)
    with pytest.raises(LedgerError, match="cannot read the usage ledger redis://127.0.0.1"):
        ledger.summary()
    ledger.close()


# -- opening


def test_open_ledger_specs(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    default = open_ledger()
    assert isinstance(default, SQLiteLedger) and default.path == tmp_path / ".dragoman" / "usage.sqlite3"
    assert stat.S_IMODE(os.stat(tmp_path / ".dragoman").st_mode) == 0o700
    default.close()
    by_path = open_ledger(str(tmp_path / "a" / "b.sqlite3"))
    assert by_path.path == tmp_path / "a" / "b.sqlite3" and by_path.path.is_file()
    by_path.close()
    by_url = open_ledger(f"sqlite://{tmp_path}/c.sqlite3")
    assert by_url.path == tmp_path / "c.sqlite3"
    by_url.close()
    tilde = open_ledger("~/d.sqlite3")
    assert tilde.path == tmp_path / "d.sqlite3"
    tilde.close()
    with pytest.raises(LedgerError, match="unknown scheme postgres://"):
        open_ledger("postgres://u:pw@h/db")
    with pytest.raises(LedgerError, match="needs a path"):
        open_ledger("sqlite://")
    with pytest.raises(LedgerMissing, match="no usage ledger at"):
        open_ledger(str(tmp_path / "missing.sqlite3"), readonly=True)
    assert not (tmp_path / "missing.sqlite3").exists()  # reading never creates


def test_sqlite_file_is_wal_and_holds_only_names(tmp_path):
    path = tmp_path / "usage.sqlite3"
    with SQLiteLedger(path) as ledger:
        ledger.add(rec())
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        columns = [c[1] for c in conn.execute("PRAGMA table_info(usage)")]
    assert columns == [f for f in UsageRecord.__slots__]


def test_a_newer_or_foreign_file_is_refused(tmp_path):
    newer = tmp_path / "newer.sqlite3"
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 7")
    with pytest.raises(LedgerError, match="schema version 7, newer"):
        SQLiteLedger(newer)
    with pytest.raises(LedgerError, match="schema version 7"):
        SQLiteLedger(newer, readonly=True).summary()
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(LedgerError, match="cannot open the usage ledger"):
        SQLiteLedger(junk)


def test_redis_password_never_shown(tmp_path):
    pytest.importorskip("redis")
    assert redact_url("redis://user:s3cr3t-pw@cache:6380/2") == "redis://user:***@cache:6380/2"
    assert redact_url("rediss://:s3cr3t-pw@cache/0") == "rediss://:***@cache/0"
    assert redact_url("redis://cache:6379/0") == "redis://cache:6379/0"
    from .conftest import _free_port

    dead = _free_port()
    with pytest.raises(LedgerError) as e:
        open_ledger(f"redis://:s3cr3t-pw@127.0.0.1:{dead}/0")
    assert "s3cr3t-pw" not in str(e.value) and f"redis://:***@127.0.0.1:{dead}/0" in str(e.value)


def test_record_is_frozen_and_slotted():
    r = rec()
    with pytest.raises(AttributeError):
        r.client = "mallory"  # type: ignore[misc]
    assert not hasattr(r, "__dict__")
    assert replace(r, client="bob").client == "bob"
