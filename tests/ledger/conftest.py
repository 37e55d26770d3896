"""Ledger fixtures: ``ledger_backend`` runs a test against SQLite and against a real Redis server
(``redis-server`` started here on 127.0.0.1 at a free port; skipped with the reason when absent)."""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dragoman.ledger import RedisLedger
from dragoman.ledger import SQLiteLedger
from dragoman.ledger.store import QueuedLedger

try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before fork: the child only calls it
except (OSError, AttributeError):
    _prctl = None


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the test process dies, so no redis-server outlives a run
    that was killed before its teardown (Linux prctl(PR_SET_PDEATHSIG))."""
    if _prctl is not None:
        with contextlib.suppress(Exception):
            _prctl(1, signal.SIGTERM)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_redis(port: int, proc: subprocess.Popen, deadline: float) -> bool:
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def redis_available() -> str | None:
    """Why the Redis tests cannot run here, or None."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (apt-get install -y redis-server): Redis ledger not tested"
    try:
        import redis  # noqa: F401
    except ImportError:
        return "the redis package is not installed (pip install -e '.[test]'): Redis ledger not tested"
    return None


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """A private redis-server on 127.0.0.1 at a free port (no persistence), stopped on exit; yields its URL."""
    exe = shutil.which("redis-server")
    assert exe is not None
    errors = []
    for _ in range(3):  # the free port may be taken between probing and binding
        port = _free_port()
        log = workdir / f"redis-{port}.log"
        proc = subprocess.Popen(
            [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--dir", str(workdir), "--logfile", str(log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        if _wait_for_redis(port, proc, time.monotonic() + 15):
            break
        proc.kill()
        proc.wait()
        errors.append(log.read_text(errors="replace")[-500:] if log.exists() else f"exit {proc.returncode}")
    else:
        pytest.fail(f"redis-server did not start: {errors}")
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One redis-server for this test process, stopped at the end of the session."""
    why = redis_available()
    if why:
        pytest.skip(why)
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=["sqlite", "redis"])
def ledger_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., QueuedLedger]]:
    """``make(cls=None, **options)``: a new ledger of this backend over the same store each call
    (``cls`` a subclass of the backend's class, for tests that hook into the writer). Closed at the end."""
    made: list[QueuedLedger] = []
    if request.param == "sqlite":
        path = tmp_path / "usage.sqlite3"

        def make(cls: type | None = None, **options: Any) -> QueuedLedger:
            ledger = (cls or SQLiteLedger)(path, **options)
            made.append(ledger)
            return ledger
    else:
        url = request.getfixturevalue("redis_url")
        prefix = f"test:{uuid.uuid4().hex}"  # one server per session: each test in its own keys

        def make(cls: type | None = None, **options: Any) -> QueuedLedger:
            ledger = (cls or RedisLedger)(url, prefix=prefix, **options)
            made.append(ledger)
            return ledger

    make.backend = request.param  # type: ignore[attr-defined]
    yield make
    for ledger in made:
        ledger.close()
