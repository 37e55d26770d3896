"""OpenRouter ``reasoning_details`` entries carried in a thinking signature: the neutral half.

``dragoman.protocols.openai_chat.reasoning_details`` reads the entries off the Chat wire and packs them
(``carry.wrap_openrouter``: ``{"e": entries with their text emptied, "s": segments [entry, length]}``);
``restore`` here gives them back with their text, for whichever encoder sends them on: the Chat request
encoder (as they came) and the Anthropic one (entries in Anthropic's format are Anthropic thinking blocks,
see ``ANTHROPIC_FORMAT``).
"""

from __future__ import annotations

from typing import Any

from dragoman.ir import carry
from dragoman.ir.common import Dropped

SEPARATOR = "\n\n"
#: the field holding an entry's text, by entry type
TEXT_FIELD = {"reasoning.text": "text", "reasoning.summary": "summary"}
DROPPED_TEXT = "reasoning_details.text"
#: OpenRouter's ``format`` for entries holding Claude's thinking: a ``reasoning.text`` entry's
#: ``signature`` and a ``reasoning.encrypted`` entry's ``data`` (``redacted_thinking``) are Anthropic's own
ANTHROPIC_FORMAT = "anthropic-claude-v1"


def restore(signature: str | None, text: str, dropped: Dropped) -> tuple[list[dict[str, Any]], bool] | None:
    """The entries a thinking signature carries, with their text cut from ``text``, and whether ``text`` is
    in them; None when the signature is not ours. If ``text`` does not match, the entries that had text
    are left out and named in ``dropped``."""
    payload = carry.unwrap_openrouter(signature)
    if payload is None:
        return None
    entries, segments = payload.get("e"), payload.get("s")
    if not isinstance(entries, list) or not isinstance(segments, list):
        return None
    entries = [dict(e) for e in entries if isinstance(e, dict)]
    if not segments:  # no entry had text (the thinking text, if any, came from ``reasoning``)
        return entries, not text
    texts = _split(text, segments, len(entries))
    if texts is None:
        dropped.add(DROPPED_TEXT)
        with_text = {s[0] for s in segments if isinstance(s, list) and s}
        return [e for pos, e in enumerate(entries) if pos not in with_text], False
    for pos, parts in texts.items():
        field = TEXT_FIELD.get(entries[pos].get("type"))
        if field is not None:
            entries[pos][field] = "".join(parts)
    return entries, True


def _split(text: str, segments: list[Any], n_entries: int) -> dict[int, list[str]] | None:
    """The text of each entry, cut along the segments; None when ``text`` does not match them."""
    out: dict[int, list[str]] = {}
    at = 0
    for i, seg in enumerate(segments):
        if not (isinstance(seg, list) and len(seg) == 2 and all(type(x) is int for x in seg)):
            return None
        pos, n = seg
        if not 0 <= pos < n_entries or n < 0:
            return None
        if i:
            if not text.startswith(SEPARATOR, at):
                return None
            at += len(SEPARATOR)
        if at + n > len(text):
            return None
        out.setdefault(pos, []).append(text[at : at + n])
        at += n
    return out if at == len(text) else None
