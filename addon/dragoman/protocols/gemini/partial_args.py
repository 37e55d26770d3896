"""Gemini 3's streamed function-call arguments (``partialArgs``) -> JSON text fragments, as they arrive.

Each entry names a ``jsonPath`` (``$.recipe.ingredients[0].amount``) and a value: a ``stringValue`` fragment is
appended to the string at that path, a ``numberValue`` / ``boolValue`` / ``nullValue`` is set whole. The paths
come in document order, so the arguments are written as a JSON text prefix: containers open and close as the
path moves on, and a string stays open while its fragments continue. A path that goes back to a container
already closed cannot be written this way and is an ``UpstreamProtocolError``.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from dragoman.errors import UpstreamProtocolError

_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")


def parse_path(path: str) -> list[str | int]:
    if not path.startswith("$"):
        raise UpstreamProtocolError(f"partialArgs jsonPath {path[:100]!r} does not start with $")
    tokens: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None:
            raise UpstreamProtocolError(f"partialArgs jsonPath {path[:100]!r} is not understood")
        key, index, sq, dq = m.groups()
        tokens.append(int(index) if index is not None else key if key is not None else sq if sq is not None else dq)
        pos = m.end()
    if not tokens:
        raise UpstreamProtocolError("partialArgs jsonPath $ (the whole arguments) is not an object member")
    return tokens


class _Container:
    __slots__ = ("array", "key", "seen")

    def __init__(self, array: bool) -> None:
        self.array = array
        self.key: str | int | None = None  # the member being written
        self.seen: set[str | int] = set()


def _value(entry: dict[str, Any]) -> tuple[bool, Any]:
    """(is a string fragment, value)."""
    if "stringValue" in entry:
        return True, entry["stringValue"] if isinstance(entry["stringValue"], str) else ""
    if "numberValue" in entry:
        return False, entry["numberValue"]
    if "boolValue" in entry:
        return False, entry["boolValue"] is True
    if "nullValue" in entry:
        return False, None
    raise UpstreamProtocolError(f"partialArgs entry without a value ({', '.join(entry)[:100]})")


class PartialArgs:
    """One streamed call's arguments. ``feed`` an entry -> the next JSON text; ``close`` -> the rest."""

    __slots__ = ("_stack", "_string")

    def __init__(self) -> None:
        self._stack: list[_Container] = []
        self._string: list[str | int] | None = None  # the path of the open string

    def feed(self, entry: Any) -> str:
        if not isinstance(entry, dict) or not isinstance(entry.get("jsonPath"), str):
            raise UpstreamProtocolError("partialArgs entry without a jsonPath")
        tokens = parse_path(entry["jsonPath"])
        is_str, value = _value(entry)
        if is_str and self._string == tokens:
            return orjson.dumps(value).decode()[1:-1]
        out: list[str] = []
        if self._string is not None:
            out.append('"')
            self._string = None
        if not self._stack:
            out.append("{")
            self._stack.append(_Container(False))
        # keep the containers the new path shares, close the others
        i = 0
        while i < len(tokens) - 1 and i + 1 < len(self._stack) and self._stack[i].key == tokens[i]:
            i += 1
        while len(self._stack) > i + 1:
            out.append("]" if self._stack.pop().array else "}")
        self._member(self._stack[i], tokens[i], out)
        for tok in tokens[i + 1 :]:
            c = _Container(isinstance(tok, int))
            out.append("[" if c.array else "{")
            self._stack.append(c)
            self._member(c, tok, out)
        if is_str:
            out.append('"' + orjson.dumps(value).decode()[1:-1])
            self._string = tokens
        else:
            out.append(orjson.dumps(value).decode())
        return "".join(out)

    def _member(self, c: _Container, tok: str | int, out: list[str]) -> None:
        if c.array is not isinstance(tok, int):
            raise UpstreamProtocolError(f"partialArgs path member {tok!r} does not fit its container")
        if tok in c.seen:
            raise UpstreamProtocolError(f"partialArgs path goes back to {tok!r}, already written")
        if c.seen:
            out.append(",")
        c.seen.add(tok)
        c.key = tok
        if not c.array:
            out.append(orjson.dumps(tok).decode() + ":")

    def close(self) -> str:
        out = '"' if self._string is not None else ""
        self._string = None
        if not self._stack:
            return "{}"
        while self._stack:
            out += "]" if self._stack.pop().array else "}"
        return out
