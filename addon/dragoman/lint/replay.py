"""Replay of repeated stream events for the live lint (``StreamLint``): the cheap path of ``dragoman_lint``.

A long stream is mostly the same delta event over and over, differing only in one string (the text, the
arguments fragment) and sometimes a counter (Responses' ``sequence_number``) or a padding string
(OpenAI's ``obfuscation``). After a checker has fully checked such an event it names those variable
fields (``Hot``: a tuple of ``(path, value, apply)``); ``learn`` cuts the event's raw frame bytes around
their values into a ``Template`` and proves the cut with a probe (the values swapped for markers, the
JSON parsed again, each marker found at its path). ``Template.match`` then accepts a following frame
when its bytes are the template's bytes with a complete JSON string in each string slot and the next
count in each count slot: that frame parses to the checked event with only those values changed, so the
grammar gives it the same verdict, and ``apply`` hands the checker the new values (the buffers it
concatenates). Anything else, including a violation, goes through the full parse and check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

_loads = orjson.loads
_dumps = orjson.dumps
#: a variable field of a checked event: (path into the event's JSON, its value, what the checker does
#: with a new value (None: nothing)); a str value is a string slot; an int value is a counter slot, whose
#: third element is the checker's object holding the next expected value in ``seq`` (shared by every
#: template, so a counter never goes back)
Slot = tuple[tuple[Any, ...], Any, Callable[[Any], Any] | None]
Hot = tuple[Slot, ...]


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    try:
        for k in path:
            obj = obj[k]
    except (KeyError, IndexError, TypeError):
        return None
    return obj


class Template:
    """One checked frame's bytes cut around its variable values (see the module docstring)."""

    __slots__ = ("head", "pieces", "counters", "applies")

    def __init__(self, head: bytes, pieces: list[bytes], counters: list[Any], applies: list[Any]) -> None:
        self.head = head
        #: the bytes after each slot (the last one: the frame's tail)
        self.pieces = pieces
        #: per slot: None (a string slot) or the object whose ``seq`` the counter must equal
        self.counters = counters
        self.applies = applies

    def match(self, raw: bytes) -> bool:
        """``raw`` (one frame, without its blank line) is this event again: apply its values, True."""
        if not raw.startswith(self.head):
            return False
        pos = len(self.head)
        pieces, counters = self.pieces, self.counters
        last = len(pieces) - 1
        values: list[Any] = []
        for i, nxt in enumerate(pieces):
            if i == last:
                end = len(raw) - len(nxt)
                if end < pos or not raw.endswith(nxt):
                    return False
            else:
                end = raw.find(nxt, pos)
                if end < 0:
                    return False
            counter = counters[i]
            if counter is None:
                if raw[pos : pos + 1] != b'"':
                    return False
                try:
                    v = _loads(raw[pos:end])
                except orjson.JSONDecodeError:
                    return False
                if type(v) is not str:  # pragma: no cover - a token opening with '"' is a string
                    return False
            else:
                v = counter.seq
                if raw[pos:end] != b"%d" % v:
                    return False
            values.append(v)
            pos = end + len(nxt)
        for i, v in enumerate(values):
            counter = counters[i]
            if counter is not None:
                counter.seq = v + 1
            else:
                apply = self.applies[i]
                if apply is not None:
                    apply(v)
        return True


def learn(raw: bytes, hot: Hot) -> Template | None:
    """The template of a frame the checker has just passed, or None (not one JSON data line, a value not
    found exactly once as written by orjson, or the probe disagrees)."""
    j = raw.find(b"data: ")
    if j < 0 or (j > 0 and raw[j - 1 : j] != b"\n") or raw.find(b"\n", j) >= 0:
        return None
    cuts: list[tuple[int, int, Slot]] = []
    for slot in hot:
        path, value, _ = slot
        key = path[-1]
        if not isinstance(key, str):
            return None
        enc = _dumps(value) if isinstance(value, str) else b"%d" % value
        for sep in (b'":', b'": '):
            needle = b'"' + key.encode() + sep + enc
            at = raw.find(needle, j)
            if at >= 0:
                break
        if at < 0 or raw.find(needle, at + 1) >= 0:
            return None
        start = at + len(needle) - len(enc)
        cuts.append((start, start + len(enc), slot))
    cuts.sort(key=lambda c: c[0])
    for (_, end, _), (start, _, _) in zip(cuts, cuts[1:]):
        if start < end:
            return None
    # the probe: each value swapped for a marker must parse back at its path
    probe, pieces, pos = [raw[:cuts[0][0]]], [], cuts[0][0]
    markers = []
    for n, (start, end, (path, value, _)) in enumerate(cuts):
        marker: Any = f"\x01{n}" if isinstance(value, str) else 900000001 + n
        markers.append(marker)
        nxt = cuts[n + 1][0] if n + 1 < len(cuts) else len(raw)
        probe += [_dumps(marker), raw[end:nxt]]
        pieces.append(raw[end:nxt])
        pos = nxt
    del pos
    try:
        obj = _loads(b"".join(probe)[j + 6 :])
    except orjson.JSONDecodeError:
        return None
    for (_, _, (path, _, _)), marker in zip(cuts, markers):
        got = _at(obj, path)
        if got != marker or type(got) is not type(marker):
            return None
    applies = [a for _, _, (_, _, a) in cuts]
    counters = [None if isinstance(v, str) else a for _, _, (_, v, a) in cuts]
    return Template(raw[: cuts[0][0]], pieces, counters, applies)
