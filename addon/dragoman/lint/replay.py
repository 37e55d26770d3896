"""Replay of repeated stream events for the live lint (``StreamLint``): the cheap path of ``dragoman_lint``.

A long stream is mostly the same delta event over and over, differing only in one string (the text, the
arguments fragment) and sometimes a counter (Responses' ``sequence_number``) or a padding string
(OpenAI's ``obfuscation``). After a checker has fully checked such an event it names those variable
fields (``Hot``: a tuple of ``(path, value, apply)``); ``learn`` cuts the event's raw frame bytes around
their values and proves the cut with a probe (each value swapped for a marker, the JSON parsed again,
each marker found at its path). The cut becomes a ``Template``: a bytes regex of the frame, its literal
bytes as checked and a JSON-string or digits slot in place of each value. ``Template.run`` takes, in C,
the longest run of consecutive frames that match it, then parses all their string slots in one
``orjson.loads`` (any invalid string, escape or UTF-8 and the run is refused) and checks the counters
count on: each such frame parses to the checked event with only those values changed, so the grammar
gives it the same verdict. ``apply`` hands the checker the new strings (what it concatenates). Anything
else, including every violation, goes through the full parse and check.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

_loads = orjson.loads
_dumps = orjson.dumps
#: a variable field of a checked event: (path into the event's JSON, its value, what the checker does
#: with a run of new values (a list; None: nothing)); a str value is a string slot; an int value is a
#: counter slot, whose third element is the checker's object holding the next expected value in ``seq``
#: (shared by every template, so a counter never goes back)
Slot = tuple[tuple[Any, ...], Any, Callable[[list[Any]], Any] | Any | None]
Hot = tuple[Slot, ...]
#: a JSON string token (its content is validated by the parse of the run's values) and a counter
_STR = rb'"(?:[^"\\\n\r]++|\\[^\n\r])*+"'
_NUM = rb"\d+"
#: frames a template matches one by one before its regex is compiled
_COMPILE = 8


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    try:
        for k in path:
            obj = obj[k]
    except (KeyError, IndexError, TypeError):
        return None
    return obj


class Template:
    """One checked frame's bytes cut around its variable values (see the module docstring)."""

    __slots__ = ("literals", "one", "body", "many", "counters", "applies", "hits")

    def __init__(self, literals: list[bytes], counters: list[Any], applies: list[Any]) -> None:
        #: the bytes before, between and after the slots
        self.literals = literals
        #: per slot: None (a string slot) or the object whose ``seq`` the counter must equal
        self.counters = counters
        self.applies = applies
        self.hits = 0
        #: compiled once the template has matched ``_COMPILE`` frames one by one (re's parser is slow)
        self.one: re.Pattern[bytes] | None = None
        self.many: re.Pattern[bytes] | None = None
        self.body = b""

    def compile(self) -> None:
        slots = [_STR if c is None else _NUM for c in self.counters]
        lits = [re.escape(lit) for lit in self.literals]
        one = lits[0] + b"".join(b"(" + s + b")" + lit for s, lit in zip(slots, lits[1:]))
        #: one frame with its slots captured; the frame without captures; a run of frames
        self.one = re.compile(one + b"\n\n")
        self.body = lits[0] + b"".join(s + lit for s, lit in zip(slots, lits[1:])) + b"\n\n"
        self.many = re.compile(b"(?:" + self.body + b")+")

    def run(self, buf: bytes, pos: int, end: int) -> tuple[int, int]:
        """The frames from ``pos`` that are this event again -> (where they end, how many: 0 for none);
        their values are applied."""
        if self.many is None:
            if self.hits < _COMPILE:
                return self.match(buf, pos)
            self.compile()
            assert self.many is not None
        m = self.many.match(buf, pos, end)
        if m is None:
            return pos, 0
        stop = m.end()
        got = self.collect(buf, pos, stop)
        if got is None:
            return pos, 0
        self.apply(*got)
        return stop, got[0]

    def match(self, buf: bytes, pos: int) -> tuple[int, int]:
        """One frame at ``pos``, by bytes comparisons (before the template is compiled)."""
        stop = buf.find(b"\n\n", pos)
        lits = self.literals
        if not buf.startswith(lits[0], pos):
            return pos, 0
        at = pos + len(lits[0])
        last = len(lits) - 1
        values: list[Any] = []
        for i, counter in enumerate(self.counters, 1):
            lit = lits[i]
            if i == last:
                cut = stop - len(lit)
                if cut < at or not buf.startswith(lit, cut):
                    return pos, 0
            else:
                cut = buf.find(lit, at, stop)
                if cut < 0:
                    return pos, 0
            tok = buf[at:cut]
            if counter is None:
                if tok[:1] != b'"':
                    return pos, 0
                try:
                    values.append([_loads(tok)])
                except orjson.JSONDecodeError:
                    return pos, 0
            else:
                if tok != b"%d" % counter.seq:
                    return pos, 0
                values.append(None)
            at = cut + len(lit)
        self.hits += 1
        self.apply(1, values)
        return stop + 2, 1

    def collect(self, buf: bytes, pos: int, stop: int) -> tuple[int, list[Any]] | None:
        """This template's frames in ``buf[pos:stop]`` -> (how many, their values), or None when a value
        is not a valid JSON string or a counter does not count on."""
        assert self.one is not None
        found = self.one.findall(buf, pos, stop)
        counters = self.counters
        cols = [found] if len(counters) == 1 else [list(c) for c in zip(*found)]
        values: list[Any] = []
        for col, counter in zip(cols, counters):
            if counter is None:
                try:
                    values.append(_loads(b"[" + b",".join(col) + b"]"))
                except orjson.JSONDecodeError:
                    return None
            else:
                seq = counter.seq
                if col != [b"%d" % n for n in range(seq, seq + len(col))]:
                    return None
                values.append(None)
        return len(found), values

    def apply(self, count: int, values: list[Any]) -> None:
        for vals, counter, apply in zip(values, self.counters, self.applies):
            if counter is not None:
                counter.seq += count
            elif apply is not None:
                apply(vals)


