"""Anthropic's hosted web search on the wire, both ways: the ``web_search_*`` tool, ``server_tool_use`` +
``web_search_tool_result`` blocks, ``web_search_result_location`` citations, ``usage.server_tool_use``.

Shapes (Anthropic docs, "Web search tool", read 2026-11; recordings ``tests/corpus/anthropic/
pydantic-ai__json-web-search-citations.yaml``, ``pydantic-ai__stream-web-search-citations.yaml``):
the tool ``{"type": "web_search_20250305", "name": "web_search", "max_uses", "allowed_domains",
"blocked_domains", "user_location": {"type": "approximate", city, region, country, timezone}}``; a search is a
``server_tool_use`` block (``name: "web_search"``, ``input: {"query"}``) followed by a ``web_search_tool_result``
block whose ``content`` is a list of ``web_search_result`` (``url``, ``title``, ``page_age``,
``encrypted_content``) or one ``web_search_tool_result_error`` (``error_code``); a cited text block carries
``citations: [{"type": "web_search_result_location", "url", "title", "cited_text", "encrypted_index"}]``
(streamed: ``citations_delta`` with one ``citation``); usage ``server_tool_use.web_search_requests``.

Toward an Anthropic client a cited span is its own text block, as the API sends them (``text_blocks``).
Search blocks and citations go to an Anthropic upstream only when they came from one (their opaque
``encrypted_content``/``encrypted_index`` are Anthropic's); otherwise a search becomes plain text context and
citations are dropped and named.
"""

from __future__ import annotations

import secrets
from typing import Any

import orjson

from dragoman.ir import search as s
from dragoman.ir.common import Dropped
from dragoman.ir.common import Usage
from dragoman.ir.request import TextPart
from dragoman.protocols.base import Context

TOOL_TYPE = "web_search_20250305"
TOOL_PREFIX = "web_search_"
NAME = "web_search"
RESULT = "web_search_tool_result"
CITATION = "web_search_result_location"
ID_PREFIX = "srvtoolu_"


def is_search_tool(raw: dict[str, Any] | None) -> bool:
    t = (raw or {}).get("type")
    return isinstance(t, str) and t.startswith(TOOL_PREFIX)


def spec_from_tool(raw: dict[str, Any]) -> s.WebSearchSpec:
    def strs(v: Any) -> list[str] | None:
        return [x for x in v if isinstance(x, str)] if isinstance(v, list) else None

    max_uses = raw.get("max_uses")
    return s.WebSearchSpec(
        allowed_domains=strs(raw.get("allowed_domains")),
        blocked_domains=strs(raw.get("blocked_domains")),
        user_location=s.location_fields(raw.get("user_location")),
        max_uses=max_uses if type(max_uses) is int else None,
        raw=raw,
        origin=s.ANTHROPIC,
    )


def tool_from_spec(spec: s.WebSearchSpec, ctx: Context) -> dict[str, Any]:
    if spec.origin == s.ANTHROPIC and spec.raw:
        return dict(spec.raw)
    out: dict[str, Any] = {"type": TOOL_TYPE, "name": NAME}
    if spec.max_uses is not None:
        out["max_uses"] = spec.max_uses
    if spec.allowed_domains:
        out["allowed_domains"] = spec.allowed_domains
    if spec.blocked_domains:
        out["blocked_domains"] = spec.blocked_domains
    if spec.user_location:
        out["user_location"] = {"type": "approximate", **spec.user_location}
    if spec.search_context_size is not None:
        ctx.dropped.add("web_search.search_context_size")
    return out


# ---------------------------------------------------------------- blocks -> IR


def call_query(block: dict[str, Any]) -> str:
    inp = block.get("input")
    q = inp.get("query") if isinstance(inp, dict) else None
    return q if isinstance(q, str) else ""


def query_from_json(raw: str) -> str:
    try:
        obj = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return ""
    return call_query({"input": obj})


def fill_result(part: s.WebSearchPart, content: Any) -> None:
    """A ``web_search_tool_result``'s ``content`` into ``part`` (sources, or the error code)."""
    if isinstance(content, dict):
        code = content.get("error_code")
        part.error = code if isinstance(code, str) else s.UNAVAILABLE
        return
    for r in content if isinstance(content, list) else []:
        if isinstance(r, dict) and isinstance(r.get("url"), str):
            part.sources.append(
                s.SearchSource(
                    url=r["url"],
                    title=_str(r.get("title")),
                    page_age=_str(r.get("page_age")),
                    encrypted_content=_str(r.get("encrypted_content")),
                )
            )


