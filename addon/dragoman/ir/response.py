"""Neutral non-streaming response."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.search import WebSearchPart

OutputPart = TextPart | ThinkingPart | ToolCallPart | RefusalPart | WebSearchPart


@dataclass(slots=True)
class Response:
    id: str
    model: str
    content: list[OutputPart] = field(default_factory=list)
    stop_reason: StopReason | None = StopReason.END_TURN
    stop_sequence: str | None = None
    usage: Usage = field(default_factory=Usage)
    created: int | None = None
