"""Upstream failures before the first byte, in three classes (the three-protocol adapter reference):

* ``KEY``      429, 401, 403, 402 and quota/billing errors: the key is the problem, try the pool's next key
* ``UPSTREAM`` 5xx, 529, connection refused/reset, TLS failure, timeouts: try the route's next entry
* ``REQUEST``  400, 404, 413, 422 and other 4xx: the request is the problem, never retried
"""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from enum import StrEnum


class ErrorClass(StrEnum):
    KEY = "key"
    UPSTREAM = "upstream"
    REQUEST = "request"


#: words in a 4xx body that say the account, not the request, is the problem
QUOTA_MARKERS = (b"insufficient_quota", b"credit balance", b"billing", b"insufficient balance", b"quota exceeded")


def classify(status: int, body: bytes = b"") -> ErrorClass:
    if status in (401, 402, 403, 429):
        return ErrorClass.KEY
    if status >= 500 or status == 408:
        return ErrorClass.UPSTREAM
    low = body[:4096].lower()
    if any(m in low for m in QUOTA_MARKERS):
        return ErrorClass.KEY
    return ErrorClass.REQUEST


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds from ``retry-after`` (delta seconds or an HTTP date) or ``retry-after-ms``; None if absent/bad."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)
