"""Replay of repeated stream events for the live lint (``StreamLint``): the cheap path of ``dragoman_lint``.

A long stream is mostly the same delta event over and over, differing only in one string (the text, the
arguments fragment), sometimes a counter (Responses' ``sequence_number``), a padding string (OpenAI's
``obfuscation``) or which open call it extends (a key: Chat's ``tool_calls[0].index``, Responses'
``item_id``). After a checker has fully checked such an event it names those variable fields (``Hot``: a
tuple of ``(path, value, apply)``); ``learn`` cuts the event's raw frame bytes around their values into a
``Template`` (its literal bytes: ``head``, the ``inner`` ones, ``tail``) and proves the cut with a probe
(each value swapped for a marker, the JSON parsed again, each marker found at its path).

``Template.run`` takes the run of consecutive frames that are this event again, a whole list of frames at a
time in a few C-level calls (no Python step per frame): each frame's middle is sliced out (``itemgetter``)
and, a block of frames at a time, heads, middles and tails (with a counter last, the tail with the expected
number written out) joined again must give the block's bytes: each frame is ``head`` + middle + ``tail``
(only in the block where the run ends, ``bytes.startswith`` / ``endswith`` per frame find where). With
several values per frame, the
middles are joined by NUL and each inner literal replaced by its own marker byte (control characters, which
no valid frame holds raw): the markers must then come exactly in the template's order, once per frame,
which proves each frame's cut. All the run's values are parsed in ONE ``orjson.loads`` of
``[v1,\nv2,...]``: it must give exactly one JSON scalar per value (a separator's raw newline cannot sit
inside a string, and a separator nested in an array or object would make that element no scalar; no other
raw newline or CR is allowed, so each value is exactly one JSON token); a string slot's values must be
strings, a counter's the next numbers; a key (the bytes that lead the values when calls interleave) must be
one its variants were learnt with.
Each such frame parses to a checked event with only those values changed, so the grammar gives it the same
verdict; the string values go to the checker (``apply``: what it concatenates), per key. A frame failing
any of this, and so every violation, goes through the full parse and check.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from itertools import compress
from itertools import repeat
from operator import itemgetter
from typing import Any

import orjson

_loads = orjson.loads
_dumps = orjson.dumps
_startswith = bytes.startswith
_endswith = bytes.endswith
#: a variable field of a checked event: (path into the event's JSON, its value, what the checker does with
#: a run of new values (a list; None: nothing)); a str value is a string slot; an int value is a counter
#: slot, whose third element is the checker's object holding the next expected value in ``seq`` (shared by
#: every template, so a counter never goes back); ``KEY`` as the third element: a key slot (see ``KEY``)
Slot = tuple[tuple[Any, ...], Any, Callable[[list[Any]], Any] | Any | None]
Hot = tuple[Slot, ...]
#: the third element of a key slot: the value names which open block / call / item the event extends; a
#: frame must carry exactly the bytes of a key a checked frame of the same shape carried (keys lead the
#: frame's values, as every protocol writes them: the template cuts them out as one fixed-length prefix)
KEY = object()
_STR, _CNT, _KEY = 0, 1, 2
#: the most frames one ``run`` call takes (a longer run takes several calls)
_MAX_RUN = 4096
#: units rebuilt and compared at once (``Template._cut``)
_BLOCK = 64
_TYPES_STR = {str}
_TYPES_INT = {int}
#: a run's middles are joined by NUL, the k-th inner literal of each replaced by the byte k: control
#: characters, which no valid frame holds raw (a template has at most ``len(_MARKS)`` inner literals)
_MARKS = [bytes([i]) for i in range(1, 9)]
_NOT_MARKERS = bytes(range(9, 256))
_MARKS_TO_LF = bytes.maketrans(bytes(range(9)), b"\n" * 9)


def _prefix(ok: list[bool], seg: list[bytes]) -> tuple[int, list[bytes]]:
    """How many units lead ``seg`` with ``ok`` true, and those units."""
    if all(ok):
        return len(seg), seg
    n = ok.index(False)
    return n, seg[:n]


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    try:
        for k in path:
            obj = obj[k]
    except (KeyError, IndexError, TypeError):
        return None
    return obj


class Template:
    """One checked frame's bytes cut around its variable values (see the module docstring)."""

    __slots__ = (
        "head",
        "inner",
        "tail",
        "tail_nn",
        "kinds",
        "shape",
        "variants",
        "holders",
        "src",
        "_keyed",
        "counted",
        "vinner",
        "vkinds",
        "seps",
        "fmts",
        "klen",
    )

    def __init__(
        self,
        literals: list[bytes],
        kinds: tuple[int, ...],
        key: Any,
        applies: list[Any],
        holders: list[Any],
        klen: int = 0,
    ):
        self.head = literals[0]
        #: the length of the key bytes that follow the head (0: none; else ``key`` is those bytes)
        self.klen = klen
        self.inner = tuple(literals[1:-1])
        #: the frame's last literal without / with its blank line (units from a split / whole chunks)
        self.tail = literals[-1]
        self.tail_nn = literals[-1] + b"\n\n"
        self.kinds = kinds
        self.shape = (self.head, self.inner, self.tail, kinds, klen)
        #: key (the bytes of the key slots and the literals between them, or None without key slots) -> per
        #: string slot, what the checker does with its values
        self.variants: dict[Any, list[Any]] = {key: applies}
        #: the counters' holders (one per counter slot)
        self.holders = holders
        #: for a template whose key slots were left in its literals (one variant so far, the cheap form):
        #: the frame and what the checker said of it, to cut the keys too when a second key comes (``keyed``)
        self.src: tuple[bytes, Hot] | None = None
        self._keyed: Template | None = None
        #: a counter last (Responses' ``sequence_number``): the expected end of each frame is written out
        #: (``fmts``: without / with the blank line) and compared, the other slots are cut and parsed
        self.counted = kinds[-1] == _CNT
        cut = -1 if self.counted else None
        self.vinner = self.inner[:cut] if self.counted else self.inner
        self.vkinds = kinds[:cut]
        #: the markers one frame's middle holds once its inner literals are replaced, then the NUL joining it
        #: to the next frame's (``n`` frames: ``n`` times this, less the last NUL)
        self.seps = b"".join(_MARKS[: len(self.vinner)]) + b"\0"
        if self.counted:
            end = literals[-2].replace(b"%", b"%%") + b"%d" + literals[-1].replace(b"%", b"%%")
            self.fmts = (end, end + b"\n\n")

    @property
    def is_keyed(self) -> bool:
        return bool(self.klen)

    def keyed(self) -> Template | None:
        """This frame's template with its key slots cut (learnt once, when first asked)."""
        if self._keyed is None and self.src is not None:
            self._keyed = _learn(*self.src)
            self.src = None if self._keyed is None else self.src
        return self._keyed

    def merge(self, other: Template) -> bool:
        """Take ``other``'s variant when it is this event for another key (same literals and slots)."""
        if other.shape != self.shape or other.holders != self.holders:
            return False
        self.variants.update(other.variants)
        return True

    def run(self, units: list[bytes], i: int, whole: bool) -> int:
        """The frames from ``units[i]`` that are this event again -> how many (0: none); their values are
        applied. ``whole``: each unit is a chunk holding one frame with its blank line; else a frame without."""
        seg = units[i : i + _MAX_RUN] if i or len(units) > _MAX_RUN else units
        tail = self.tail_nn if whole else self.tail
        lh = len(self.head)
        if len(seg) == 1:  # one unit (strict mode checks our output event by event): no lists of one
            unit = seg[0]
            if self.counted:
                seq = self.holders[-1].seq
                end = self.fmts[whole] % seq
            else:
                end = tail
            if not (unit.startswith(self.head) and unit.endswith(end)) or len(unit) < lh + len(end):
                return 0
            n, mids = 1, [unit[lh : len(unit) - len(end)]]
        else:
            n, mids = self._cut(seg, whole)
        if not n:
            return 0
        got = self.verify(mids)
        if got is None:  # some frame is not this event: take the ones before it
            n = next((j for j in range(n) if self.verify(mids[j : j + 1], j) is None), 0)
            got = self.verify(mids[:n]) if n else None
            if got is None:
                return 0
        self.apply(n, *got)
        return n

    def _cut(self, seg: list[bytes], whole: bool) -> tuple[int, list[bytes]]:
        """The leading units of ``seg`` that are head, middle, tail -> (how many, their middles). A block of
        units at a time: the middles sliced out, then heads, middles and tails joined again must give the
        block's bytes (one join and compare for the block); the block where that fails holds the run's end,
        found with a head and a tail check per unit. (Blocks stay small: a large temporary costs more.)
        With a counter last, each frame's tail is its expected end, the number written out."""
        head, lh = self.head, len(self.head)
        tail = self.tail_nn if whole else self.tail
        gap = b"" if whole else b"\n\n"
        cut = itemgetter(slice(lh, -len(tail)))
        joint = self.tail_nn + head
        seq = self.holders[-1].seq if self.counted else 0
        mids: list[bytes] = []
        a, total = 0, len(seg)
        while a < total:
            block = seg[a : a + _BLOCK]
            if self.counted:
                got, ends = self._counted(block, seq + a, whole)
                woven: list[bytes] = [head] * (3 * len(block))
                woven[1::3] = got
                woven[2::3] = ends
                ok = b"".join(woven) == gap.join(block) + gap
            else:
                got = list(map(cut, block))
                ok = head + joint.join(got) + tail == gap.join(block)
            if ok:
                mids += got
                a += len(block)
                continue
            k, block = _prefix(list(map(_startswith, block, repeat(head))), block)
            want: Iterable[bytes]  # each unit's expected end (not ``ends``: a list, the counted block's)
            if self.counted:
                want = list(map(self.fmts[whole].__mod__, range(seq + a, seq + a + k)))
            else:
                want = repeat(tail)
            k, block = _prefix(list(map(_endswith, block, want)), block)
            mids += got[:k]
            a += k
            break
        return a, mids

    def _counted(self, block: list[bytes], seq: int, whole: bool) -> tuple[list[bytes], list[bytes]]:
        """A block's middles when each unit ends with its counter's expected end (their length varies with
        the number's digits), and those ends (with the blank line)."""
        ends = list(map(self.fmts[1].__mod__, range(seq, seq + len(block))))
        lh, base = len(self.head), len(self.fmts[whole] % 0) - 1
        mids: list[bytes] = []
        a, n = 0, len(block)
        while a < n:
            digits = len(str(seq + a))
            b = min(n, 10**digits - seq)
            mids += map(itemgetter(slice(lh, -(base + digits))), block[a:b])
            a = b
        return mids, ends

    def verify(self, mids: list[bytes], ahead: int = 0) -> tuple[list[Any], Any] | None:
        """The middles of ``len(mids)`` frames (between head and tail) -> (the string slots' values, the
        keys: one per frame, or None) when every frame is this event again; else None. ``ahead``: frames
        before these in the run (their counters)."""
        n = len(mids)
        k = len(self.vkinds)
        pkeys: Any = None
        if self.klen:  # the keys lead each middle: one of the byte strings learnt
            pkeys = list(map(itemgetter(slice(0, self.klen)), mids))
            if not set(pkeys) <= self.variants.keys():
                return None
            mids = list(map(itemgetter(slice(self.klen, None)), mids))
        if not k:  # a counter alone, checked in the frames' ends
            return [], pkeys
        if k == 1:
            blob = b",\n".join(mids)
        else:  # each inner literal replaced by its marker byte (a control character: no valid frame holds one)
            flat = b"\0".join(mids)
            if flat.translate(None, _NOT_MARKERS) != b"\0" * (n - 1):
                return None
            for lit, mark in zip(self.vinner, _MARKS):
                flat = flat.replace(lit, mark)
            # each middle is exactly value, literal, value, ... in this order: one of each marker, in order
            if flat.translate(None, _NOT_MARKERS) != (self.seps * n)[:-1]:
                return None
            blob = flat.translate(_MARKS_TO_LF).replace(b"\n", b",\n")
        # the values, one JSON scalar between each two separators (a separator's raw LF cannot sit in a
        # string, nor a separator inside an array or object when every value is a scalar; no other LF or CR)
        if blob.count(b"\n") != n * k - 1 or b"\r" in blob:
            return None
        try:
            vals = _loads(b"[" + blob + b"]")
        except orjson.JSONDecodeError:
            return None
        if len(vals) != n * k:
            return None
        strs: list[Any] = []
        holders = iter(self.holders)
        for j, kind in enumerate(self.vkinds):
            col = vals[j::k] if k > 1 else vals
            types = set(map(type, col))
            if kind == _STR:
                if types != _TYPES_STR:
                    return None
                strs.append(col)
            else:
                seq = next(holders).seq + ahead
                if types != _TYPES_INT or col != list(range(seq, seq + n)):
                    return None
        return strs, pkeys

    def apply(self, n: int, strs: list[Any], key: Any) -> None:
        """The values of ``n`` verified frames to the checker; the counters count on."""
        for holder in self.holders:
            holder.seq += n
        if key is None:
            groups: Any = [(self.variants[None], strs)]
        else:
            used = set(key)
            if len(used) == 1:
                groups = [(self.variants[k], strs) for k in used]
            else:
                groups = []
                for k in used:
                    mask = list(map(k.__eq__, key))
                    groups.append((self.variants[k], [list(compress(vals, mask)) for vals in strs]))
        for applies, values in groups:
            for ap, vals in zip(applies, values):
                if ap is not None:
                    ap(vals)


