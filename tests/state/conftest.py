"""Response-store fixtures: ``store_backend`` runs a test against SQLite and a real Redis server (the
ledger's ``redis-server`` fixture, started on 127.0.0.1 at a free port; skipped with the reason when absent)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.ledger.conftest import redis_url  # noqa: F401 - the session's redis-server

from dragoman.state.redis import RedisStore
from dragoman.state.sqlite import SQLiteStore
from dragoman.state.store import ResponseStore

__all__ = ["redis_url"]


@pytest.fixture(params=["sqlite", "redis"])
def store_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., ResponseStore]]:
    """``make(**options)``: a new store of this backend over the same data each call; closed at the end."""
    made: list[ResponseStore] = []
    if request.param == "sqlite":
        path = tmp_path / "responses.sqlite3"

        def make(**options: Any) -> ResponseStore:
            store: ResponseStore = SQLiteStore(path, **options)
            made.append(store)
            return store
    else:
        url = request.getfixturevalue("redis_url")
        prefix = f"test:{uuid.uuid4().hex}"

        def make(**options: Any) -> ResponseStore:
            store: ResponseStore = RedisStore(url, prefix=prefix, **options)
            made.append(store)
            return store

    make.backend = request.param  # type: ignore[attr-defined]
    yield make
    for store in made:
        store.close()
