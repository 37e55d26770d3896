"""Replay of repeated stream events for the live lint (``StreamLint``): the cheap path of ``dragoman_lint``.

A long stream is mostly the same delta event over and over, differing only in one string (the text, the
arguments fragment), sometimes a counter (Responses' ``sequence_number``) or a padding string (OpenAI's
``obfuscation``). After a checker has fully checked such an event it names those variable fields (``Hot``:
a tuple of ``(path, value, apply)``); ``learn`` cuts the event's raw frame bytes around their values, and
around the response's ids and timestamps (``Fixed`` slots: they must stay as checked), and proves the cut
with a probe (each value swapped for a marker, the JSON parsed again, each marker found at its path).

The cut is a ``Template``. Its first frames are matched by bytes comparisons (``match``); from the
``_COMPILE``-th on, by a bytes regex of the frame (its literal bytes, a JSON-string or digits group per
slot) that ``re`` compiles once per event shape and process, ids being slots. ``collect`` takes the run of
consecutive frames that match, then parses all their string slots in one ``orjson.loads`` (an invalid
string, escape or UTF-8 refuses the run), checks the fixed values are unchanged and the counters count on:
each such frame parses to the checked event with only its strings changed, so the grammar gives it the same
verdict, and ``apply`` hands the checker the new strings (what it concatenates). ``run_mixed`` does the same
for templates whose frames interleave (parallel tool calls). Anything else, including every violation, goes
through the full parse and check.
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
_STR = rb'"[^"\\\n\r]*+(?:\\[^\n\r][^"\\\n\r]*+)*+"'
_NUM = rb"\d+"
_INT = rb"-?\d+"
#: frames a template matches one by one before its regex is compiled
_COMPILE = 8


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    try:
        for k in path:
            obj = obj[k]
    except (KeyError, IndexError, TypeError):
        return None
    return obj


class Fixed:
    """A slot whose bytes must stay as checked (an id, a timestamp): cut out of the template's regex so
    that its shape, not the response's ids, is what ``re`` compiles and caches across streams."""

    __slots__ = ("enc",)

    def __init__(self, enc: bytes) -> None:
        self.enc = enc


class Template:
    """One checked frame's bytes cut around its variable values (see the module docstring)."""

    __slots__ = ("literals", "one", "counters", "applies", "hits")

    def __init__(self, literals: list[bytes], counters: list[Any], applies: list[Any]) -> None:
        #: the bytes before, between and after the slots
        self.literals = literals
        #: per slot: None (a string slot), a ``Fixed`` or the object whose ``seq`` the counter must equal
        self.counters = counters
        self.applies = applies
        self.hits = 0
        #: compiled once the template has matched ``_COMPILE`` frames one by one (re's parser is slow)
        self.one: re.Pattern[bytes] | None = None

    def compile(self) -> None:
        slots = [
            _STR if c is None else (_STR if c.enc[:1] == b'"' else _INT) if isinstance(c, Fixed) else _NUM
            for c in self.counters
        ]
        lits = [re.escape(lit) for lit in self.literals]
        one = lits[0] + b"".join(b"(" + s + b")" + lit for s, lit in zip(slots, lits[1:]))
        #: one frame, its slots captured (re caches the compiled shape: ids and timestamps are ``Fixed`` slots)
        self.one = re.compile(one + b"\n\n")

    def run(self, buf: bytes, pos: int, end: int) -> tuple[int, int]:
        """The frames from ``pos`` that are this event again -> (where they end, how many: 0 for none);
        their values are applied."""
        if self.one is None:
            if self.hits < _COMPILE:
                return self.match(buf, pos)
            self.compile()
        got = self.collect(buf, pos, end)
        if got is None or not got[0]:
            return pos, 0
        self.apply(got[0], got[1])
        return got[2], got[0]

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
            elif type(counter) is Fixed:
                if tok != counter.enc:
                    return pos, 0
                values.append(None)
            else:
                if tok != b"%d" % counter.seq:
                    return pos, 0
                values.append(None)
            at = cut + len(lit)
        self.hits += 1
        self.apply(1, values)
        return stop + 2, 1

    def collect(self, buf: bytes, pos: int, end: int) -> tuple[int, list[Any], int] | None:
        """This template's consecutive frames from ``pos`` -> (how many, their values, where they end), or
        None when a value is not a valid JSON string, a fixed value changed or a counter does not count on."""
        assert self.one is not None
        found: list[Any] = []
        stop = pos
        match = self.one.match
        m = match(buf, pos, end)
        while m is not None:  # frame after frame, each adjacent to the last
            found.append(m.groups())
            stop = m.end()
            m = match(buf, stop, end)
        counters = self.counters
        values: list[Any] = []
        for col, counter in zip(zip(*found), counters):
            if counter is None:
                try:
                    values.append(_loads(b"[" + b",".join(col) + b"]"))
                except orjson.JSONDecodeError:
                    return None
            elif type(counter) is Fixed:
                if col.count(counter.enc) != len(col):
                    return None
                values.append(None)
            else:
                seq = counter.seq
                if list(col) != [b"%d" % n for n in range(seq, seq + len(col))]:
                    return None
                values.append(None)
        return len(found), values, stop

    def apply(self, count: int, values: list[Any], counters: bool = True) -> None:
        """The values of ``count`` frames to the checker (``counters``: advance the counters too)."""
        for vals, counter, apply in zip(values, self.counters, self.applies):
            if type(counter) is Fixed:
                continue
            if counter is not None:
                if counters:
                    counter.seq += count
            elif apply is not None:
                apply(vals)