def _cut(raw: bytes, j: int, slot: Slot) -> tuple[int, int] | None:
    """Where the slot's value is written in ``raw`` (after ``"key":``; when written more than once, the
    one a probe finds at the slot's path), or None."""
    path, value, _ = slot
    key = path[-1]
    if not isinstance(key, str):
        return None
    enc = _dumps(value) if isinstance(value, str) else b"%d" % value
    found = []
    for sep in (b'":', b'": '):
        needle = b'"' + key.encode() + sep + enc
        at = raw.find(needle, j)
        while at >= 0:
            start = at + len(needle) - len(enc)
            found.append((start, start + len(enc)))
            at = raw.find(needle, at + 1)
    if len(found) == 1:
        return found[0]
    marker: Any = "\x01" if isinstance(value, str) else 900000001
    for start, end in found:
        try:
            obj = _loads(raw[j + 6 : start] + _dumps(marker) + raw[end:])
        except orjson.JSONDecodeError:
            continue
        if _at(obj, path) == marker:
            return start, end
    return None


def learn(raw: bytes, hot: Hot) -> Template | None:
    """The template of a frame the checker has just passed (``raw``: without its blank line), or None (not
    one JSON data line, a value not found as written by orjson, or the probe disagrees). With key slots:
    the template with the keys left in its literals (cheaper; ``keyed()`` cuts them too)."""
    if not any(a is KEY for _, _, a in hot):
        return _learn(raw, hot)
    tpl = _learn(raw, tuple(slot for slot in hot if slot[2] is not KEY))
    if tpl is not None:
        tpl.src = (raw, hot)
    return tpl


