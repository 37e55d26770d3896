"""The usage ledger: per client name, route, upstream and model, the requests, errors and tokens Dragoman
served. I/O (SQLite, Redis) but no mitmproxy: the addon builds a ``UsageRecord`` per finished request and
calls ``Ledger.add``; ``python -m dragoman usage`` prints ``Ledger.summary``."""

from dragoman.ledger.open import open_ledger
from dragoman.ledger.record import DEFAULT_GROUP_BY
from dragoman.ledger.record import GROUP_COLUMNS
from dragoman.ledger.record import Row
from dragoman.ledger.record import UsageRecord
from dragoman.ledger.redis import RedisLedger
from dragoman.ledger.sqlite import SQLiteLedger
from dragoman.ledger.store import DEFAULT_LEDGER
from dragoman.ledger.store import Ledger
from dragoman.ledger.store import LedgerError
from dragoman.ledger.store import LedgerMissing
from dragoman.ledger.store import LedgerStats

__all__ = [
    "DEFAULT_GROUP_BY",
    "DEFAULT_LEDGER",
    "GROUP_COLUMNS",
    "Ledger",
    "LedgerError",
    "LedgerMissing",
    "LedgerStats",
    "RedisLedger",
    "Row",
    "SQLiteLedger",
    "UsageRecord",
    "open_ledger",
]
