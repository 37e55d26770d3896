"""What the response store costs a request (issue 34): storing one answer (``ResponseStore.put``, on
mitmproxy's event loop before the end of the answer reaches the client) and expanding a 50-turn chain for a
``previous_response_id`` (``store.chain`` + ``record.expand`` + decoding the expanded request, as
``ResponsesState.prepare`` does), SQLite and Redis.

    .venv/bin/python bench/responses_state.py [--turns 50] [--rounds 200] [--no-redis]

Each turn of the chain is realistic in size: a user message, a reasoning item with ``encrypted_content``
(a carried Anthropic signature), a function call and its output, a text answer (about 2.5 KB stored per
turn). Redis runs as a private ``redis-server`` on 127.0.0.1 (the ledger benchmark's). Prints one table
(median and p95 in microseconds); no pass/fail.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dragoman.ir import carry  # noqa: E402
from dragoman.protocols import Protocol  # noqa: E402
from dragoman.state import StoredResponse  # noqa: E402
from dragoman.state.record import expand  # noqa: E402
from dragoman.state.redis import RedisStore  # noqa: E402
from dragoman.state.sqlite import SQLiteStore  # noqa: E402
from dragoman.state.store import ResponseStore  # noqa: E402
from dragoman.translate.request import decode_client_request  # noqa: E402
from ledger import redis_server  # noqa: E402 - the ledger benchmark's private redis-server


def turn(n: int, rid: str, prev: str | None, chain: list[str]) -> StoredResponse:
    thinking = f"Turn {n}: the user wants the weather; call the tool. " * 8
    output = [
        {
            "id": f"rs_{rid}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": thinking}],
            "encrypted_content": carry.wrap_anthropic("Sig" + "x" * 300, thinking),
        },
        {
            "id": f"fc_{rid}",
            "type": "function_call",
            "status": "completed",
            "call_id": f"toolu_{rid}",
            "name": "get_weather",
            "arguments": orjson.dumps({"city": f"Paris {n}"}).decode(),
        },
    ]
    inp = [
        {"type": "function_call_output", "call_id": f"toolu_prev{n}", "output": "sunny, 21 C " * 10},
        {"role": "user", "content": f"and the weather for day {n}? " * 4},
    ]
    response = {"id": rid, "object": "response", "status": "completed", "model": "claude-sonnet-4-5", "output": output}
    return StoredResponse(rid, "client:bench", "claude", time.time(), inp, response, prev, chain)


def build_chain(store: ResponseStore, turns: int) -> str:
    ids: list[str] = []
    for n in range(turns):
        rid = f"resp_{uuid.uuid4().hex}"
        store.put(turn(n, rid, ids[-1] if ids else None, list(ids)))
        ids.append(rid)
    return ids[-1]


def timed(fn, rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def measure(name: str, store: ResponseStore, turns: int, rounds: int) -> list[tuple[str, str, float, float]]:
    last = build_chain(store, turns)
    body = {"model": "claude-sonnet-4-5", "input": "next", "previous_response_id": last, "stream": True}

    def put() -> None:
        rid = f"resp_{uuid.uuid4().hex}"
        store.put(turn(0, rid, last, []))

    def expand_chain() -> None:
        chain = store.chain(last, "client:bench")
        assert chain is not None and len(chain) == turns
        decode_client_request(orjson.dumps(expand(body, chain)), Protocol.OPENAI_RESPONSES)

    def read_only() -> None:
        chain = store.chain(last, "client:bench")
        assert chain is not None

    size = len(turn(0, "resp_x", None, []).dumps())
    rows = [(name, f"put one response ({size} B)", *timed(put, rounds))]
    rows.append((name, f"read a {turns}-turn chain", *timed(read_only, rounds)))
    rows.append((name, f"expand a {turns}-turn chain + decode", *timed(expand_chain, rounds)))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--no-redis", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        with SQLiteStore(Path(tmp) / "responses.sqlite3") as store:
            rows += measure("sqlite", store, args.turns, args.rounds)
        if not args.no_redis:
            with redis_server(Path(tmp)) as url:
                if url is None:
                    print("redis-server not installed: Redis not measured", file=sys.stderr)
                else:
                    with RedisStore(url) as rstore:
                        rows += measure("redis", rstore, args.turns, args.rounds)
    print(f"{'store':<8} {'operation':<40} {'median µs':>10} {'p95 µs':>10}")
    for name, what, med, p95 in rows:
        print(f"{name:<8} {what:<40} {med:>10.0f} {p95:>10.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
