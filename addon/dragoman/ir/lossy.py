"""The lossiness report of one translated exchange: what was dropped, approximated or invented, and why.

Every codec writes into one ``LossReport`` (``Context.dropped``, also reachable as ``Context.report``; a
decoded request has its own, merged into the exchange's when the request is encoded for a translated
upstream). The API is three verbs and a legacy one::

    report.drop("tools[3].cache_control", "Chat has no cache hints")
    report.approximate("message_start.usage.input_tokens", "estimated locally ...")
    report.invent("reasoning_content", "empty placeholder for a history from another model")
    report.add("top_k")  # a name only: kind and reason come from ``KNOWN`` (older callers)

A path carries the index of each list it goes through (``messages[2].content[0].cache_control``,
``tools[3].cache_control``): a codec walking a list says where it is with ``at`` (``report.at("messages[2]")``,
``report.at("content[0]", depth=1)``) and leaves with ``leave``; every entry added meanwhile is under that
place. A name's kind and reason come from ``KNOWN`` by the name as the codec gave it, else by the whole
path without its indexes. A decoder names the client request's own lists (``messages``, ``input``,
``contents``, ``tools``); an encoder names the turn it encodes by where that turn came from in the client's
request (``Message.source``).

An entry names a field path and never a value, so the report may be logged, recorded and sent in a
header count. A path is listed once (the first entry wins). The log line (``summary``) collapses indexes
to ``[]`` and lists each collapsed path once, so it does not grow with the conversation; the entries with
their indexes are in the flow's metadata, recordings and the Dragoman view. Same protocol on both sides:
nothing is translated, so the report stays empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

DROPPED = "dropped"
APPROXIMATED = "approximated"
INVENTED = "invented"
KINDS = (DROPPED, APPROXIMATED, INVENTED)

#: the reason given for a name without its own entry in ``KNOWN``
GENERIC_REASON = "the other protocol has no place for it"

_THINKING_NO_SIG = "the target protocol has no thinking signatures"

#: kind and reason of the names codecs pass to ``add`` (a name, or its head before the first "." / "(")
KNOWN: dict[str, tuple[str, str]] = {
    "cache_control": (DROPPED, "the target protocol has no cache hints"),
    "context_management": (DROPPED, "Anthropic-only context editing"),
    "output_config": (DROPPED, "Anthropic-only output settings"),
    "betas": (DROPPED, "Anthropic beta flags mean nothing to another API"),
    "top_k": (DROPPED, "the target protocol has no top_k sampling"),
    "top_p": (DROPPED, "Anthropic rejects top_p with thinking on"),
    "temperature": (DROPPED, "Anthropic rejects temperature with thinking on"),
    "tool_choice": (DROPPED, "Anthropic rejects a forced tool_choice with thinking on"),
    "tool_choice.web_search": (
        APPROXIMATED,
        "Responses cannot force its hosted web_search by name; tool_choice became required",
    ),
    "stop_sequences": (DROPPED, "the Responses API has no stop sequences"),
    "citations": (DROPPED, "the target protocol has no citations"),
    "annotations": (DROPPED, "the target protocol has no annotations"),
    "message": (DROPPED, "the target protocol has no place for it"),
    "delta": (DROPPED, "the target protocol has no place for it"),
    "logprobs": (DROPPED, "the target protocol has no logprobs"),
    "metadata": (DROPPED, "the target protocol has no such metadata"),
    "thinking": (DROPPED, "the target cannot take this thinking back"),
    "thinking.signature": (DROPPED, _THINKING_NO_SIG),
    "thinking.tool_loop_without_signature": (
        DROPPED,
        "thinking: sent without, the tool turn carries no signed thinking block",
    ),
    "thinking_without_signature": (DROPPED, "Anthropic takes back only thinking it signed"),
    "thinking_signature": (DROPPED, "a Chat client has no place for this thinking signature or encrypted reasoning"),
    "server_tool_use": (DROPPED, "server tools run only on their own provider"),
    "mcp_tool_use": (DROPPED, "server tools run only on their own provider"),
    "container": (DROPPED, "a code-execution container exists only on its own provider"),
    "compaction": (DROPPED, "Anthropic-only context compaction"),
    "stop_details": (DROPPED, "the client's protocol has no stop details"),
    "redacted_thinking": (DROPPED, "the target protocol has no encrypted thinking"),
    "reasoning": (DROPPED, "reasoning the target cannot take back"),
    "reasoning.summary": (DROPPED, "the target protocol has no reasoning summaries"),
    "reasoning.effort": (DROPPED, "Anthropic cannot take an effort with this thinking setting"),
    "reasoning.encrypted_content": (DROPPED, "encrypted reasoning of another provider"),
    "reasoning_details": (DROPPED, "entries the target cannot take back"),
    "tools": (DROPPED, "a tool the target protocol cannot run"),
    "tools.builtin": (DROPPED, "server tools run only on their own provider"),
    "tool_result": (DROPPED, "the target protocol has no place for it"),
    "tool_result.is_error": (DROPPED, "the target protocol has no error flag on tool results"),
    "tool_use": (DROPPED, "arguments that are not a JSON object"),
    "choices[1:]": (DROPPED, "n > 1: only choice 0 is translated"),
    "output": (DROPPED, "hosted tool items run only on their own provider"),
    "input": (DROPPED, "items the target protocol cannot carry"),
    "unanswered_tool_use": (INVENTED, "synthetic error result for a tool call without one"),
    "orphaned_tool_result": (APPROXIMATED, "a tool result without its call became user text"),
    "system_message_moved": (APPROXIMATED, "a later system message became a <system-reminder> user block"),
    "tool_result_in_assistant_turn": (APPROXIMATED, "a tool result in an assistant turn became text"),
    "response_format": (DROPPED, "the target protocol has no such response format"),
    "image": (DROPPED, "the target cannot take this image"),
    "input_audio": (DROPPED, "the target protocol takes no audio input"),
    "document": (DROPPED, "the target cannot take this document"),
    "file": (DROPPED, "the target cannot take this file"),
    "tool_calls.extra_content.google.thought_signature": (DROPPED, "a Gemini signature the target cannot carry"),
    "images older than": (DROPPED, "replaced by a text placeholder (dragoman_keep_images)"),
}


@dataclass(slots=True, frozen=True)
class Loss:
    """One entry: a field path (never a value), what happened to it, and why."""

    path: str
    kind: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "kind": self.kind, "reason": self.reason}

    def line(self) -> str:
        return f"{self.path}: {self.kind}, {self.reason}"


_INDEX = re.compile(r"\[\d+\]")


def collapse(path: str) -> str:
    """``messages[2].content[0].cache_control`` -> ``messages[].content[].cache_control``."""
    return _INDEX.sub("[]", path)


def _lookup(name: str) -> tuple[str, str] | None:
    hit = KNOWN.get(name)
    if hit is not None:
        return hit
    if name.endswith(("_tool_result", "_tool_use")):
        return DROPPED, "server tools run only on their own provider"
    if name.startswith("images older than"):
        return KNOWN["images older than"]
    for sep in ("(", "."):
        head = name.partition(sep)[0]
        if head != name and head in KNOWN:
            return KNOWN[head]
    return None


@lru_cache(maxsize=1024)
def known(name: str, path: str = "") -> tuple[str, str]:
    """Kind and reason for a name passed to ``add`` (indexes aside): its own entry, else its head's; else
    those of the tails of ``path`` (the name under its place), the shortest first (``input_audio``, then
    ``content.input_audio``, ...); else generic."""
    hit = _lookup(_INDEX.sub("", name))
    if hit is None and path:
        steps = _INDEX.sub("", path).split(".")
        tails = (".".join(steps[n:]) for n in range(len(steps) - 1, -1, -1))  # the shortest first
        hit = next((h for t in tails if (h := _lookup(t)) is not None), None)
    return hit or (DROPPED, GENERIC_REASON)


class LossReport:
    """The entries of one exchange, in the order they were found, one per path."""

    __slots__ = ("entries", "_paths", "_where")

    def __init__(self, entries: list[Loss] | None = None) -> None:
        self.entries: list[Loss] = []
        self._paths: set[str] = set()
        #: where the codec is (``at``): the path segments every new entry goes under
        self._where: list[str] = []
        for e in entries or ():
            self._put(e)

    def _put(self, entry: Loss) -> None:
        if entry.path not in self._paths:
            self._paths.add(entry.path)
            self.entries.append(entry)

    # -- where the codec is

    def at(self, segment: str, depth: int = 0) -> None:
        """The codec is at ``segment`` (``"messages[2]"``, ``"tools[3]"``) at ``depth`` (0: a list of the
        request; 1: a list inside its item, ``"content[0]"``); deeper places are left."""
        del self._where[depth:]
        if segment:
            self._where.append(segment)

    def leave(self, depth: int = 0) -> None:
        """Out of the place at ``depth`` (0: back at the top)."""
        del self._where[depth:]

    def place(self) -> str:
        """Where the codec is (``messages[2].content[0]``; "" at the top)."""
        return ".".join(self._where)

    def _here(self, name: str) -> str:
        return ".".join((*self._where, name)) if self._where else name

    # -- entries

    def drop(self, path: str, reason: str = "") -> None:
        full = self._here(path)
        self._put(Loss(full, DROPPED, reason or known(path, full)[1]))

    def approximate(self, path: str, reason: str) -> None:
        self._put(Loss(self._here(path), APPROXIMATED, reason))

    def invent(self, path: str, reason: str) -> None:
        self._put(Loss(self._here(path), INVENTED, reason))

    def add(self, name: str) -> None:
        """A name only (the first API): kind and reason from ``KNOWN``; the path is the name under ``at``."""
        full = self._here(name)
        if full not in self._paths:
            kind, reason = known(name, full)
            self._put(Loss(full, kind, reason))

    def merge(self, other: LossReport) -> None:
        for e in other.entries:
            self._put(e)

    @property
    def fields(self) -> list[str]:
        """The paths, in order (what the first API called the dropped field names)."""
        return [e.path for e in self.entries]

    @property
    def count(self) -> int:
        return len(self.entries)

    def by_kind(self, kind: str) -> list[str]:
        return [e.path for e in self.entries if e.kind == kind]

    def as_list(self) -> list[dict[str, str]]:
        return [e.as_dict() for e in self.entries]

    @classmethod
    def from_list(cls, items: Any) -> LossReport:
        """From ``as_list`` output, or from a list of bare names (older flows and recordings)."""
        report = cls()
        for item in items or ():
            if isinstance(item, str):
                report.add(item)
            elif isinstance(item, dict) and isinstance(item.get("path"), str):
                kind = item.get("kind")
                report._put(
                    Loss(
                        item["path"],
                        kind if kind in KINDS else DROPPED,
                        str(item.get("reason") or ""),
                    )
                )
        return report

    def summary(self) -> str:
        """One log line's worth: the paths grouped by kind (names only, never reasons or values), indexes
        collapsed to ``[]`` and each collapsed path once (``tools[].cache_control`` for every tool): the line
        names what was lost, not how often, so it does not grow with the conversation."""
        parts = []
        for kind in KINDS:
            paths = list(dict.fromkeys(collapse(p) for p in self.by_kind(kind)))
            if paths:
                parts.append(f"{kind}: {', '.join(paths)}")
        return "; ".join(parts)

    def __repr__(self) -> str:
        return f"LossReport({self.entries!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LossReport) and self.entries == other.entries
