"""OpenRouter's ``reasoning_details`` on Chat: thinking text out, the entries carried in the signature, restored.

OpenRouter gives reasoning as entries: ``reasoning.text`` (``text``, optionally ``signature``),
``reasoning.summary`` (``summary``) and ``reasoning.encrypted`` (``data``), each with ``id``, ``format`` and
``index``; the next request hands them back on the assistant message for reasoning continuity. Streamed, an
entry arrives in pieces sharing its ``index``: their text is appended, a later non-null value of any other
field wins (a whole message's entries are read by the same code, one piece each, so streamed and whole agree).

The thinking text is the text of the text/summary entries, a blank line between two entries (as the
official SDKs join Responses summary parts). The entries themselves become the thinking ``signature``
(``carry.wrap_openrouter``), their text fields emptied and replaced by the text's segments (entry, length):
the text travels once, as the thinking text the client sends back, and a stream decoder holds none of it.
``restore`` rebuilds the entries for a Chat upstream; when the client's thinking text no longer matches the
segments, the entries that had text are left out (``reasoning_details.text`` in ``ctx.dropped``): a signed
text cannot be rebuilt from another text.

Toward a Chat client, every thinking block of an answer is one entry (``index`` 0, 1, ... in block order)
beside ``reasoning_content``, so OpenRouter-aware clients hand Claude's signature back: a ``reasoning.text``
(its ``signature`` and ``format: anthropic-claude-v1`` when Anthropic signed it) or, for
``redacted_thinking``, a ``reasoning.encrypted`` holding its ``data``. Streamed, the text goes out in pieces
and the signature and format in a last piece with empty text: each field appears once per entry, so the
official SDK's accumulator (which concatenates strings) and OpenRouter's clients assemble the same entry as
the whole response carries.
"""

from __future__ import annotations

from typing import Any

from dragoman.ir import carry
from dragoman.ir.openrouter import ANTHROPIC_FORMAT
from dragoman.ir.openrouter import DROPPED_TEXT as DROPPED_TEXT
from dragoman.ir.openrouter import SEPARATOR
from dragoman.ir.openrouter import TEXT_FIELD
from dragoman.ir.openrouter import restore as restore
from dragoman.ir.request import ThinkingPart


class Details:
    """The entries of one thinking block, their text replaced by segments ``[entry, length]``."""

    __slots__ = ("entries", "segments", "_by_index")

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.segments: list[list[int]] = []  # in text order; consecutive pieces of one entry share one
        self._by_index: dict[Any, int] = {}

    def add(self, d: dict[str, Any]) -> tuple[str | None, bool]:
        """Merge an entry (or a piece of one). Returns the thinking text it adds (None: it has no text
        field; a blank line first when another entry's text came before) and whether it is a summary."""
        key = d.get("index")
        pos = self._by_index.get(key) if key is not None and not isinstance(key, (dict, list)) else None
        if pos is None:
            pos = len(self.entries)
            self.entries.append({})
            if key is not None and not isinstance(key, (dict, list)):
                self._by_index[key] = pos
        entry = self.entries[pos]
        field = TEXT_FIELD.get(d.get("type") or entry.get("type"))  # type: ignore[arg-type]
        text: str | None = None
        for k, v in d.items():
            if k == field and isinstance(v, str):
                text = v
                entry[k] = ""
            elif k not in entry or v is not None:
                entry[k] = v
        if not text:
            return text, field == "summary"
        segs = self.segments
        if segs and segs[-1][0] == pos:
            segs[-1][1] += len(text)
            return text, field == "summary"
        segs.append([pos, len(text)])
        return (SEPARATOR + text if len(segs) > 1 else text), field == "summary"

    def feed(self, details: list[Any]) -> list[tuple[str, bool]]:
        """Merge entries; the (thinking text, is a summary) of each one that has a text field."""
        out: list[tuple[str, bool]] = []
        for d in details:
            if isinstance(d, dict):
                text, summary = self.add(d)
                if text is not None:
                    out.append((text, summary))
        return out

    def signature(self) -> str | None:
        """The carried entries, or None when there were none."""
        if not self.entries:
            return None
        return carry.wrap_openrouter({"e": self.entries, "s": self.segments})


def decode(details: list[Any]) -> tuple[str | None, bool, str | None]:
    """A whole message's ``reasoning_details`` -> (thinking text, or None when no entry has a text field;
    whether it is a summary; the signature)."""
    acc = Details()
    texts = acc.feed(details)
    text = "".join(t for t, _ in texts) if texts else None
    return text, any(summary for t, summary in texts if t), acc.signature()


def thinking_part(details: list[Any] | None, reasoning: str | None) -> ThinkingPart | None:
    """A message's reasoning -> ThinkingPart: ``reasoning_details`` as the stream decoder reads them (their
    text if they have a text field, else ``reasoning``), or ``reasoning`` alone; None when there is none."""
    if details:
        text, summary, signature = decode(details)
        if text is None:
            text, summary = reasoning or "", False
        if text or signature:
            return ThinkingPart(text=text, signature=signature, summary=summary)
    return ThinkingPart(text=reasoning) if reasoning else None


# ---------------------------------------------------------------- toward a Chat client


def anthropic_signature(signature: str | None) -> str | None:
    """A thinking signature Anthropic gave (not one of our carried values), else None."""
    return signature if signature and not carry.is_carried(signature) else None


def redacted_entry(data: str, index: int) -> dict[str, Any]:
    return {"type": "reasoning.encrypted", "data": data, "format": ANTHROPIC_FORMAT, "index": index}


def signature_entry(signature: str, index: int) -> dict[str, Any]:
    """The last streamed piece of an Anthropic-signed entry."""
    return {"type": "reasoning.text", "text": "", "index": index, "signature": signature, "format": ANTHROPIC_FORMAT}


def answer_entry(p: ThinkingPart, index: int) -> dict[str, Any] | None:
    """One thinking part of a whole answer -> its entry (what the streamed pieces add up to); None when it
    has neither text nor anything Anthropic signed."""
    if p.redacted_data:
        return redacted_entry(p.redacted_data, index)
    sig = anthropic_signature(p.signature)
    if sig is not None:
        return signature_entry(sig, index) | {"text": p.text}
    if not p.text:
        return None
    return {"type": "reasoning.text", "text": p.text, "index": index}