def run_mixed(tpls: list[Template], buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Frames of several templates interleaved (parallel tool calls' argument deltas) from ``pos`` ->
    (where they end, how many: 0 for none). Compiled templates only; their counters, if any, must be one
    (checked over the frames in their order)."""
    owners = {id(c): c for t in tpls for c in t.counters if c is not None and type(c) is not Fixed}
    if len(owners) > 1:
        return pos, 0
    stop, count, seqs = pos, 0, []
    got: list[tuple[int, list[list[bytes]]]] = [(0, [[] for _ in t.counters]) for t in tpls]
    while True:  # the next frame is one template's, or the run ends
        for i, t in enumerate(tpls):
            assert t.one is not None
            m = t.one.match(buf, stop, end)
            if m is not None:
                for col, v, c in zip(got[i][1], m.groups(), t.counters):
                    if c is None or type(c) is Fixed:
                        col.append(v)
                    else:
                        seqs.append(v)
                got[i] = (got[i][0] + 1, got[i][1])
                stop = m.end()
                count += 1
                break
        else:
            break
    if not count:
        return pos, 0
    checked = []
    for t, (n, cols) in zip(tpls, got):
        values: list[Any] = []
        for col, counter in zip(cols, t.counters):
            if counter is None:
                try:
                    values.append(_loads(b"[" + b",".join(col) + b"]"))
                except orjson.JSONDecodeError:
                    return pos, 0
            elif type(counter) is Fixed and col.count(counter.enc) != len(col):
                return pos, 0
            else:
                values.append(None)
        checked.append((n, values))
    if owners:
        (owner,) = owners.values()
        if seqs != [b"%d" % n for n in range(owner.seq, owner.seq + len(seqs))]:
            return pos, 0
        owner.seq += len(seqs)
    for t, (n, values) in zip(tpls, checked):
        if n:
            t.apply(n, values, counters=False)
    return stop, count


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
    taken = {path for path, _, _ in hot}
    for path, value in _ids(_loads(raw[j + 6 :]), ()):
        if path not in taken:
            cut = _cut(raw, j, (path, value, None))
            if cut is not None and not any(c[0] < cut[1] and cut[0] < c[1] for c in cuts):
                cuts.append((cut[0], cut[1], (path, value, Fixed(raw[cut[0] : cut[1]]))))
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
    counters = [a if isinstance(a, Fixed) or not isinstance(v, str) else None for _, _, (_, v, a) in cuts]
    applies = [a if isinstance(v, str) and not isinstance(a, Fixed) else None for _, _, (_, v, a) in cuts]
    return Template(literals, counters, applies)


def _ids(obj: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], Any]]:
    """The values of a frame that name its response (long strings: ids, models; large ints: timestamps)."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list)):
                out += _ids(v, (*path, k))
            elif (type(v) is str and len(v) >= 12) or (type(v) is int and v >= 10_000):
                out.append(((*path, k), v))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            if isinstance(v, (dict, list)):
                out += _ids(v, (*path, i))
    return out
