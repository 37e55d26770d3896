"""Both assembled sides of one exchange, row by row: the answer as the upstream sent it and as the client got
it (each read back through its own protocol's decoder into the neutral IR, so the rows compare like with
like): thinking, text, each tool call (name and parsed arguments, then its id), error, stop reason, usage.

Two layouts of the same rows: ``columns`` (the upstream on the left, the client on the right; mitmweb's
view, ``inspect`` on a wide terminal) and ``stacked`` (80 columns: a row the two sides agree on is shown
once, a row where they differ shows both values under its label). A row where the sides differ is marked
``!=`` in the margin. Input: ``Assembled.as_dict()`` values; output: text lines. Pure functions.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

#: marks a row where the two sides differ (ASCII: ``inspect`` prints to any terminal)
MARK = "!="
LABEL = 12
#: shown for a value one side has and the other has not
NOTHING = "(nothing)"
#: characters of one value shown (the rest is counted, not shown)
VALUE_LIMIT = 600
#: the width the mitmweb view renders at (the browser scrolls; the console wraps)
VIEW_WIDTH = 110
#: below this many columns ``inspect`` stacks the two sides
MIN_COLUMNS_WIDTH = 100

Row = tuple[str, str, str]


def rows(up: dict[str, Any], cl: dict[str, Any]) -> list[Row]:
    """(label, upstream value, client value) for each thing either side said."""
    out: list[Row] = []
    for key, label in (("problem", "UNREADABLE"), ("thinking", "thinking"), ("text", "text")):
        if up.get(key) or cl.get(key):
            out.append((label, up.get(key) or "", cl.get(key) or ""))
    ucalls, ccalls = up.get("tool_calls") or [], cl.get("tool_calls") or []
    for i in range(max(len(ucalls), len(ccalls))):
        u = ucalls[i] if i < len(ucalls) else None
        c = ccalls[i] if i < len(ccalls) else None
        out.append((f"tool call {i + 1}", _call(u), _call(c)))
        out.append((f"call {i + 1} id", u["id"] if u else "", c["id"] if c else ""))
    if up.get("error") or cl.get("error"):
        out.append(("error", up.get("error") or "", cl.get("error") or ""))
    out.append(("stop", str(up.get("stop")), str(cl.get("stop"))))
    uu, cu = up.get("usage"), cl.get("usage")
    out.append(("usage", _usage(uu, cu), _usage(cu, uu)))
    if up.get("truncated") or cl.get("truncated"):
        out.append(("kept", _kept(up), _kept(cl)))
    return out


def _call(c: dict[str, Any] | None) -> str:
    if c is None:
        return ""
    args = c["arguments"]
    shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True)
    return f"{c['name']} {shown}"


_USAGE = (
    ("input_tokens", "in"),
    ("output_tokens", "out"),
    ("cache_read_tokens", "cache read"),
    ("cache_creation_tokens", "cache write"),
    ("reasoning_tokens", "reasoning"),
)


def _usage(u: dict[str, Any] | None, other: dict[str, Any] | None) -> str:
    """Input and output always; a cache or reasoning figure when either side has one above 0 (a protocol
    without the field and one reporting 0 agree)."""
    if not u:
        return "none"
    o = other or {}
    shown = [f"{short} {u.get(k) or 0}" for n, (k, short) in enumerate(_USAGE) if n < 2 or u.get(k) or o.get(k)]
    return ", ".join(shown)


def _kept(side: dict[str, Any]) -> str:
    return "truncated at the keep limit" if side.get("truncated") else "whole"


def _heading(side: dict[str, Any], who: str) -> str:
    events = side.get("events")
    return f"{who} ({side.get('protocol')}, {events} events)" if events else f"{who} ({side.get('protocol')})"


def _short(value: str) -> str:
    value = " ".join(value.split())
    return value if len(value) <= VALUE_LIMIT else value[:VALUE_LIMIT] + f"... ({len(value)} chars)"


def _wrap(value: str, width: int) -> list[str]:
    return textwrap.wrap(_short(value), max(width, 10), break_long_words=True) or [""]


def columns(up: dict[str, Any], cl: dict[str, Any], width: int = VIEW_WIDTH) -> list[str]:
    """The two sides in two columns (upstream left, client right), ``width`` characters at most."""
    col = (width - 3 - LABEL - 3) // 2
    pad = " " * (3 + LABEL)
    lines = [f"{pad}{_heading(up, 'upstream sent'):<{col}} | {_heading(cl, 'client got')}".rstrip()]
    for label, u, c in rows(up, cl):
        mark = MARK if u != c else ""
        left, right = _wrap(u or NOTHING if c else u, col), _wrap(c or NOTHING if u else c, col)
        for n in range(max(len(left), len(right))):
            head = f"{mark:<2} {label:<{LABEL}}" if n == 0 else pad
            a = left[n] if n < len(left) else ""
            b = right[n] if n < len(right) else ""
            lines.append(f"{head}{a:<{col}} | {b}".rstrip())
    return lines


def stacked(up: dict[str, Any], cl: dict[str, Any], width: int = 80) -> list[str]:
    """The two sides one after the other, row by row: a row both sides agree on is shown once, a row where
    they differ shows each side's value under its label."""
    uh, ch = f"upstream sent ({up.get('protocol')})", f"client got ({cl.get('protocol')})"
    lines = [
        f"   {_heading(up, 'upstream sent')},",
        f"   {_heading(cl, 'client got')};",
        "   a row without the mark: both sides say the same",
    ]
    inner = width - 7
    for label, u, c in rows(up, cl):
        if u == c:
            lines += _labelled(f"   {label}: ", u, inner)
            continue
        lines.append(f"{MARK} {label}:")
        for who, value in ((uh, u), (ch, c)):
            lines += _labelled(f"     {who}: ", value or NOTHING, inner)
    return lines


def _labelled(head: str, value: str, inner: int) -> list[str]:
    """``head`` and the value on one line when it fits, else the value wrapped under it."""
    short = _short(value)
    if len(head) + len(short) <= inner + 7:
        return [head + short]
    return [head.rstrip()] + [f"       {v}" for v in _wrap(value, inner)]


def two_sides(up: dict[str, Any], cl: dict[str, Any], width: int) -> list[str]:
    """Columns when ``width`` allows, else stacked."""
    return columns(up, cl, width) if width >= MIN_COLUMNS_WIDTH else stacked(up, cl, width)


def differences(up: dict[str, Any], cl: dict[str, Any]) -> list[str]:
    """The labels of the rows where the two sides differ."""
    return [label.strip() for label, u, c in rows(up, cl) if u != c]
