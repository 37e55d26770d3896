"""Hosted web search on a Chat Completions wire, both ways: what a Chat client asks for, how each provider
profile runs it, and ``url_citation`` annotations.

Shapes: OpenAI (Chat Completions reference and the "Web search" guide, read 2026-11): a search model
(``gpt-4o-search-preview``, ``gpt-5-search-api``) takes ``web_search_options: {"search_context_size",
"user_location": {"type": "approximate", "approximate": {city, region, country, timezone}}}`` and answers with
``message.annotations: [{"type": "url_citation", "url_citation": {"url", "title", "start_index",
"end_index"}}]`` (in ``delta.annotations`` when streamed). OpenRouter (docs "Server tools: Web Search", read
2026-11; recordings ``tests/corpus/chat/pydantic-ai__*openrouter-url-citations.yaml``): any model searches with
the tool ``{"type": "openrouter:web_search", "parameters": {max_uses, search_context_size, allowed_domains,
excluded_domains, user_location}}`` (the older ``plugins: [{"id": "web"}]`` still read from clients); its
annotations add the page ``content`` and may carry no span (``start_index == end_index == 0``: the citation
then covers the whole answer); usage ``server_tool_use_details.web_search_requests``.

Which upstream can search is its profile's ``web_search`` (``profiles.SEARCH_*``); elsewhere the request goes
without the search and ``Context.search`` says unavailable (``protocols._search``).
"""

from __future__ import annotations

import fnmatch
from typing import Any

from dragoman.ir import search as s
from dragoman.ir.common import Dropped
from dragoman.protocols import profiles as pf
from dragoman.protocols.base import Context

OPENROUTER_TOOL = "openrouter:web_search"


def spec_from_body(body: dict[str, Any]) -> s.WebSearchSpec | None:
    """The search a Chat client asks for: ``web_search_options``, OpenRouter's tool or its web plugin."""
    opts = body.get("web_search_options")
    if isinstance(opts, dict):
        size = opts.get("search_context_size")
        return s.WebSearchSpec(
            user_location=s.location_fields(opts.get("user_location")),
            search_context_size=size if isinstance(size, str) else None,
            raw=opts,
            origin=s.CHAT,
        )
    for t in body.get("tools") or []:
        if isinstance(t, dict) and t.get("type") == OPENROUTER_TOOL:
            params = t.get("parameters")
            return _openrouter_spec(params if isinstance(params, dict) else {})
    for p in body.get("plugins") or []:
        if isinstance(p, dict) and p.get("id") == "web":
            return _openrouter_spec({"allowed_domains": p.get("include_domains"), **p})
    return None


def _openrouter_spec(params: dict[str, Any]) -> s.WebSearchSpec:
    def strs(v: Any) -> list[str] | None:
        return [x for x in v if isinstance(x, str)] if isinstance(v, list) else None

    size, uses = params.get("search_context_size"), params.get("max_uses")
    return s.WebSearchSpec(
        allowed_domains=strs(params.get("allowed_domains")),
        blocked_domains=strs(params.get("excluded_domains") or params.get("exclude_domains")),
        user_location=s.location_fields(params.get("user_location")),
        max_uses=uses if type(uses) is int else None,
        search_context_size=size if isinstance(size, str) else None,
        origin=s.CHAT,
    )


def can_search(ctx: Context, model: str) -> bool:
    p = ctx.profile
    if p.web_search == pf.SEARCH_NONE:
        return False
    return not p.search_models or any(fnmatch.fnmatchcase(model.lower(), g) for g in p.search_models)


def put_search(spec: s.WebSearchSpec, model: str, ctx: Context, out: dict[str, Any]) -> None:
    """The search toward the Chat upstream, as its profile runs it; an upstream that cannot search gets
    none and ``ctx.search`` says unavailable."""
    if not can_search(ctx, model):
        ctx.search = s.SEARCH_UNAVAILABLE
        ctx.dropped.add("web_search(unavailable)")
        return
    ctx.search = s.SEARCH_ANNOTATIONS
    if ctx.profile.web_search == pf.SEARCH_OPENROUTER:
        params: dict[str, Any] = {}
        if spec.max_uses is not None:
            params["max_uses"] = spec.max_uses
        if spec.search_context_size:
            params["search_context_size"] = spec.search_context_size
        if spec.allowed_domains:
            params["allowed_domains"] = spec.allowed_domains
        if spec.blocked_domains:
            params["excluded_domains"] = spec.blocked_domains
        if spec.user_location:
            params["user_location"] = {"type": "approximate", **spec.user_location}
        tool: dict[str, Any] = {"type": OPENROUTER_TOOL}
        if params:
            tool["parameters"] = params
        out.setdefault("tools", []).append(tool)
        return
    opts: dict[str, Any] = {}
    if spec.search_context_size:
        opts["search_context_size"] = spec.search_context_size
    if spec.user_location:
        opts["user_location"] = {"type": "approximate", "approximate": dict(spec.user_location)}
    for name, value in (
        ("allowed_domains", spec.allowed_domains),
        ("blocked_domains", spec.blocked_domains),
        ("max_uses", spec.max_uses),
    ):
        if value:
            ctx.dropped.add(f"web_search.{name}")
    out["web_search_options"] = opts


# ---------------------------------------------------------------- annotations


def citations_from(annotations: Any, dropped: Dropped) -> list[s.Citation]:
    """Chat ``annotations`` -> citations; one without a span (OpenRouter's 0..0) covers its whole block
    (``end = -1``)."""
    out: list[s.Citation] = []
    for a in annotations if isinstance(annotations, list) else []:
        uc = a.get("url_citation") if isinstance(a, dict) and a.get("type") == "url_citation" else None
        if not isinstance(uc, dict) or not isinstance(uc.get("url"), str):
            dropped.add("annotations")
            continue
        start, end = uc.get("start_index"), uc.get("end_index")
        start = start if type(start) is int else 0
        end = end if type(end) is int else 0
        title, content = uc.get("title"), uc.get("content")
        out.append(
            s.Citation(
                url=uc["url"],
                title=title if isinstance(title, str) and title else None,
                start=start if end > start else 0,
                end=end if end > start else -1,
                cited_text=content if isinstance(content, str) else None,
            )
        )
    return out


def annotation(c: s.Citation, offset: int, length: int) -> dict[str, Any]:
    """A citation of a block starting at ``offset`` of the message text, ``length`` characters long."""
    end = length if c.end < 0 else c.end
    return {
        "type": "url_citation",
        "url_citation": {
            "url": c.url,
            "title": c.title or c.url,
            "start_index": c.start + offset,
            "end_index": end + offset,
        },
    }


def usage_searches(u: dict[str, Any]) -> int | None:
    d = u.get("server_tool_use_details")
    n = d.get("web_search_requests") if isinstance(d, dict) else None
    return n if type(n) is int and n >= 0 else None