def citation_from_wire(c: dict[str, Any], start: int, end: int) -> s.Citation | None:
    if c.get("type") != CITATION or not isinstance(c.get("url"), str):
        return None
    return s.Citation(
        url=c["url"],
        title=_str(c.get("title")),
        start=start,
        end=end,
        cited_text=_str(c.get("cited_text")),
        encrypted_index=_str(c.get("encrypted_index")),
    )


def text_part(text: str, citations: Any, dropped: Dropped) -> TextPart:
    """A text block -> its part; its web-search citations cover the whole block."""
    cs: list[s.Citation] = []
    for c in citations if isinstance(citations, list) else []:
        cit = citation_from_wire(c, 0, len(text)) if isinstance(c, dict) else None
        if cit is None:
            dropped.add(_citation_name(c))
        else:
            cs.append(cit)
    return TextPart(text, cs or None)


class SearchPairing:
    """Pairs ``server_tool_use`` (web_search) blocks with their ``web_search_tool_result`` by id."""

    def __init__(self) -> None:
        self.calls: dict[str, s.WebSearchPart] = {}

    def call(self, block: dict[str, Any]) -> s.WebSearchPart | None:
        """A ``server_tool_use`` block: its part when it is a web search (else None)."""
        if block.get("name") != NAME or not isinstance(block.get("id"), str):
            return None
        part = s.WebSearchPart(id=block["id"], query=call_query(block), origin=s.ANTHROPIC)
        self.calls[part.id] = part
        return part

    def result(self, block: dict[str, Any]) -> s.WebSearchPart:
        """A ``web_search_tool_result`` block: fills its call's part (a new one for a result without call)."""
        tid = block.get("tool_use_id")
        tid = tid if isinstance(tid, str) else ID_PREFIX + secrets.token_hex(12)
        part = self.calls.pop(tid, None)
        if part is None:
            part = s.WebSearchPart(id=tid, origin=s.ANTHROPIC)
        fill_result(part, block.get("content"))
        return part


# ---------------------------------------------------------------- IR -> blocks (toward a client)


def call_id(part: s.WebSearchPart) -> str:
    return part.id if part.id.startswith(ID_PREFIX) else ID_PREFIX + _clean(part.id)


def result_content(part: s.WebSearchPart) -> Any:
    if part.error is not None:
        return {"type": "web_search_tool_result_error", "error_code": part.error}
    return [
        {
            "type": "web_search_result",
            "url": src.url,
            "title": src.title or src.url,
            "encrypted_content": src.encrypted_content or "",
            "page_age": src.page_age,
        }
        for src in part.sources
    ]


def search_blocks(part: s.WebSearchPart) -> list[dict[str, Any]]:
    """A search -> its ``server_tool_use`` and ``web_search_tool_result`` blocks (a client's reply)."""
    cid = call_id(part)
    return [
        {"type": "server_tool_use", "id": cid, "name": NAME, "input": {"query": part.query}},
        {"type": RESULT, "tool_use_id": cid, "content": result_content(part)},
    ]


def citation_to_wire(c: s.Citation, text: str) -> dict[str, Any]:
    return {
        "type": CITATION,
        "cited_text": c.cited_text if c.cited_text is not None else text,
        "url": c.url,
        "title": c.title,
        "encrypted_index": c.encrypted_index or "",
    }


def text_blocks(p: TextPart) -> list[dict[str, Any]]:
    """A text part -> its text blocks toward a client: a cited span is its own block with its citations."""
    if not p.citations:
        return [{"type": "text", "text": p.text}]
    out: list[dict[str, Any]] = []
    for seg, cs in s.split_spans(p.text, p.citations):
        if cs:
            out.append({"type": "text", "text": seg, "citations": [citation_to_wire(c, seg) for c in cs]})
        elif seg:
            out.append({"type": "text", "text": seg})
    return out or [{"type": "text", "text": ""}]


