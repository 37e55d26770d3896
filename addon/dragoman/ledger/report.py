"""``python -m dragoman usage``: the ledger's summary as an aligned table (with a totals line) or as JSON.

``--since`` takes a UTC date (``2026-11-01``), a date and time (``2026-11-01T09:30``, UTC unless it
carries an offset) or an age (``90m``, ``24h``, ``7d``, ``2w``)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from datetime import UTC
from datetime import datetime
from typing import TextIO

from dragoman.ledger.open import open_ledger
from dragoman.ledger.record import DEFAULT_GROUP_BY
from dragoman.ledger.record import GROUP_COLUMNS
from dragoman.ledger.record import METRICS
from dragoman.ledger.record import Row
from dragoman.ledger.record import check_group_by
from dragoman.ledger.record import total
from dragoman.ledger.store import DEFAULT_LEDGER
from dragoman.ledger.store import Ledger
from dragoman.ledger.store import LedgerError
from dragoman.ledger.store import LedgerMissing
from dragoman.ledger.store import redact_url

LEDGER_ENV = "DRAGOMAN_LEDGER"  # the default --ledger
_AGE = re.compile(r"(\d+)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_TITLES = {
    "client": "client",
    "route": "route",
    "upstream": "upstream",
    "model": "model",
    "client_model": "client model",
    "day": "day",
    "requests": "requests",
    "errors": "errors",
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_tokens": "cache read",
    "cache_write_tokens": "cache write",
    "estimated": "estimated",
}


def parse_since(text: str, now: float | None = None) -> float:
    """``text`` as epoch seconds. Raises ``ValueError`` with a message that says what is accepted."""
    value = text.strip()
    age = _AGE.fullmatch(value.lower())
    if age:
        return (time.time() if now is None else now) - int(age.group(1)) * _UNIT[age.group(2)]
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            dt = datetime.strptime(value, "%Y-%m-%d")
        elif re.fullmatch(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}.*", value):
            dt = datetime.fromisoformat(value)
        else:
            raise ValueError
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a date (2026-11-01), a date and time (2026-11-01T09:30, UTC unless it has an "
            "offset like +02:00) nor an age (a whole number and s, m, h, d or w: 90m, 24h, 7d)"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def parse_by(text: str) -> tuple[str, ...]:
    """``client,upstream,model`` -> the columns (``""`` = no grouping: one line of totals)."""
    cols = [c.strip().replace("-", "_") for c in text.split(",") if c.strip()]
    return check_group_by(cols)


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _cell(col: str, value: str) -> str:
    if value:
        return value
    return "(anonymous)" if col == "client" else "-"


def format_table(
    rows: list[Row], group_by: tuple[str, ...], since: float | None, where: str, granularity: str = "exact"
) -> str:
    """The summary as text: a heading line, the aligned table (text left, numbers right) and a totals line."""
    span = "all recorded usage" if since is None else f"usage since {_utc(since)}"
    if since is not None and granularity == "day":
        span += " (whole UTC days)"
    by = f", by {', '.join(_TITLES[c] for c in group_by)}" if group_by else ""
    heading = f"Dragoman {span}{by} (ledger {where})"
    if not rows:
        return f"{heading}\nNo requests recorded.\n"
    header = [_TITLES[c] for c in group_by] + [_TITLES[m] for m in METRICS]
    body = [[_cell(c, r.group[c]) for c in group_by] + [f"{v:,}" for v in r.counters().values()] for r in rows]
    tot = total(rows)
    totals: list[str] | None = (["total"] + [""] * (len(group_by) - 1) if group_by else []) + [
        f"{v:,}" for v in tot.counters().values()
    ]
    if not group_by:
        header, body, totals = ["", *header], [["total", *body[0]]], None
    ntext = len(header) - len(METRICS)
    widths = [max(len(line[i]) for line in [header, *body, *([totals] if totals else [])]) for i in range(len(header))]

    def fmt(line: list[str]) -> str:
        cells = [s.ljust(w) if i < ntext else s.rjust(w) for i, (s, w) in enumerate(zip(line, widths))]
        return "  ".join(cells).rstrip()

    out = [heading, fmt(header), *(fmt(line) for line in body)]
    if totals:
        out += ["  ".join("-" * w for w in widths), fmt(totals)]
    return "\n".join(out) + "\n"


def to_json(
    rows: list[Row],
    group_by: tuple[str, ...],
    since: float | None,
    where: str,
    granularity: str,
    recorded: bool = True,
) -> str:
    """The summary as JSON; ``recorded`` False: no ledger exists there yet (``rows`` empty, totals zero)."""
    doc = {
        "ledger": where,
        "ledger_exists": recorded,
        "since": None if since is None else datetime.fromtimestamp(since, UTC).isoformat().replace("+00:00", "Z"),
        "since_granularity": granularity,
        "group_by": list(group_by),
        "rows": [r.as_dict() for r in rows],
        "total": total(rows).counters(),
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _since_arg(text: str) -> float:
    try:
        return parse_since(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _by_arg(text: str) -> tuple[str, ...]:
    try:
        return parse_by(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``usage`` to the ``python -m dragoman`` subcommands; its ``func`` is ``cmd_usage``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "usage",
        help="print the usage ledger: requests, errors and tokens per client, upstream and model",
        description="Print what the usage ledger counted: requests, errors, input/output/cache tokens, and how "
        "many requests had their tokens estimated (the upstream reported none).",
    )
    p.add_argument(
        "--since",
        type=_since_arg,
        help="only usage from then on: a UTC date (2026-11-01), a date and time (2026-11-01T09:30) or an age "
        "(90m, 24h, 7d, 2w). Redis ledgers count whole UTC days.",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--ledger",
        default=None,
        help=f"the ledger: a SQLite file path, sqlite://PATH or redis://... (default ${LEDGER_ENV}, else "
        f"{DEFAULT_LEDGER})",
    )
    p.add_argument(
        "--by",
        type=_by_arg,
        default=DEFAULT_GROUP_BY,
        help=f"group by these columns, comma-separated (default {','.join(DEFAULT_GROUP_BY)}; any of "
        f"{','.join(GROUP_COLUMNS)}; '' for totals only)",
    )
    p.set_defaults(func=cmd_usage)
    return p


def cmd_usage(args: argparse.Namespace, extra: list[str], out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if extra:
        print(f"dragoman usage: unexpected arguments {' '.join(extra)}", file=sys.stderr)
        return 2
    spec = args.ledger or os.environ.get(LEDGER_ENV) or DEFAULT_LEDGER
    try:
        ledger: Ledger = open_ledger(spec, readonly=True)
    except LedgerMissing:
        # nothing recorded yet is an answer, not a failure: a script asking for JSON gets an empty report
        where = redact_url(spec)
        if args.json:
            out.write(to_json([], args.by, args.since, where, "exact", recorded=False))
        else:
            out.write(f"no usage recorded yet (no ledger at {where}; another ledger? --ledger or ${LEDGER_ENV})\n")
        return 0
    except LedgerError as e:
        print(f"dragoman usage: {e}", file=sys.stderr)
        return 1
    try:
        rows = ledger.summary(args.since, args.by)
        since = ledger.effective_since(args.since)
        where, granularity = ledger.describe(), ledger.since_granularity
    except LedgerError as e:
        print(f"dragoman usage: {e}", file=sys.stderr)
        return 1
    finally:
        ledger.close()
    if args.json:
        out.write(to_json(rows, args.by, since, where, granularity))
    else:
        out.write(format_table(rows, args.by, since, where, granularity))
    return 0
