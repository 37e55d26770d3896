"""Key pools: per upstream, keys are used in turn; a key that hit a 429 rests for its ``retry-after``, a key
refused with 401/403 is benched for a long time. State is one float per key: bounded whatever the traffic."""

from __future__ import annotations

import logging

from dragoman.logsafe import logsafe
from dragoman.routing.spec import KeyRef

logger = logging.getLogger(__name__)


class KeyPool:
    __slots__ = ("upstream", "keys", "_cursor", "_until", "_why")

    def __init__(self, upstream: str, keys: tuple[KeyRef, ...]) -> None:
        self.upstream = upstream
        self.keys = keys
        self._cursor = 0
        self._until = [0.0] * len(keys)
        self._why = [""] * len(keys)

    def __len__(self) -> int:
        return len(self.keys)

    def available(self, index: int, now: float) -> bool:
        return self._until[index] <= now

    def pick(self, now: float, exclude: set[int]) -> int | None:
        """The next usable key in turn (round robin across requests), skipping resting keys and ``exclude``."""
        n = len(self.keys)
        for step in range(n):
            i = (self._cursor + step) % n
            if i not in exclude and self._until[i] <= now:
                self._cursor = (i + 1) % n
                return i
        return None

    def rest(self, index: int, now: float, seconds: float, why: str) -> None:
        """Keep key ``index`` out of turn for ``seconds``. Logged once per resting period, by label only."""
        until = now + seconds
        if until <= self._until[index]:
            return
        fresh = self._until[index] <= now or self._why[index] != why
        self._until[index] = until
        self._why[index] = why
        if fresh:
            logger.warning(
                "upstream %s: key %d (%s) rests for %.0f s: %s",
                logsafe(self.upstream),
                index,
                logsafe(self.keys[index].label),
                seconds,
                logsafe(why),
            )

    def soonest(self, now: float) -> float | None:
        """Seconds until some key is usable again (0 if one is usable now); None for an empty pool."""
        if not self.keys:
            return None
        return max(0.0, min(self._until) - now)

    def carry_from(self, old: KeyPool) -> None:
        """Keep the resting state of keys that survived a reload (same secret)."""
        by_value = {k.value: i for i, k in enumerate(old.keys)}
        for i, key in enumerate(self.keys):
            j = by_value.get(key.value)
            if j is not None:
                self._until[i] = old._until[j]
                self._why[i] = old._why[j]
