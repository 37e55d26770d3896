"""The records the ledger tests feed in (also the source of the shipped ``data/usage-v1.sqlite3``)."""

from __future__ import annotations

import calendar
import time

from dragoman.ledger import GROUP_COLUMNS
from dragoman.ledger import Row
from dragoman.ledger import UsageRecord
from dragoman.ledger.record import METRICS

DAY1 = calendar.timegm((2026, 11, 1, 0, 0, 0))  # 2026-11-01 00:00 UTC
HOUR = 3600.0


def rec(ts: float = DAY1 + HOUR, **fields) -> UsageRecord:
    base = dict(
        client="alice",
        route="claude-*",
        upstream="deepseek",
        model="deepseek-chat",
        client_model="claude-sonnet-4-5",
        status=200,
        error=False,
        input_tokens=100,
        output_tokens=20,
        cache_read_tokens=0,
        cache_write_tokens=0,
        estimated=False,
        stream=True,
        attempts=1,
    )
    base.update(fields)
    return UsageRecord(ts=ts, **base)


def mixed_records() -> list[UsageRecord]:
    """Three days, three client names (one anonymous), two upstreams, errors, estimates, cache tokens."""
    out = []
    clients = ["alice", "bob", ""]
    targets = [
        ("deepseek", "deepseek-chat", "claude-*"),
        ("anthropic", "claude-sonnet-4-5", ""),
        ("deepseek", "deepseek-reasoner", "o*"),
    ]
    for i in range(60):
        upstream, model, route = targets[i % 3]
        out.append(
            rec(
                DAY1 + i * 1.3 * HOUR,
                client=clients[(i // 2) % 3],
                route=route,
                upstream=upstream,
                model=model,
                client_model=f"client-model-{i % 4}",
                status=500 if i % 7 == 0 else 200,
                error=i % 7 == 0,
                input_tokens=1000 + 17 * i,
                output_tokens=5 * i,
                cache_read_tokens=(i % 5) * 64,
                cache_write_tokens=(i % 3) * 32,
                estimated=i % 11 == 0,
                stream=i % 2 == 0,
                attempts=1 + i % 2,
            )
        )
    return out


def reference(records: list[UsageRecord], group_by: tuple[str, ...], since: float | None = None) -> list[Row]:
    """The summary computed directly from the records (what both backends must return)."""
    sums: dict[tuple[str, ...], dict[str, int]] = {}
    for r in records:
        if since is not None and r.ts < since:
            continue
        values = {f: getattr(r, f) for f in GROUP_COLUMNS if f != "day"}
        values["day"] = time.strftime("%Y-%m-%d", time.gmtime(r.ts))
        acc = sums.setdefault(tuple(values[c] for c in group_by), dict.fromkeys(METRICS, 0))
        acc["requests"] += 1
        acc["errors"] += r.error
        acc["input_tokens"] += r.input_tokens
        acc["output_tokens"] += r.output_tokens
        acc["cache_read_tokens"] += r.cache_read_tokens
        acc["cache_write_tokens"] += r.cache_write_tokens
        acc["estimated"] += r.estimated
    return [Row(dict(zip(group_by, k)), **v) for k, v in sorted(sums.items())]