def block_events(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A whole content block as the stream sends it: (``content_block`` of its start, its deltas)."""
    t = block["type"]
    if t == "text":
        deltas: list[dict[str, Any]] = []
        start: dict[str, Any] = {"type": "text", "text": ""}
        if "citations" in block:
            start = {"type": "text", "text": "", "citations": []}
            deltas = [{"type": "citations_delta", "citation": c} for c in block["citations"]]
        if block["text"]:
            deltas.append({"type": "text_delta", "text": block["text"]})
        return start, deltas
    if t == "server_tool_use":
        start = {**block, "input": {}}
        return start, [{"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}]
    return block, []


def count_searches(parts: list[Any]) -> int:
    return sum(1 for p in parts if type(p) is s.WebSearchPart and p.error is None)


def with_searches(wire: dict[str, Any], usage: Usage | None, counted: int) -> dict[str, Any]:
    """Anthropic usage plus ``server_tool_use.web_search_requests`` when any search ran (the upstream's
    count, else the searches the reply shows)."""
    n = usage.web_search_requests if usage is not None and usage.web_search_requests is not None else counted
    if n:
        wire["server_tool_use"] = {"web_search_requests": n}
    return wire


def usage_searches(usage: dict[str, Any] | None) -> int | None:
    stu = (usage or {}).get("server_tool_use")
    n = stu.get("web_search_requests") if isinstance(stu, dict) else None
    return n if type(n) is int and n >= 0 else None


# ---------------------------------------------------------------- IR -> blocks (toward an Anthropic upstream)


def history_blocks(part: s.WebSearchPart, ctx: Context) -> list[dict[str, Any]]:
    """A search in the history: its own blocks when Anthropic ran it (every source has its encrypted
    content), else plain text context (query and sources)."""
    native = part.origin == s.ANTHROPIC and part.id.startswith(ID_PREFIX)
    if native and (part.error is not None or all(src.encrypted_content for src in part.sources)):
        return search_blocks(part)
    ctx.dropped.add("web_search_call(as_text)")
    return [{"type": "text", "text": s.context_text(part)}]


def history_text_block(p: TextPart, ctx: Context) -> dict[str, Any] | None:
    """A text part of the history toward an Anthropic upstream: Anthropic's own citations stay, others go."""
    if not p.text:
        return None
    if not p.citations:
        return {"type": "text", "text": p.text}
    if all(c.encrypted_index for c in p.citations) and all(
        c.start == 0 and c.end in (-1, len(p.text)) for c in p.citations
    ):
        return {"type": "text", "text": p.text, "citations": [citation_to_wire(c, p.text) for c in p.citations]}
    ctx.dropped.add("citations")
    return {"type": "text", "text": p.text}


def _citation_name(c: Any) -> str:
    t = c.get("type") if isinstance(c, dict) else None
    return f"citations.{t}" if isinstance(t, str) else "citations"


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _clean(raw: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in raw)


# ---------------------------------------------------------------- the stream decoder's search state


class StreamSearch:
    """What ``AnthropicStreamDecoder`` keeps for search: the input JSON of open ``server_tool_use`` (web
    search) blocks, the calls waiting for their result, and the length and citations of cited text blocks
    (a citation covers its whole block; it reaches the IR at the block's stop, when the length is known)."""

    __slots__ = ("inputs", "pairing", "cited")

    def __init__(self) -> None:
        #: index -> (call id, input JSON fragments)
        self.inputs: dict[int, tuple[str, list[str]]] = {}
        self.pairing = SearchPairing()
        #: index -> ([text length], citations)
        self.cited: dict[int, tuple[list[int], list[s.Citation]]] = {}

    def start_call(self, idx: int, block: dict[str, Any]) -> bool:
        """A ``server_tool_use`` block; True when it is a web search (its input is then buffered)."""
        part = self.pairing.call(block)
        if part is None:
            return False
        inp = block.get("input")
        self.inputs[idx] = (part.id, [orjson.dumps(inp).decode()] if inp else [])
        return True

    def call_input(self, idx: int, fragment: str) -> None:
        self.inputs[idx][1].append(fragment)

    def stop_call(self, idx: int) -> None:
        cid, frags = self.inputs.pop(idx)
        part = self.pairing.calls.get(cid)
        if part is not None and frags:
            part.query = query_from_json("".join(frags))

    def result(self, block: dict[str, Any]) -> s.WebSearchPart:
        return self.pairing.result(block)

    def cite_block(self, idx: int, text: str) -> None:
        self.cited[idx] = ([len(text)], [])

    def citation(self, idx: int, c: Any, dropped: Dropped) -> None:
        entry = self.cited.get(idx)
        if entry is None:
            entry = self.cited[idx] = ([0], [])
        cit = citation_from_wire(c, 0, 0) if isinstance(c, dict) else None
        if cit is None:
            dropped.add(_citation_name(c))
        else:
            entry[1].append(cit)

    def text(self, idx: int, text: str) -> None:
        self.cited[idx][0][0] += len(text)

    def stop_text(self, idx: int) -> list[s.Citation]:
        """The citations of a cited block at its stop, spanning its whole text."""
        entry = self.cited.pop(idx, None)
        if entry is None:
            return []
        n = entry[0][0]
        for c in entry[1]:
            c.start, c.end = 0, n
        return entry[1]
