"""Independent strict validators of what a client receives, one module per protocol.

Each stream validator takes the raw SSE bytes and each body validator a JSON body (bytes or dict);
they raise ``AssertionError`` with a precise message on any violation and return a ``Summary`` of the
content so tests can compare translations. They are written from the protocol docs and real
recordings, never from Dragoman's own code.

``strict=True`` (default) is the grammar Dragoman's encoders must produce. ``strict=False`` is for
real provider recordings, which deviate in a few documented, tolerated ways (see each module).
"""

from __future__ import annotations

import json
from collections.abc import Generator
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text for functions; the raw input for custom (freeform) tools
    kind: str = "function"  # function | custom

    def parsed(self) -> Any:
        """The arguments as JSON ("" counts as {}); custom tool input is returned as it is."""
        if self.kind == "custom":
            return self.arguments
        return json.loads(self.arguments) if self.arguments.strip() else {}


@dataclass
class Summary:
    """What a client accumulates from one response."""

    id: str | None = None
    model: str | None = None
    text: str = ""
    thinking: str = ""
    refusal: str = ""
    signatures: list[str] = field(default_factory=list)
    redacted: int = 0  # redacted thinking blocks / reasoning items without readable text
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: the protocol's native stop value: Anthropic stop_reason, Chat finish_reason, Responses
    #: ``status`` or ``incomplete:<reason>``
    stop_reason: str | None = None
    #: native usage object as sent (merged over the stream for Anthropic)
    usage: dict[str, Any] = field(default_factory=dict)
    #: an in-band error: {"type"/"code": ..., "message": ...}
    error: dict[str, Any] | None = None
    #: provider-side tool blocks/items seen (server_tool_use, web_search_call, ...), by type
    server_tools: list[str] = field(default_factory=list)
    events: int = 0
    #: hosted web searches and citations (``validators.search.SearchSummary``)
    search: Any = None

    def add_thinking(self, pieces: list[str]) -> None:
        self.thinking += "".join(pieces)

    @property
    def output_tokens(self) -> int | None:
        u = self.usage or {}
        for k in ("output_tokens", "completion_tokens"):
            if isinstance(u.get(k), int):
                return u[k]
        return None


def load_body(body: bytes | str | dict) -> dict[str, Any]:
    if isinstance(body, dict):
        return body
    try:
        obj = json.loads(body)
    except ValueError as e:
        raise AssertionError(f"body is not JSON: {e}") from e
    if not isinstance(obj, dict):
        raise AssertionError(f"body must be a JSON object, got {type(obj).__name__}")
    return obj


class EventError(AssertionError):
    """A violation found in an earlier event than the last one sent to a checker (``index``: that event)."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def need(cond: bool, msg: str) -> None:
    if not cond:
        raise AssertionError(msg)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(text) if text.strip() else {}
    except ValueError as e:
        raise AssertionError(f"{what}: arguments are not valid JSON ({e}): {text[:200]!r}") from e
    need(isinstance(obj, dict), f"{what}: arguments must be a JSON object, got {type(obj).__name__}")
    return obj


#: an incremental stream checker: a generator primed with ``next``, sent one ``Frame`` at a time and
#: ``None`` at the end of the stream; it raises ``AssertionError`` on the first grammar violation. What it
#: yields after a frame is None or, for a delta whose repetitions the grammar judges alike whatever their
#: strings, the variable fields of that event (``replay.Hot``): the live lint's cheap path
Checker = Generator[Any, Any, None]


def run_stream(st: Any, what: str) -> Checker:
    """The incremental checker over one stream's grammar state ``st``: ``st.event(frame)`` per frame (what it
    returns is yielded: the replay hint), ``st.end()`` once the stream ended; ``what`` names the protocol."""
    seen = 0
    hot: Any = None
    while True:
        f = yield hot
        if f is None:
            break
        seen += 1
        hot = st.event(f)
    need(seen > 0, f"{what} stream: no events")
    st.end()


def drive(checker: Checker, frames: Iterable[Any]) -> None:
    """Run a checker over a whole list of frames (the batch validators)."""
    next(checker)
    for f in frames:
        checker.send(f)
    try:
        checker.send(None)
    except StopIteration:
        return
    raise AssertionError("checker did not finish at the end of the stream")  # pragma: no cover
