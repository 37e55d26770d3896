"""What the usage ledger keeps: one ``UsageRecord`` per request Dragoman served, and the ``Row`` a summary
gives back. Names only, never a key: ``client`` is the client key's *name*."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

# the dimensions a summary can group by; "day" is the UTC day (YYYY-MM-DD) of ``ts``
GROUP_COLUMNS = ("client", "route", "upstream", "model", "client_model", "day")
DEFAULT_GROUP_BY = ("client", "upstream", "model")
# the counters a summary adds up, in table order
METRICS = (
    "requests",
    "errors",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "estimated",
)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One request as the ledger counts it (built by the addon when the response is complete)."""

    ts: float  # time.time() when the request finished
    client: str  # the client key's NAME; "" when anonymous (no client keys configured). Never a key.
    route: str  # the matching route's pattern, "" without routes
    upstream: str  # the upstream's name
    model: str  # the model the upstream was asked for
    client_model: str  # the model the client asked for
    status: int  # the HTTP status the client got
    error: bool  # the client got an error (status >= 400, a connection failure, or an error event mid-stream)
    input_tokens: int  # uncached input tokens, as the upstream reported them (or estimated)
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    estimated: bool  # the upstream reported no usage: the token counts are Dragoman's estimate
    stream: bool
    attempts: int  # upstream attempts (failover tries included), >= 1


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a summary: the group's values (``group``, keyed by the ``group_by`` columns, in their
    order) and the counters added up over its records. ``estimated`` counts the records whose tokens
    were estimated."""

    group: dict[str, str] = field(default_factory=dict)
    requests: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    estimated: int = 0

    def counters(self) -> dict[str, int]:
        return {m: getattr(self, m) for m in METRICS}

    def as_dict(self) -> dict[str, str | int]:
        return {**self.group, **self.counters()}


def total(rows: list[Row]) -> Row:
    """The counters of ``rows`` added up (no group)."""
    sums = dict.fromkeys(METRICS, 0)
    for r in rows:
        for m in METRICS:
            sums[m] += getattr(r, m)
    return Row(group={}, **sums)


def check_group_by(group_by: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``group_by`` as a tuple of known, distinct columns. Raises ``ValueError`` naming the bad one."""
    out: list[str] = []
    for col in group_by:
        if col not in GROUP_COLUMNS:
            raise ValueError(f"cannot group by {col!r}: choose from {', '.join(GROUP_COLUMNS)}")
        if col in out:
            raise ValueError(f"{col!r} is listed twice")
        out.append(col)
    return tuple(out)