def _learn(raw: bytes, hot: Hot) -> Template | None:
    j = raw.find(b"data: ")
    if j < 0 or (j > 0 and raw[j - 1 : j] != b"\n") or raw.find(b"\n", j) >= 0 or b"\r" in raw:
        return None
    cuts = []
    for slot in hot:
        cut = _cut(raw, j, slot)
        if cut is None:
            return None
        cuts.append((cut[0], cut[1], slot))
    if len(cuts) > len(_MARKS) or not cuts:
        return None
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
        if not lit or b"\0" in lit or (n + 1 < len(cuts) and lit in (b",", b"\n")):
            return None
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
    kinds = tuple(_KEY if a is KEY else _STR if isinstance(v, str) else _CNT for _, _, (_, v, a) in cuts)
    applies = [a for (_, _, (_, _, a)), k in zip(cuts, kinds) if k == _STR]
    holders = [a for (_, _, (_, _, a)), k in zip(cuts, kinds) if k == _CNT]
    lead = next((i for i, k in enumerate(kinds) if k != _KEY), len(kinds))
    if not lead:
        return None if _KEY in kinds else Template(literals, kinds, None, applies, holders)
    if lead == len(kinds) or _KEY in kinds[lead:]:  # keys must lead the values (as every protocol writes them)
        return None
    # the keys' bytes, with the literals up to the next value, are one fixed-length key (sliced, not parsed:
    # a frame's key must be one of the exact byte strings learnt)
    prefix = raw[cuts[0][0] : cuts[lead][0]]
    return Template([literals[0], *literals[lead + 1 :]], kinds[lead:], prefix, applies, holders, len(prefix))
