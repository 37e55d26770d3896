"""``Shape``: a stream delta's raw bytes learnt once, so the same delta with a new string is read without a parse.

A long stream is mostly one delta event over and over, its bytes the same but for one JSON string (the
text) and, at OpenAI, a padding string (``obfuscation``) and an event counter (``sequence_number``, at the
Responses API). After a decoder has decoded such an event the usual way (as one delta of an open block,
nothing else changed), ``learn`` cuts the event's SSE frame around those values: ``head``, then the text's
string, the padding string and the counter in the order they come, literal bytes between them. ``match``
then takes a later frame that is exactly those literal bytes with other values in the slots (and, after the
frame's last string, any spaces between JSON's punctuation: Anthropic pads its frames with them) and
returns the text's JSON string token, as ``orjson.dumps`` writes it, or None (the frame takes the usual way).

Why that is safe: each string slot must be ONE valid JSON string token (the regular expressions below are
JSON's string grammar; a padding string printable ASCII), a counter one JSON integer that fits 64 bits, so
the frame parses to the learnt event with only those values changed (the padding and the counter are
members of the event's top level, found once in its bytes, which no decoder reads), which the decoder would
turn into the same delta of the same block with the new text; the decoder checks its state is the one it
learnt in (``StreamDecoder.shortcut``). A token with escapes orjson would write differently (``\\u00e9``,
``\\/``) is rewritten through ``orjson`` (loads, dumps: the bytes the usual way gives); a token that is not
valid UTF-8 or not valid JSON takes the usual way, which reports it.
"""

from __future__ import annotations

import re

import orjson

_loads = orjson.loads
_dumps = orjson.dumps
#: a non-empty JSON string token whose escapes are all ones ``orjson.dumps`` writes so (no ``\\uXXXX``, no
#: ``\\/``), no raw control character: its bytes are what orjson writes for its value (when valid UTF-8)
_KEPT = rb'("(?!")[^"\\\x00-\x1f]*(?:\\["\\nrtbf][^"\\\x00-\x1f]*)*")'
#: any non-empty JSON string token (RFC 8259's grammar)
_JSTR = rb'("(?!")[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*")'
#: a padding string: printable ASCII, no quote or backslash
_PAD = rb'"[ !#-\[\]-~]*"'
#: a counter: a JSON integer below 10**18 (orjson reads it as the usual way does)
_NUM = rb"(?:0|[1-9][0-9]{0,17})"
_PAD_KEY = b'"obfuscation":'
_SEQ_KEY = b'"sequence_number":'


_GENERIC = {_PAD: re.compile(_PAD), _NUM: re.compile(_NUM)}


class Shape:
    """One learnt delta frame (see the module docstring): ``head``, then what follows it as a pattern.

    Compiling a pattern costs ~0.3 ms (``re`` keeps 512): what a stream's own bytes (an item id, a model) make
    unique stays out of the compiled pattern where it can: ``head`` is compared as bytes, and so are the
    literal bytes between a slot right after it (Responses' ``sequence_number``, matched by a pattern compiled
    once for all) and the text (``mid``); the pattern that remains (the text, what follows it) is the same for
    every stream of one kind of upstream, so ``re``'s cache holds it. The pattern for a token in another
    spelling is compiled only when a frame needs it."""

    __slots__ = ("head", "_h", "_pre", "_mid", "_before", "_after", "_kept", "_any")

    def __init__(self, head: bytes, before: bytes, after: bytes, pre: bytes | None = None, mid: bytes = b"") -> None:
        """``head``: the frame's literal start; ``pre``: a slot's pattern right after it, then the literal bytes
        ``mid``; ``before`` / ``after``: the patterns before and after the text."""
        self.head = head
        self._h = len(head)
        self._pre = _GENERIC[pre] if pre is not None else None
        self._mid = mid
        self._before = before
        self._after = after
        #: the text token (group 1) written as orjson writes it, then the rest; any token, then the rest
        self._kept = re.compile(before + _KEPT + after)
        self._any: re.Pattern[bytes] | None = None

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Shape)
            and self.head == other.head
            and self._pre is other._pre
            and self._mid == other._mid
            and self._kept.pattern == other._kept.pattern
        )

    def __hash__(self) -> int:
        return hash((self.head, self._mid, self._kept.pattern))

    @property
    def plain(self) -> tuple[bytes, int, re.Pattern[bytes]] | None:
        """What ``match`` checks first, for a caller that matches inline (``StreamTranslator``'s repeat):
        (the head, where the text starts, the pattern of the text token as orjson writes it and the rest of
        the frame, its group 1 the token); None for a shape with a slot before the text (use ``match``)."""
        if self._pre is not None:
            return None
        return self.head, self._h, self._kept

    def match(self, raw: bytes) -> bytes | None:
        """The text's JSON string token in ``raw`` (as orjson writes it), or None: not this shape."""
        if not raw.startswith(self.head):
            return None
        pos = self._h
        pre = self._pre
        if pre is not None:
            m = pre.match(raw, pos)
            if m is None:
                return None
            pos = m.end()
            mid = self._mid
            if not raw.startswith(mid, pos):
                return None
            pos += len(mid)
        m = self._kept.fullmatch(raw, pos)
        if m is not None:
            tok: bytes = m.group(1)
            if not tok.isascii():
                try:
                    tok.decode()
                except UnicodeDecodeError:  # the usual way decodes the frame with replacements
                    return None
            return tok
        any_ = self._any
        if any_ is None:
            any_ = self._any = re.compile(self._before + _JSTR + self._after)
        m = any_.fullmatch(raw, pos)
        if m is not None:
            try:
                return _dumps(_loads(m.group(1)))
            except orjson.JSONDecodeError:  # a lone surrogate escape, invalid UTF-8
                return None
        return None


