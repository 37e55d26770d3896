"""The Responses API's hosted web search on the wire, both ways: the ``web_search`` tool, ``web_search_call``
items (whole and with their stream events) and ``url_citation`` annotations.

Shapes (OpenAI docs, "Web search" tool guide and the Responses API reference, read 2026-11; recordings
``tests/corpus/responses/vercel-ai__stream-web-search-citations.chunks.txt``, ``pydantic-ai__json-web-search.yaml``):
the tool ``{"type": "web_search", "filters": {"allowed_domains"}, "user_location": {"type": "approximate",
city, region, country, timezone}, "search_context_size": low|medium|high}`` (``web_search_preview`` and the dated
types accepted); a call is ``{"type": "web_search_call", "id": "ws_...", "status", "action": {"type": "search",
"query", "sources": [{"type": "url", "url"}]}}`` (sources only with ``include:
["web_search_call.action.sources"]``), streamed as ``output_item.added`` (status in_progress),
``response.web_search_call.in_progress`` / ``.searching`` / ``.completed``, ``output_item.done``; a citation is an
``output_text`` annotation ``{"type": "url_citation", "start_index", "end_index", "url", "title"}``, streamed as
``response.output_text.annotation.added`` (``annotation_index``, ``annotation``).
"""

from __future__ import annotations

from typing import Any

from dragoman.ir import search as s
from dragoman.ir.common import Dropped
from dragoman.protocols.base import Context

TOOL_TYPES = frozenset({"web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11"})
CALL = "web_search_call"
SOURCES_INCLUDE = "web_search_call.action.sources"
ID_PREFIX = "ws_"
#: a call's status when the search could not run (Anthropic's error codes all map to it)
FAILED = "failed"


def is_search_tool(raw: dict[str, Any] | None) -> bool:
    return (raw or {}).get("type") in TOOL_TYPES


def spec_from_tool(raw: dict[str, Any]) -> s.WebSearchSpec:
    filters = raw.get("filters")
    allowed = filters.get("allowed_domains") if isinstance(filters, dict) else None
    size = raw.get("search_context_size")
    return s.WebSearchSpec(
        allowed_domains=[d for d in allowed if isinstance(d, str)] if isinstance(allowed, list) else None,
        user_location=s.location_fields(raw.get("user_location")),
        search_context_size=size if isinstance(size, str) else None,
        raw=raw,
        origin=s.RESPONSES,
    )


def tool_from_spec(spec: s.WebSearchSpec, ctx: Context) -> dict[str, Any]:
    if spec.origin == s.RESPONSES and spec.raw:
        return dict(spec.raw)
    out: dict[str, Any] = {"type": "web_search"}
    if spec.allowed_domains:
        out["filters"] = {"allowed_domains": spec.allowed_domains}
    if spec.user_location:
        out["user_location"] = {"type": "approximate", **spec.user_location}
    if spec.search_context_size:
        out["search_context_size"] = spec.search_context_size
    if spec.blocked_domains:
        ctx.dropped.add("web_search.blocked_domains")
    if spec.max_uses is not None:
        ctx.dropped.add("web_search.max_uses")
    return out


# ---------------------------------------------------------------- items


def part_from_item(item: dict[str, Any]) -> s.WebSearchPart:
    """A ``web_search_call`` item -> its search (the query of a ``search`` action; the page of
    ``open_page``/``find``; failed -> ``unavailable``)."""
    raw_action = item.get("action")
    action: dict[str, Any] = raw_action if isinstance(raw_action, dict) else {}
    query = action.get("query")
    if not isinstance(query, str):
        queries = action.get("queries")
        query = " | ".join(q for q in queries if isinstance(q, str)) if isinstance(queries, list) else ""
    sources = [
        s.SearchSource(url=src["url"], title=src.get("title") if isinstance(src.get("title"), str) else None)
        for src in action.get("sources") or []
        if isinstance(src, dict) and isinstance(src.get("url"), str)
    ]
    if isinstance(action.get("url"), str):
        sources.append(s.SearchSource(url=action["url"]))
    raw_id = item.get("id")
    iid = raw_id if isinstance(raw_id, str) else ""
    return s.WebSearchPart(
        id=iid,
        query=query,
        sources=sources,
        error=s.UNAVAILABLE if item.get("status") == FAILED else None,
        # an item Dragoman made from another API's search (``item_id``) is not the Responses API's own
        origin=s.RESPONSES if not iid.startswith(FOREIGN_PREFIX) else None,
    )


#: the id prefix of an item made from an Anthropic search (its ``srvtoolu_`` id after ``ws_``)
FOREIGN_PREFIX = ID_PREFIX + "srvtoolu"


def item_id(part: s.WebSearchPart) -> str:
    if part.id.startswith(ID_PREFIX):
        return part.id
    return ID_PREFIX + "".join(c for c in part.id if c.isalnum() or c == "_")


def call_item(part: s.WebSearchPart, iid: str, *, done: bool = True) -> dict[str, Any]:
    """A search -> its ``web_search_call`` item (``done`` False: as ``output_item.added`` shows it)."""
    if not done:
        return {"id": iid, "type": CALL, "status": "in_progress"}
    action: dict[str, Any] = {"type": "search", "query": part.query}
    if part.sources:
        action["sources"] = [{"type": "url", "url": src.url} for src in part.sources]
    return {"id": iid, "type": CALL, "status": FAILED if part.error else "completed", "action": action}


def history_item(part: s.WebSearchPart, ctx: Context) -> dict[str, Any]:
    """A search in the history toward a Responses upstream: the call item when the Responses API ran it,
    else the query and sources as assistant text."""
    if part.origin == s.RESPONSES and part.id.startswith(ID_PREFIX):
        return call_item(part, part.id)
    ctx.dropped.add("web_search_call(as_text)")
    text = s.context_text(part)
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


# ---------------------------------------------------------------- annotations


def citations_from(annotations: Any, dropped: Dropped) -> list[s.Citation] | None:
    out: list[s.Citation] = []
    for a in annotations if isinstance(annotations, list) else []:
        if isinstance(a, dict) and a.get("type") == "url_citation" and isinstance(a.get("url"), str):
            start, end = a.get("start_index"), a.get("end_index")
            title = a.get("title")
            out.append(
                s.Citation(
                    url=a["url"],
                    title=title if isinstance(title, str) else None,
                    start=start if type(start) is int else 0,
                    end=end if type(end) is int else 0,
                )
            )
        else:
            dropped.add(f"annotations.{a.get('type') if isinstance(a, dict) else '?'}")
    return out or None


def annotation(c: s.Citation, offset: int, length: int) -> dict[str, Any]:
    """A citation of a text block that starts at ``offset`` of its message's text, ``length`` characters long."""
    return {
        "type": "url_citation",
        "start_index": c.start + offset,
        "end_index": (length if c.end < 0 else c.end) + offset,
        "title": c.title or c.url,
        "url": c.url,
    }
