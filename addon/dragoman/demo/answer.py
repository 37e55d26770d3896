"""What the fake model says, independent of the protocol: ``Answer``. Each protocol module renders it.

An answer is, in this order: optional reasoning, optional text, then zero or more tool calls; every part
is given as the pieces it streams in, so a scenario decides exactly which deltas go on the wire.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field


@dataclass(frozen=True)
class Call:
    """One tool call. ``fragments`` are the argument JSON (function) or the raw input (custom) as streamed."""

    call_id: str
    name: str
    fragments: tuple[str, ...]
    #: Responses: the output item's id
    item_id: str = ""
    #: Responses: a freeform tool's ``custom_tool_call`` (raw input) instead of a ``function_call``
    custom: bool = False

    @property
    def arguments(self) -> str:
        return "".join(self.fragments)


@dataclass(frozen=True)
class Ids:
    """The ids and the clock an answer carries on the wire."""

    message: str = "msg_fake_1"  #: the Anthropic message, the Responses message item
    completion: str = "chatcmpl-fake1"
    response: str = "resp_fake_1"
    reasoning: str = "rs_fake_1"  #: the Responses reasoning item
    created: int = 1700000000


@dataclass(frozen=True)
class Answer:
    thinking: tuple[str, ...] = ()  #: reasoning pieces (Anthropic thinking, Chat ``reasoning_content``)
    signature: str = ""  #: Anthropic: the thinking block's signature
    encrypted: str = ""  #: Responses: the reasoning item's ``encrypted_content``
    summary: tuple[str, ...] | None = None  #: Responses: the reasoning summary pieces (None: ``thinking``)
    text: tuple[str, ...] = ()
    calls: tuple[Call, ...] = ()
    length: bool = False  #: stopped by the output token limit
    fault: str | None = None  #: ``wire.MIDSTREAM_ERROR`` / ``STALL`` / ``DROP``, acting at the text deltas
    usage_in: int = 12
    usage_out: int = 7
    reasoning_tokens: int = 0  #: Responses ``output_tokens_details.reasoning_tokens``
    ids: Ids = field(default_factory=Ids)

    @property
    def summary_pieces(self) -> tuple[str, ...]:
        return self.thinking if self.summary is None else self.summary


def interleaved(calls: tuple[Call, ...] | list[Call]) -> Iterator[tuple[int, str]]:
    """``(call index, fragment)`` round robin over the calls' fragments: 0, 1, 0, 1, ... (parallel calls)."""
    for n in range(max((len(c.fragments) for c in calls), default=0)):
        for i, call in enumerate(calls):
            if n < len(call.fragments):
                yield i, call.fragments[n]


def pieces(s: str, n: int = 3) -> tuple[str, ...]:
    """``s`` cut into about ``n`` equal pieces (at least one, possibly empty)."""
    size = max(1, -(-len(s) // n))
    return tuple(s[i : i + size] for i in range(0, len(s), size)) or ("",)
