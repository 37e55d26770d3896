"""The framing of a Gemini ``:streamGenerateContent`` answer without ``alt=sse``: one JSON array whose
elements (``GenerateContentResponse`` objects) arrive as they are made (``[``, ``,\\r\\n`` between them,
``]`` at the end). ``ArraySplitter`` is sans-I/O and incremental: fed bytes, it returns each complete
top-level element's text as soon as its closing ``,`` or ``]`` arrives, holding only the current element;
it raises ``AssertionError`` when the bytes are not one JSON array (the elements' own JSON is parsed by
the checker)."""

from __future__ import annotations

import codecs
import re

#: the characters that move the scanner: strings, nesting, element ends
_STOPS = re.compile(r'["\\\[\]{},]')
_WS = " \t\r\n"


class ArraySplitter:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._text = ""  # the current element's text so far (from its first character)
        self._scan = 0  # where scanning resumes in _text
        self._depth = 0  # 0: before '[', 1: in the array, more: in an element
        self._string = False
        self._escape = False
        self._started = False
        self._ended = False
        self.count = 0

    def feed(self, chunk: bytes) -> list[str]:
        """-> the elements completed by ``chunk`` (raises AssertionError: not a JSON array)."""
        try:
            text = self._decoder.decode(chunk)
        except UnicodeDecodeError as e:
            raise AssertionError(f"not valid UTF-8: {e}") from None
        return self._take(text)

    def close(self) -> None:
        """The end of the bytes: the array must be closed."""
        try:
            tail = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as e:
            raise AssertionError(f"not valid UTF-8 at the end: {e}") from None
        if self._take(tail):
            raise AssertionError("the JSON array stream ends inside an element")  # pragma: no cover
        if not self._ended:
            raise AssertionError("the JSON array stream does not end with ']'")

    def _take(self, text: str) -> list[str]:
        out: list[str] = []
        if not text:
            return out
        if self._ended:
            if text.strip(_WS):
                raise AssertionError(f"data after the end of the JSON array: {text.strip(_WS)[:60]!r}")
            return out
        if not self._started:
            text = text.lstrip(_WS)
            if not text:
                return out
            if text[0] != "[":
                raise AssertionError(f"the stream is not a JSON array (starts with {text[:20]!r})")
            self._started, self._depth, text = True, 1, text[1:]
        buf = self._text + text
        i, start = self._scan, 0
        while True:
            if self._string:
                j = self._string_end(buf, i)
                if j < 0:
                    break
                i = j
                continue
            m = _STOPS.search(buf, i)
            if m is None:
                break
            c, i = m.group(), m.end()
            if c == '"':
                self._string = True
            elif c in "[{":
                self._depth += 1
            elif self._depth > 1:  # inside an element: only the nesting matters
                if c in "]}":
                    self._depth -= 1
            elif c in ",]":  # an element's end (depth 1)
                elem = buf[start : i - 1].strip(_WS)
                if elem or c == ",":  # "[]" is an empty array; "[," or ",," an empty element
                    if not elem:
                        raise AssertionError(f"empty element #{self.count} in the JSON array")
                    out.append(elem)
                    self.count += 1
                start = i
                if c == "]":
                    self._ended = True
                    rest = buf[i:].strip(_WS)
                    if rest:
                        raise AssertionError(f"data after the end of the JSON array: {rest[:60]!r}")
                    self._text, self._scan = "", 0
                    return out
            else:
                raise AssertionError(f"unexpected {c!r} between the array's elements")
        self._text = buf[start:]
        self._scan = i - start if self._string else len(self._text)
        return out

    def _string_end(self, buf: str, i: int) -> int:
        """Scan a string from ``i``: -> the index after its closing quote, or -1 (``_scan`` kept)."""
        while True:
            q = buf.find('"', i)
            if q < 0:
                return -1
            k = q - 1
            while k >= i and buf[k] == "\\":
                k -= 1
            if (q - 1 - k) % 2 == 0:  # an even number of backslashes: the quote closes the string
                self._string = False
                return q + 1
            i = q + 1
