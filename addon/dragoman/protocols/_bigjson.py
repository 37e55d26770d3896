"""Parsing a large request body without the parser's own copy of its long strings.

``orjson.loads`` (like ``json.loads``) briefly holds about twice a string's size while it builds it: a
100 MiB base64 image in a request costs the body plus 200 MiB at the peak. ``loads`` cuts every long plain
string (no escapes, no control characters: base64 data, long text) out of the body, parses the small rest,
and puts each string back as a ``str`` made straight from the body's bytes (one copy, no scratch), so the
peak is the body plus its strings.

A run of bytes is only taken for a string when it sits between two quotes; were it not a string after all
(a quote closing one string, the run, a quote opening the next), the placeholder would land outside any
string and the rest would not parse: then the body is parsed as it is. Any doubt falls back to
``orjson.loads`` of the whole body, which also gives the error messages.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

#: bodies at least this large are parsed this way
LARGE_BODY = 4 << 20
#: strings at least this long are cut out
LONG_STRING = 256 << 10
#: what a string must not hold to be taken as it is (escapes, control characters, the quote itself)
_SPECIAL = re.compile(rb'["\\\x00-\x1f]')
_MARK = "\x00dragoman-long-string-"


def loads(body: bytes) -> Any:
    """Like ``orjson.loads(body)`` (same result, same exceptions)."""
    if len(body) < LARGE_BODY:
        return orjson.loads(body)
    spans = _long_strings(body)
    if not spans:
        return orjson.loads(body)
    view = memoryview(body)
    try:
        values = [str(view[a:b], "utf-8") for a, b in spans]  # straight from the body's bytes: one copy
    except UnicodeDecodeError:
        return orjson.loads(body)  # invalid UTF-8: orjson says where
    pieces: list[bytes] = []
    pos = 0
    for i, (a, b) in enumerate(spans):
        pieces.append(body[pos:a])
        pieces.append(b"\\u0000dragoman-long-string-%d" % i)
        pos = b
    pieces.append(body[pos:])
    try:
        skeleton = orjson.loads(b"".join(pieces))
    except orjson.JSONDecodeError:
        return orjson.loads(body)
    found: list[int] = []
    out = _restore(skeleton, values, found)
    if out is None or sorted(found) != list(range(len(spans))):
        return orjson.loads(body)  # a long key, or a client string that looked like a placeholder
    return out


def _long_strings(body: bytes) -> list[tuple[int, int]]:
    """(start, end) of the contents of long plain strings: quote, >= LONG_STRING plain bytes, quote.

    Probes every LONG_STRING // 2 bytes (a run that long covers a probe) and widens a probe that falls
    in plain bytes to the quotes around it: the cost is the probes plus the long strings' own bytes."""
    spans: list[tuple[int, int]] = []
    search = _SPECIAL.search
    step = LONG_STRING // 2
    n = len(body)
    p = step
    while p < n:
        m = search(body, p)
        if m is None:
            break
        right = m.start()
        if right == p:
            p += step
            continue
        quote = body.rfind(b'"', 0, p)  # back to the run's start at most: the run holds no quote
        left = max(quote, body.rfind(b"\\", quote + 1, p))
        if (
            right - left - 1 >= LONG_STRING
            and body[left : left + 1] == b'"'
            and body[right : right + 1] == b'"'
            and body[left - 1 : left] != b"\\"
            and search(body, left + 1, right) is None
        ):
            spans.append((left + 1, right))
        p = max(right + 1, p + step)
    return spans


def _restore(node: Any, values: list[str], found: list[int]) -> Any:
    """``node`` with every placeholder string replaced by its value (iterative over containers)."""
    root = [node]
    stack: list[Any] = [root]
    while stack:
        cont = stack.pop()
        items = cont.items() if isinstance(cont, dict) else enumerate(cont)
        for k, v in list(items):
            if isinstance(v, str):
                if v.startswith(_MARK):
                    idx = _index(v)
                    if idx is None or idx >= len(values):
                        return None
                    cont[k] = values[idx]
                    found.append(idx)
            elif isinstance(v, (dict, list)):
                stack.append(v)
    return root[0]


def _index(mark: str) -> int | None:
    tail = mark[len(_MARK) :]
    return int(tail) if tail.isdigit() and len(tail) < 9 else None
