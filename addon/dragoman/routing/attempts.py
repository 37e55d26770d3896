"""The attempts of one request: which candidate and key to try next, and when to stop.

The caller (the I/O layer) asks ``next(now)``, makes the attempt, and reports ``failed(...)`` or
``succeeded(...)``. Key-bound failures move to the same upstream's next key, upstream-bound failures to the
route's next entry; a request-bound failure ends it. ``max_attempts`` and ``deadline`` bound the whole.
Once a byte has gone to the client nothing here is consulted again.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any

from dragoman.routing.classify import ErrorClass
from dragoman.routing.pool import KeyPool
from dragoman.routing.router import Candidate
from dragoman.routing.spec import KeyRef
from dragoman.routing.spec import Limits


@dataclass(slots=True)
class Attempt:
    number: int  # 1-based
    candidate: Candidate
    key_index: int | None  # None: the client's own key
    started: float

    @property
    def key(self) -> KeyRef | None:
        return None if self.key_index is None else self.candidate.upstream.keys[self.key_index]

    def label(self) -> str:
        key = "client key" if self.key_index is None else f"key {self.key_index}"
        return f"{self.candidate} ({key})"


@dataclass(slots=True)
class Outcome:
    """One attempt as logged and stored in the flow's metadata (JSON-able, no secrets)."""

    upstream: str
    model: str
    key: int | None
    status: int | None
    error_class: str | None
    seconds: float
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream,
            "model": self.model,
            "key": self.key,
            "status": self.status,
            "class": self.error_class,
            "seconds": round(self.seconds, 4),
            "detail": self.detail,
        }


@dataclass(slots=True)
class Attempts:
    candidates: list[Candidate]
    pools: dict[str, KeyPool]
    limits: Limits
    outcomes: list[Outcome] = field(default_factory=list)
    #: index into ``candidates`` of the entry being tried
    _at: int = 0
    _tried_keys: set[int] = field(default_factory=set)
    _first: float | None = None
    _stopped: bool = False
    #: why no (further) attempt was possible, for the error the client gets when none answered
    skipped: list[str] = field(default_factory=list)

    def next(self, now: float) -> Attempt | None:
        if self._stopped or len(self.outcomes) >= self.limits.max_attempts:
            return None
        if self._first is not None and now - self._first >= self.limits.deadline:
            self.skipped.append(f"deadline of {self.limits.deadline:.0f} s passed")
            return None
        while self._at < len(self.candidates):
            cand = self.candidates[self._at]
            pool = self.pools.get(cand.upstream.name)
            if pool is None or not len(pool):
                if not self._tried_keys:  # a key-less upstream is tried once, with the client's key
                    self._tried_keys.add(-1)
                    return self._start(cand, None, now)
            else:
                index = pool.pick(now, self._tried_keys)
                if index is not None:
                    self._tried_keys.add(index)
                    return self._start(cand, index, now)
                if not self._tried_keys:
                    wait = pool.soonest(now) or 0.0
                    self.skipped.append(f"{cand.upstream.name}: every key is resting ({wait:.0f} s to go)")
            self._advance()
        return None

    def _start(self, cand: Candidate, key: int | None, now: float) -> Attempt:
        if self._first is None:
            self._first = now
        return Attempt(len(self.outcomes) + 1, cand, key, now)

    def _advance(self) -> None:
        self._at += 1
        self._tried_keys = set()

    def failed(
        self,
        attempt: Attempt,
        cls: ErrorClass,
        now: float,
        status: int | None = None,
        retry_after: float | None = None,
        detail: str = "",
    ) -> None:
        self._record(attempt, now, status, cls, detail)
        pool = self.pools.get(attempt.candidate.upstream.name)
        if cls is ErrorClass.REQUEST:
            self._stopped = True
            return
        if cls is ErrorClass.KEY and pool is not None and attempt.key_index is not None:
            if status == 429 or (status is not None and status < 500 and status not in (401, 403)):
                seconds = retry_after if retry_after is not None else self.limits.cooldown
                pool.rest(attempt.key_index, now, seconds, f"HTTP {status}")
            else:
                pool.rest(attempt.key_index, now, self.limits.bench, f"HTTP {status}: refused, benched")
            return  # same upstream, next key (``next`` moves on when the pool has none left)
        self._advance()

    def succeeded(self, attempt: Attempt, now: float, status: int) -> None:
        self._record(attempt, now, status, None, "")
        self._stopped = True

    def _record(self, attempt: Attempt, now: float, status: int | None, cls: ErrorClass | None, detail: str) -> None:
        c = attempt.candidate
        self.outcomes.append(
            Outcome(
                c.upstream.name,
                c.model,
                attempt.key_index,
                status,
                cls.value if cls else None,
                now - attempt.started,
                detail,
            )
        )

    def resting_for(self, now: float) -> float | None:
        """When no attempt could be made because keys rest: the soonest a key is usable again."""
        waits = [p.soonest(now) for c in self.candidates if (p := self.pools.get(c.upstream.name)) is not None]
        known = [w for w in waits if w is not None]
        return min(known) if known else None
