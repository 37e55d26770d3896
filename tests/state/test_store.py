"""The response store on both backends: round trip, chains, ownership, TTL, the size cap, 0600 + WAL."""

from __future__ import annotations

import os
import sqlite3
import stat
import time

import pytest

from dragoman.state import StoredResponse
from dragoman.state import StoreError
from dragoman.state import open_store
from dragoman.state.record import expand
from dragoman.state.record import input_items
from dragoman.state.record import owner_of
from dragoman.state.record import page
from dragoman.state.record import with_ids


def rec(
    rid: str,
    *,
    owner: str = "client:a",
    prev: str | None = None,
    chain=(),
    created: float | None = None,
    text: str = "hi",
    pad: int = 0,
) -> StoredResponse:
    out = [
        {
            "id": f"msg_{rid}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"answer {rid}" + "x" * pad, "annotations": []}],
        }
    ]
    return StoredResponse(
        id=rid,
        owner=owner,
        upstream="claude",
        created=time.time() if created is None else created,
        input=input_items(text),
        response={"id": rid, "object": "response", "output": out, "model": "m"},
        previous=prev,
        chain=list(chain),
    )


def test_round_trip(store_backend) -> None:
    store = store_backend()
    r = rec("resp_1")
    store.put(r)
    got = store.get("resp_1", "client:a")
    assert got == r
    assert store_backend().get("resp_1", "client:a") == r  # another handle (another process) reads it


def test_unknown_and_foreign_ids(store_backend) -> None:
    store = store_backend()
    store.put(rec("resp_1"))
    assert store.get("resp_nope", "client:a") is None
    assert store.get("resp_1", "client:b") is None
    assert store.delete("resp_1", "client:b") is False
    assert store.get("resp_1", "client:a") is not None
    assert store.delete("resp_1", "client:a") is True
    assert store.get("resp_1", "client:a") is None
    assert store.delete("resp_1", "client:a") is False


def test_chain_read_in_order(store_backend) -> None:
    store = store_backend()
    ids = [f"resp_{n}" for n in range(6)]
    for n, rid in enumerate(ids):
        store.put(rec(rid, prev=ids[n - 1] if n else None, chain=ids[:n], text=f"q{n}"))
    chain = store.chain(ids[-1], "client:a")
    assert chain is not None and [r.id for r in chain] == ids
    body = expand({"model": "m", "input": "next", "previous_response_id": ids[-1], "instructions": "new"}, chain)
    assert "previous_response_id" not in body and body["instructions"] == "new"
    texts = [i["content"][0]["text"] for i in body["input"]]
    assert texts == [t for n in range(6) for t in (f"q{n}", f"answer resp_{n}")] + ["next"]
    store.delete(ids[2], "client:a")  # a hole: the conversation cannot be rebuilt whole
    assert store.chain(ids[-1], "client:a") is None
    assert store.chain(ids[-1], "client:b") is None


def test_ttl_expires(store_backend) -> None:
    store = store_backend(ttl=1)
    store.put(rec("resp_old", created=time.time() - 5))
    store.put(rec("resp_new"))
    if store_backend.backend == "redis":
        time.sleep(1.2)  # Redis expires the key itself
        assert store.get("resp_new", "client:a") is None
    else:
        assert store.get("resp_old", "client:a") is None
        assert store.get("resp_new", "client:a") is not None


def test_size_cap_evicts_oldest_first(store_backend) -> None:
    one = len(rec("resp_0", pad=1000, created=float(int(time.time()))).dumps())
    store = store_backend(max_bytes=one * 3 + 10)
    now = float(int(time.time()))  # every record serialises to the same size
    for n in range(5):
        store.put(rec(f"resp_{n}", created=now + n, pad=1000))
    kept = [n for n in range(5) if store.get(f"resp_{n}", "client:a") is not None]
    assert kept == [2, 3, 4]
    assert store.total_bytes() == 3 * one  # type: ignore[attr-defined]
    store.put(rec("resp_4", created=now + 4, pad=1000))  # a replacement counts once
    assert store.total_bytes() == 3 * one  # type: ignore[attr-defined]


def test_sqlite_file_is_private_and_wal(tmp_path) -> None:
    path = tmp_path / "sub" / "responses.sqlite3"
    with open_store(str(path)) as store:
        store.put(rec("resp_1"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with open_store(f"sqlite://{path}") as again:  # a restart reads what the last run stored
        assert again.get("resp_1", "client:a") is not None


def test_open_store_errors(tmp_path) -> None:
    with pytest.raises(StoreError, match="unknown scheme"):
        open_store("ftp://user:secret@host/x")
    with pytest.raises(StoreError) as e:
        open_store("redis://user:secret@127.0.0.1:1/0")
    assert "secret" not in str(e.value)
    with pytest.raises(StoreError, match="sqlite:// needs a path"):
        open_store("sqlite://")


def test_owner_never_holds_the_key() -> None:
    assert owner_of("alice", "sk-secret") == "client:alice"
    digest = owner_of("", "sk-secret")
    assert "sk-secret" not in digest and digest.startswith("key:") and digest != owner_of("", "sk-other")
    assert owner_of("", None) == ""
    stored = rec("resp_1", owner=digest).dumps()
    assert b"sk-secret" not in stored


def test_input_items_pages() -> None:
    r = rec("resp_abc")
    r.input = [{"role": "user", "content": f"m{n}"} for n in range(5)]
    items = with_ids(r)
    assert [i["id"] for i in items] == [f"msg_abc_{n}" for n in range(5)]
    assert all(i["type"] == "message" for i in items)
    first = page(items, after=None, before=None, limit=2, order="desc")
    assert [i["content"] for i in first["data"]] == ["m4", "m3"] and first["has_more"] is True
    second = page(items, after=first["last_id"], before=None, limit=2, order="desc")
    assert [i["content"] for i in second["data"]] == ["m2", "m1"]
    last = page(items, after=second["last_id"], before=None, limit=2, order="desc")
    assert [i["content"] for i in last["data"]] == ["m0"] and last["has_more"] is False
    asc = page(items, after=None, before=None, limit=20, order="asc")
    assert asc["first_id"] == "msg_abc_0" and asc["has_more"] is False