def _end(tail: bytes) -> bytes:
    """The pattern of ``tail``, the frame's end (JSON, then the blank line): up to its last string literally;
    after it only JSON punctuation and bare literals (numbers, ``null``...) can follow, and there any run of
    spaces between them is allowed (Anthropic pads its delta frames so: ``"text":"Hi"}      }``)."""
    body = tail[:-2]
    i = body.rfind(b'"') + 1
    parts = re.findall(rb"[{}\[\],:]|[^{}\[\],:\s]+", body[i:])
    return re.escape(body[:i]) + b" *" + b"".join(re.escape(p) + b" *" for p in parts) + re.escape(tail[-2:])


def learn(
    payload: str, key: bytes, text: str, pad: str | None, event: bytes = b"", seq: int | None = None
) -> Shape | None:
    """The ``Shape`` of the frame ``event`` + ``data: `` + ``payload`` + a blank line, whose ``key`` (``b'"content":'``)
    is followed by ``text`` (written as orjson writes it; another spelling: None) and occurs once; ``pad``:
    the value of its top-level ``obfuscation`` member, ``seq``: of its ``sequence_number`` (None: none, or a
    literal part of the frame). None: not cut."""
    p = payload.encode()
    if 10 in p or 13 in p:  # data of several ``data:`` lines: a frame of those bytes is not one event line
        return None
    cut = key + _dumps(text)
    i = p.find(cut)
    if i < 0 or p.rfind(cut) != i:
        return None
    # the slots: (start, end, pattern) of the text's token, then the padding's and the counter's values
    slots = [(i + len(key), i + len(cut), b"")]
    for k, value, pattern in (
        (_PAD_KEY, None if pad is None else _dumps(pad), _PAD),
        (_SEQ_KEY, None if seq is None else b"%d" % seq, _NUM),
    ):
        if value is None:
            continue
        member = k + value
        j = p.find(member)
        if j < 0 or p.rfind(member) != j or re.fullmatch(pattern, value) is None:
            return None  # spelt otherwise, or found twice (not only the top-level member): not cut
        slots.append((j + len(k), j + len(member), pattern))
    slots.sort()
    head = event + b"data: " + p[: slots[0][0]]
    if len(slots) > 1 and slots[1][2] == b"" and slots[0][2]:  # one slot, then literal bytes, then the text
        pre, mid = slots[0][2], p[slots[0][1] : slots[1][0]]
        slots = slots[1:]
    else:
        pre, mid = None, b""
    before = after = b""
    text_seen = False
    for n, (_, end, pattern) in enumerate(slots):
        # the slot's pattern (the text's is Shape's own), then the literal bytes up to the next slot
        nxt = p[end : slots[n + 1][0]] if n + 1 < len(slots) else None
        part = pattern + (re.escape(nxt) if nxt is not None else _end(p[end:] + b"\n\n"))
        if not pattern:
            text_seen = True
        if text_seen:
            after += part
        else:
            before += part
    return Shape(head, before, after, pre, mid)
