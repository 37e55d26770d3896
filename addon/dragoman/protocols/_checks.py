"""Checks the stream decoders share: tool-call arguments are a JSON object, token counts fit the wire.

``ToolArgs`` keeps the argument fragments of each OPEN function tool call (memory bounded by the
arguments themselves, released when the block closes) and parses them once when the block closes. A
call whose arguments are not a JSON object is remembered by name only; ``check(stop)`` at the end of the
message raises ``UpstreamProtocolError`` unless the stop reason says the output was cut short
(``max_tokens``/``length``: then truncated arguments are legitimate and the client sees that stop
reason). Without the check a lost or duplicated upstream delta would reach the client as a "complete"
tool call with unusable arguments. Custom (free-form) tool input is not JSON and is never registered.

``token_count`` rejects token counts no JSON encoder downstream can write (above 2**63 - 1) or that are
negative: an upstream sending them is broken, and the translation must fail as a protocol error, not
crash an encoder.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

import orjson

from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import StopReason

logger = logging.getLogger(__name__)
_loads = orjson.loads

#: stop reasons under which a tool call's arguments may legitimately be cut off
TRUNCATING_STOPS = frozenset({StopReason.MAX_TOKENS})
#: the largest token count accepted from an upstream (orjson and every SDK use 64-bit integers)
MAX_TOKEN_COUNT = 2**63 - 1
#: fragments kept per open call before they are joined: memory stays ~1 byte per argument character
COMPACT_AT = 64


def args_problem(text: str) -> str | None:
    """Why ``text`` is not usable tool-call arguments (a JSON object; empty means ``{}``), or None."""
    if not text or text.isspace():
        return None
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        return f"not valid JSON ({e})"
    if type(obj) is not dict:
        return f"a JSON {type(obj).__name__}, not an object"
    return None


def add_token(frags: list[str], tok: bytes) -> None:
    """A call's argument fragment, given as its JSON string token (as orjson writes it, proven valid by the
    shortcut's shape), appended to the call's fragments, compacted as ``ToolArgs.add`` does."""
    frags.append(tok[1:-1].decode() if 92 not in tok else _loads(tok))
    if len(frags) >= COMPACT_AT:
        frags[:] = ["".join(frags)]


def keeper(frags: list[str]) -> Callable[[bytes], None]:
    """What a decoder does with each argument fragment of a call it takes as a repeat
    (``StreamDecoder.repeat``): ``add_token`` to the call's fragments."""
    return partial(add_token, frags)


class ToolArgs:
    """Argument fragments of the open function tool calls of one stream, keyed by IR block index."""

    __slots__ = ("_open", "_bad")

    def __init__(self) -> None:
        self._open: dict[int, tuple[str, list[str]]] = {}
        self._bad: list[str] = []

    def start(self, idx: int, name: str | None) -> list[str]:
        """Open call ``idx``; returns its fragment list, which a hot path may extend itself (append, then
        compact once it holds ``COMPACT_AT`` fragments) instead of calling ``add`` per fragment."""
        frags: list[str] = []
        self._open[idx] = (name or "?", frags)
        return frags

    def fragments(self, idx: int) -> list[str] | None:
        """The fragment list of open call ``idx`` (None: not open), for a hot path that extends it itself."""
        entry = self._open.get(idx)
        return entry[1] if entry is not None else None

    def add(self, idx: int, fragment: str) -> None:
        entry = self._open.get(idx)
        if entry is not None:
            frags = entry[1]
            frags.append(fragment)
            if len(frags) >= COMPACT_AT:
                frags[:] = ["".join(frags)]

    def stop(self, idx: int) -> None:
        entry = self._open.pop(idx, None)
        if entry is None:
            return
        name, frags = entry
        problem = args_problem("".join(frags))
        if problem is not None:
            self._bad.append(f"{name!r}: {problem[:200]}")

    def check(self, stop: StopReason | None) -> None:
        """End of the message: every open call is closed; bad arguments are an error unless truncated."""
        for idx in list(self._open):
            self.stop(idx)
        if self._bad and stop not in TRUNCATING_STOPS:
            bad = "; ".join(self._bad)
            self._bad.clear()
            raise UpstreamProtocolError(
                f"upstream tool call arguments are not a JSON object (stop reason {stop.value if stop else None}): {bad}"
            )
        self._bad.clear()


def token_count(value: int | None, name: str) -> int | None:
    """``value`` when it is None or a count that fits 64 bits; otherwise an ``UpstreamProtocolError``."""
    if value is None or 0 <= value <= MAX_TOKEN_COUNT:
        return value
    raise UpstreamProtocolError(f"upstream usage.{name} is out of range: {value if value < 0 else 'above 2**63'}")


def safe_message(value: object) -> str:
    """An error message any JSON encoder can write (for the fallback error frames of the stream encoders)."""
    if type(value) is not str or not value:
        return "upstream error"
    return value[:2000].encode("utf-8", "replace").decode("utf-8")
