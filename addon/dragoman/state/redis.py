"""The Redis response store, shared by several Dragoman instances. One string per response
(``PREFIX:r:ID``, expiring after the TTL), a sorted set of ids by creation time and a hash of sizes for
the size cap; ``put`` runs as one Lua script, so two instances evicting at once stay consistent."""

from __future__ import annotations

import time
from typing import Any

from dragoman.ledger.store import redact_url
from dragoman.state.record import StoredResponse
from dragoman.state.store import DEFAULT_MAX_BYTES
from dragoman.state.store import DEFAULT_TTL
from dragoman.state.store import ResponseStore
from dragoman.state.store import StoreError

# KEYS: record, index, sizes, total; ARGV: id, body, ttl (s), created, max bytes, prefix, now
_PUT = """
local old = redis.call('HGET', KEYS[3], ARGV[1])
if old then redis.call('DECRBY', KEYS[4], old) end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], string.len(ARGV[2]))
redis.call('INCRBY', KEYS[4], string.len(ARGV[2]))
local function drop(id)
  local size = redis.call('HGET', KEYS[3], id)
  if size then redis.call('DECRBY', KEYS[4], size) end
  redis.call('HDEL', KEYS[3], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('DEL', ARGV[6] .. ':r:' .. id)
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[7] - ARGV[3], 'LIMIT', 0, 256)) do
  drop(id)
end
while tonumber(redis.call('GET', KEYS[4]) or '0') > tonumber(ARGV[5]) do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)
  if #oldest == 0 then break end
  drop(oldest[1])
end
return 1
"""


class RedisStore(ResponseStore):
    """Records in Redis under ``prefix`` (default ``dragoman:responses``)."""

    def __init__(
        self,
        url: str,
        *,
        ttl: float = DEFAULT_TTL,
        max_bytes: int = DEFAULT_MAX_BYTES,
        prefix: str = "dragoman:responses",
    ) -> None:
        super().__init__(ttl, max_bytes)
        try:
            import redis
        except ImportError:
            raise StoreError(
                "a Redis response store needs the redis package: pip install 'dragoman[ledger-redis]'"
            ) from None
        self.url = url
        self.prefix = prefix
        try:
            self._client: Any = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
            self._client.ping()
            self._put = self._client.register_script(_PUT)
        except Exception as e:
            raise StoreError(f"cannot reach the response store {self.describe()}: {e}") from e

    def describe(self) -> str:
        return redact_url(self.url)

    def _key(self, rid: str) -> str:
        return f"{self.prefix}:r:{rid}"

    def put(self, rec: StoredResponse) -> None:
        p = self.prefix
        try:
            self._put(
                keys=[self._key(rec.id), f"{p}:index", f"{p}:sizes", f"{p}:total"],
                args=[rec.id, rec.dumps(), max(1, int(self.ttl)), rec.created, self.max_bytes, p, time.time()],
            )
        except Exception as e:
            raise StoreError(f"cannot write to the response store {self.describe()}: {e}") from e

    def _get_many(self, ids: list[str]) -> list[bytes | None]:
        try:
            values: list[Any] = []
            for i in range(0, len(ids), 500):
                values.extend(self._client.mget([self._key(r) for r in ids[i : i + 500]]))
        except Exception as e:
            raise StoreError(f"cannot read the response store {self.describe()}: {e}") from e
        return [v if v is None else bytes(v) for v in values]

    def _delete(self, rid: str) -> None:
        p = self.prefix
        try:
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(self._key(rid))
            pipe.zrem(f"{p}:index", rid)
            pipe.execute()
            size = self._client.hget(f"{p}:sizes", rid)
            if size is not None and self._client.hdel(f"{p}:sizes", rid):
                self._client.decrby(f"{p}:total", int(size))
        except Exception as e:
            raise StoreError(f"cannot write to the response store {self.describe()}: {e}") from e

    def total_bytes(self) -> int:
        return int(self._client.get(f"{self.prefix}:total") or 0)

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # noqa: BLE001
            pass
