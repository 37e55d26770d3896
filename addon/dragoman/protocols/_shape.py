"""``Shape``: a stream delta's raw bytes learnt once, so the same delta with a new string is read without a parse.

A long stream is mostly one delta event over and over, its bytes the same but for one JSON string (the
text) and, at OpenAI, a padding string last (``obfuscation``). After a decoder has decoded such an event the
usual way (as one text or thinking delta of the open block, nothing else changed), ``learn`` cuts the event's
SSE frame around that string: ``head`` + the string + [``mid`` + a padding string] + ``tail``. ``match`` then
takes a later frame that is exactly those literal bytes with other strings between them (and, after the
frame's last string, any spaces between JSON's punctuation: Anthropic pads its frames with them) and returns
the text's JSON string token, as ``orjson.dumps`` writes it, or None (the frame takes the usual way).

Why that is safe: each string slot must be ONE valid JSON string token (the regular expressions below are
JSON's string grammar; a padding string printable ASCII), so the frame parses to the learnt event with only
those strings changed, which the decoder would turn into the same delta of the same block with the new text;
the decoder checks its state is the one it learnt in (``StreamDecoder.shortcut``). A token with escapes
orjson would write differently (``\\u00e9``, ``\\/``) is rewritten through ``orjson`` (loads, dumps: the bytes
the usual way gives); a token that is not valid UTF-8 or not valid JSON takes the usual way, which reports it.
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


class Shape:
    """One learnt delta frame (see the module docstring): ``head``, then what follows it as a pattern."""

    __slots__ = ("head", "_h", "_kept", "_any")

    def __init__(self, head: bytes, mid: bytes | None, tail: bytes) -> None:
        self.head = head
        self._h = len(head)
        after = _end(tail) if mid is None else re.escape(mid) + _PAD + _end(tail)
        #: the text token (group 1) written as orjson writes it, then the rest; any token, then the rest
        self._kept = re.compile(_KEPT + after)
        self._any = re.compile(_JSTR + after)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Shape) and self.head == other.head and self._kept.pattern == other._kept.pattern

    def __hash__(self) -> int:
        return hash((self.head, self._kept.pattern))

    def match(self, raw: bytes) -> bytes | None:
        """The text's JSON string token in ``raw`` (as orjson writes it), or None: not this shape."""
        if raw.startswith(self.head):
            m = self._kept.fullmatch(raw, self._h)
            if m is not None:
                tok: bytes = m.group(1)
                if not tok.isascii():
                    try:
                        tok.decode()
                    except UnicodeDecodeError:  # the usual way decodes the frame with replacements
                        return None
                return tok
            m = self._any.fullmatch(raw, self._h)
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


def learn(payload: str, key: bytes, text: str, pad: str | None, event: bytes = b"") -> Shape | None:
    """The ``Shape`` of the frame ``event`` + ``data: `` + ``payload`` + a blank line, whose ``key`` (``b'"content":'``)
    is followed by ``text`` (written as orjson writes it; another spelling: None) and occurs once, and whose
    JSON object ends with the padding string ``pad`` (its last member, or None: no padding). None: not cut."""
    p = payload.encode()
    cut = key + _dumps(text)
    i = p.find(cut)
    if i < 0 or p.rfind(cut) != i:
        return None
    head = event + b"data: " + p[: i + len(key)]
    rest = p[i + len(cut) :]
    if pad is None:
        return Shape(head, None, rest + b"\n\n")
    end = _dumps(pad) + b"}"
    if not rest.endswith(end) or re.fullmatch(_PAD, end[:-1]) is None:
        return None
    return Shape(head, rest[: -len(end)], b"}\n\n")