def run_mixed(tpls: list[Template], buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Frames of several templates interleaved (parallel tool calls' argument deltas) from ``pos`` ->
    (where they end, how many: 0 for none). Only for compiled templates without counters."""
    bodies = sorted(t.body for t in tpls)
    m = re.compile(b"(?:" + b"|".join(bodies) + b")+").match(buf, pos, end)  # re's cache keeps it
    if m is None:
        return pos, 0
    stop = m.end()
    got = [t.collect(buf, pos, stop) for t in tpls]
    total = sum(g[0] for g in got if g is not None)
    if any(g is None for g in got) or total != buf.count(b"\n\n", pos, stop):
        return pos, 0
    for t, g in zip(tpls, got):
        if g is not None and g[0]:
            t.apply(*g)
    return stop, total


def _cut(raw: bytes, j: int, slot: Slot) -> tuple[int, int, Slot] | None:
    """Where the slot's value is written in ``raw`` (after ``"key":``, exactly once), or None."""
    path, value, _ = slot
    key = path[-1]
    if not isinstance(key, str):
        return None
    enc = _dumps(value) if isinstance(value, str) else b"%d" % value
    for sep in (b'":', b'": '):
        needle = b'"' + key.encode() + sep + enc
        at = raw.find(needle, j)
        if at >= 0:
            if raw.find(needle, at + 1) >= 0:
                return None
            start = at + len(needle) - len(enc)
            return start, start + len(enc), slot
    return None


def learn(raw: bytes, hot: Hot) -> Template | None:
    """The template of a frame the checker has just passed, or None (not one JSON data line, a value not
    found exactly once as written by orjson, or the probe disagrees)."""
    j = raw.find(b"data: ")
    if j < 0 or (j > 0 and raw[j - 1 : j] != b"\n") or raw.find(b"\n", j) >= 0:
        return None
    cuts = []
    for slot in hot:
        cut = _cut(raw, j, slot)
        if cut is None:
            return None
        cuts.append(cut)
    cuts.sort(key=lambda c: c[0])
    literals = [raw[: cuts[0][0]]]
    probe = [literals[0]]
    markers: list[Any] = []
    for n, (start, end, (_, value, _)) in enumerate(cuts):
        if n and start < cuts[n - 1][1]:
            return None
        marker: Any = f"\x01{n}" if isinstance(value, str) else 900000001 + n
        markers.append(marker)
        lit = raw[end : cuts[n + 1][0] if n + 1 < len(cuts) else len(raw)]
        literals.append(lit)
        probe += [_dumps(marker), lit]
    try:  # the probe: each value swapped for a marker must parse back at its path
        obj = _loads(b"".join(probe)[j + 6 :])
    except orjson.JSONDecodeError:
        return None
    for (_, _, (path, _, _)), marker in zip(cuts, markers):
        got = _at(obj, path)
        if got != marker or type(got) is not type(marker):
            return None
    counters = [None if isinstance(v, str) else a for _, _, (_, v, a) in cuts]
    applies = [None if not isinstance(v, str) else a for _, _, (_, v, a) in cuts]
    return Template(literals, counters, applies)
