"""The Redis ledger: one counter hash per UTC day and group, shared by several Dragoman processes."""

from __future__ import annotations

import json
from typing import ClassVar

from dragoman.ledger.record import METRICS
from dragoman.ledger.record import Row
from dragoman.ledger.record import UsageRecord
from dragoman.ledger.store import BATCH
from dragoman.ledger.store import MAX_QUEUE
from dragoman.ledger.store import LedgerError
from dragoman.ledger.store import QueuedLedger
from dragoman.ledger.store import _strs
from dragoman.ledger.store import redact_url
from dragoman.ledger.store import utc_day

_REDIS_DIMS = ("client", "route", "upstream", "model", "client_model")


class RedisLedger(QueuedLedger):
    """Counters in Redis, shared by every Dragoman pointed at the same server. Per UTC day and per
    (client, route, upstream, model, client_model) one hash ``PREFIX:DAY:GROUP`` is HINCRBY'd; the sets
    ``PREFIX:days`` and ``PREFIX:groups:DAY`` index them, so a summary reads one hash per group and day.
    ``since`` is therefore rounded down to the start of its UTC day (``since_granularity = "day"``)."""

    since_granularity: ClassVar[str] = "day"

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "dragoman:usage",
        readonly: bool = False,
        max_queue: int = MAX_QUEUE,
        batch: int = BATCH,
    ) -> None:
        try:
            import redis
        except ImportError:
            raise LedgerError(
                "a Redis usage ledger needs the redis package: pip install 'dragoman[ledger-redis]'"
            ) from None
        self.url = url
        self.prefix = prefix
        try:
            self._client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5, socket_connect_timeout=5)
            self._client.ping()
        except Exception as e:
            raise LedgerError(f"cannot reach the usage ledger {self.describe()}: {e}") from e
        super().__init__(start=not readonly, max_queue=max_queue, batch=batch)

    def describe(self) -> str:
        return redact_url(self.url)

    def _close_writer(self) -> None:
        self._client.close()

    def _write(self, batch: list[UsageRecord]) -> None:
        sums: dict[tuple[str, str], dict[str, int]] = {}
        for r in batch:
            group = json.dumps([getattr(r, d) for d in _REDIS_DIMS], ensure_ascii=False)
            c = sums.setdefault((utc_day(r.ts), group), dict.fromkeys(METRICS, 0))
            c["requests"] += 1
            c["errors"] += r.error
            c["input_tokens"] += r.input_tokens
            c["output_tokens"] += r.output_tokens
            c["cache_read_tokens"] += r.cache_read_tokens
            c["cache_write_tokens"] += r.cache_write_tokens
            c["estimated"] += r.estimated
        p = self.prefix
        pipe = self._client.pipeline(transaction=True)
        for (day, group), counters in sums.items():
            pipe.sadd(f"{p}:days", day)
            pipe.sadd(f"{p}:groups:{day}", group)
            for metric, n in counters.items():
                if n:
                    pipe.hincrby(f"{p}:{day}:{group}", metric, n)
        pipe.execute()

    def _summary(self, since: float | None, group_by: tuple[str, ...]) -> list[Row]:
        p = self.prefix
        first = None if since is None else utc_day(since)
        days = sorted(d for d in _strs(self._client.smembers(f"{p}:days")) if first is None or d >= first)
        pipe = self._client.pipeline(transaction=False)
        for day in days:
            pipe.smembers(f"{p}:groups:{day}")
        keys = [(day, group) for day, groups in zip(days, pipe.execute()) for group in sorted(_strs(groups))]
        pipe = self._client.pipeline(transaction=False)
        for day, group in keys:
            pipe.hgetall(f"{p}:{day}:{group}")
        sums: dict[tuple[str, ...], dict[str, int]] = {}
        for (day, group), counters in zip(keys, pipe.execute()):
            dims = dict(zip(_REDIS_DIMS, json.loads(group)))
            dims["day"] = day
            key = tuple(dims[c] for c in group_by)
            acc = sums.setdefault(key, dict.fromkeys(METRICS, 0))
            for metric in METRICS:
                acc[metric] += int(counters.get(metric, 0))
        return [Row(dict(zip(group_by, key)), **c) for key, c in sums.items() if c["requests"]]
