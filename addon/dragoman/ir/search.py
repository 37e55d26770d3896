"""Hosted web search in neutral form: the search a request asks for, a search call with its sources, a citation.

* ``WebSearchSpec``: the hosted search tool of a request (Anthropic ``web_search_*``, Responses ``web_search``,
  Chat ``web_search_options`` / OpenRouter ``plugins: [{"id": "web"}]``), with the settings each protocol has.
* ``WebSearchPart``: one search the upstream ran (Anthropic ``server_tool_use`` + ``web_search_tool_result``,
  a Responses ``web_search_call`` item): its query, its sources, or the error it ended with.
* ``Citation``: a cited span of an answer's text (Anthropic ``citations``, Responses/Chat ``url_citation``).
  ``start``/``end`` index the text of the block (``TextPart``/stream block) that carries it, in characters;
  ``end == -1``: to the end of that block (a source cited without a span, as OpenRouter sends them).

``origin`` names the protocol an opaque value came from (``encrypted_content``, ``encrypted_index``, ids):
such values only go back to an upstream of that protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any

ANTHROPIC = "anthropic"
RESPONSES = "responses"
CHAT = "chat"
GEMINI = "gemini"

#: Anthropic's ``web_search_tool_result_error.error_code`` for "no search here"
UNAVAILABLE = "unavailable"

#: how the upstream of an exchange serves a requested search (``Context.search``)
SEARCH_NATIVE = "native"  # calls and results come back (Anthropic, Responses)
SEARCH_ANNOTATIONS = "annotations"  # only citations come back (Chat search models, OpenRouter's web plugin)
SEARCH_GROUNDING = "grounding"  # searches and citations come after the text they cite (Gemini's groundingMetadata)
SEARCH_UNAVAILABLE = "unavailable"  # the upstream cannot search: the client gets an unavailable result


@dataclass(slots=True)
class WebSearchSpec:
    """The hosted web search a request offers. ``user_location``: ``{city, region, country, timezone}``
    (strings). ``raw``: the client's own definition, sent as it is to an upstream of ``origin``."""

    allowed_domains: list[str] | None = None
    blocked_domains: list[str] | None = None
    user_location: dict[str, str] | None = None
    max_uses: int | None = None
    search_context_size: str | None = None
    raw: dict[str, Any] | None = None
    origin: str | None = None


@dataclass(slots=True)
class SearchSource:
    url: str
    title: str | None = None
    page_age: str | None = None
    #: Anthropic's opaque page content (only an Anthropic upstream reads it back)
    encrypted_content: str | None = None


@dataclass(slots=True)
class WebSearchPart:
    """A search call and its result. ``error``: Anthropic's ``error_code`` vocabulary (``unavailable``,
    ``max_uses_exceeded``, ``too_many_requests``, ``query_too_long``, ``invalid_tool_input``)."""

    id: str
    query: str = ""
    sources: list[SearchSource] = field(default_factory=list)
    error: str | None = None
    origin: str | None = None


@dataclass(slots=True)
class Citation:
    url: str
    title: str | None = None
    start: int = 0
    end: int = 0
    #: the cited page text (Anthropic ``cited_text``, OpenRouter ``content``)
    cited_text: str | None = None
    #: Anthropic's opaque ``encrypted_index`` (only an Anthropic upstream reads it back)
    encrypted_index: str | None = None


def context_text(part: WebSearchPart) -> str:
    """A search as plain text for an upstream that cannot take it back as a search (any protocol)."""
    lines = [f"[web search: {part.query}]" if part.query else "[web search]"]
    if part.error is not None:
        lines.append(f"(the search failed: {part.error})")
    for src in part.sources:
        lines.append(f"- {src.title} <{src.url}>" if src.title else f"- <{src.url}>")
    return "\n".join(lines)


def location_fields(loc: Any) -> dict[str, str] | None:
    """The ``city``/``region``/``country``/``timezone`` strings of a user location (any protocol's shape:
    Anthropic and Responses put them at the top, Chat under ``approximate``)."""
    if not isinstance(loc, dict):
        return None
    inner = loc.get("approximate")
    src: dict[str, Any] = inner if isinstance(inner, dict) else loc
    out = {k: v for k in ("city", "region", "country", "timezone") if isinstance(v := src.get(k), str) and v}
    return out or None


def split_spans(text: str, citations: list[Citation]) -> list[tuple[str, list[Citation]]]:
    """``text`` cut into segments at the citations' spans: uncited stretches with ``[]``, each cited span
    with the citations that cover exactly it (overlapping spans: the later one is cut to start after the
    earlier). Spans out of range are clamped; empty spans fall away."""
    n = len(text)
    spans: dict[tuple[int, int], list[Citation]] = {}
    for c in citations:
        s, e = max(0, min(c.start, n)), n if c.end < 0 else max(0, min(c.end, n))
        if e > s:
            spans.setdefault((s, e), []).append(c)
    out: list[tuple[str, list[Citation]]] = []
    at = 0
    for (s, e), cs in sorted(spans.items()):
        s = max(s, at)
        if e <= s:
            continue
        if s > at:
            out.append((text[at:s], []))
        out.append((text[s:e], cs))
        at = e
    if at < n or not out:
        out.append((text[at:], []))
    return out
