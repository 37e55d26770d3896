"""Google Search grounding on a Gemini wire, both ways: the ``googleSearch`` tool and ``groundingMetadata``.

Shapes: Gemini API reference ``GenerateContentResponse`` / ``GroundingMetadata`` and the "Grounding with Google
Search" guide (ai.google.dev/api/generate-content, ai.google.dev/gemini-api/docs/google-search, read 2026-11).
A request offers search with ``tools: [{"googleSearch": {}}]`` (``google_search`` in snake case; the older
``googleSearchRetrieval``). The candidate then carries ``groundingMetadata``: ``webSearchQueries`` (the queries
run), ``groundingChunks: [{"web": {"uri", "title"}}]`` (the sources), ``groundingSupports: [{"segment":
{"partIndex"?, "startIndex", "endIndex", "text"}, "groundingChunkIndices": [...]}]`` (which span of the answer
each source supports) and ``searchEntryPoint`` (rendered HTML, Gemini's own: not carried to other clients).
Segment indices are UTF-8 *byte* offsets ("measured in bytes", the reference); without ``partIndex`` they
index the answer's text as a whole (its non-thought text parts joined). IR citations index characters:
converted both ways here.

Mapping: each query is one ``WebSearchPart`` (the sources ride on the first); each support and chunk index is
one ``Citation``. A failed search (the "search unavailable" answer of an upstream that cannot search) has no
Gemini shape: the client gets no ``groundingMetadata`` (an answer not grounded) and it is listed as
``web_search(<error>)``.
"""

from __future__ import annotations

from typing import Any

from dragoman.ir import search as s
from dragoman.ir.common import Dropped
from dragoman.ir.request import Request
from dragoman.protocols.base import Context

#: the tool keys that ask for Google Search
SEARCH_KEYS = ("googleSearch", "google_search", "googleSearchRetrieval", "google_search_retrieval")


def take_spec(req: Request) -> None:
    """Moves a Gemini client's Google Search tool from ``req.tools`` to ``req.web_search``."""
    for t in req.tools:
        if t.kind == "builtin" and t.raw and next(iter(t.raw)) in SEARCH_KEYS:
            req.tools.remove(t)
            req.web_search = s.WebSearchSpec(raw=t.raw, origin=s.GEMINI)
            return


def tool_from_spec(spec: s.WebSearchSpec, ctx: Context) -> dict[str, Any]:
    """The search toward a Gemini upstream: the client's own tool when it came from Gemini, else
    ``{"googleSearch": {}}`` (Gemini's tool has no domain, location, size or use limits: listed)."""
    ctx.search = s.SEARCH_GROUNDING
    if spec.origin == s.GEMINI and spec.raw:
        return spec.raw
    for name, value in (
        ("allowed_domains", spec.allowed_domains),
        ("blocked_domains", spec.blocked_domains),
        ("user_location", spec.user_location),
        ("max_uses", spec.max_uses),
        ("search_context_size", spec.search_context_size),
    ):
        if value:
            ctx.dropped.add(f"web_search.{name}")
    return {"googleSearch": {}}


# ---------------------------------------------------------------- byte <-> character offsets


def byte_to_char(text: str, b: int) -> int:
    """The character offset of UTF-8 byte offset ``b`` of ``text`` (inside a character: that character's start)."""
    if text.isascii():
        return max(0, min(b, len(text)))
    return len(text.encode()[: max(0, b)].decode(errors="ignore"))


def char_to_byte(text: str, c: int) -> int:
    return c if text.isascii() else len(text[: max(0, c)].encode())


# ---------------------------------------------------------------- decode (upstream -> IR)


def searches_from(meta: dict[str, Any], rid: str, dropped: Dropped, first: int = 0) -> list[s.WebSearchPart]:
    """``webSearchQueries`` + ``groundingChunks`` -> search parts (ids ``gs_<rid>_<n>``; sources on the first)."""
    queries = [q for q in meta.get("webSearchQueries") or () if isinstance(q, str)]
    sources = sources_from(meta.get("groundingChunks"), dropped)
    if not queries and sources:
        queries = [""]
    if "searchEntryPoint" in meta:
        dropped.add("groundingMetadata.searchEntryPoint")
    return [
        s.WebSearchPart(
            id=f"gs_{rid or 'gemini'}_{first + n}", query=q, sources=sources if n == 0 else [], origin=s.GEMINI
        )
        for n, q in enumerate(queries)
    ]


def sources_from(chunks: Any, dropped: Dropped) -> list[s.SearchSource]:
    out: list[s.SearchSource] = []
    for ch in chunks if isinstance(chunks, list) else ():
        web = ch.get("web") if isinstance(ch, dict) else None
        if not isinstance(web, dict) or not isinstance(web.get("uri"), str):
            dropped.add("groundingChunks(not web)")
            continue
        title = web.get("title")
        out.append(s.SearchSource(url=web["uri"], title=title if isinstance(title, str) and title else None))
    return out


def supports_from(meta: dict[str, Any], dropped: Dropped) -> list[tuple[int | None, int, int, s.Citation]]:
    """``groundingSupports`` -> ``(partIndex, startByte, endByte, citation)``, one per chunk index; the
    citation's ``start``/``end`` are set by the caller, who knows the text."""
    sources = sources_from(meta.get("groundingChunks"), Dropped())
    out: list[tuple[int | None, int, int, s.Citation]] = []
    for sup in meta.get("groundingSupports") or ():
        seg = sup.get("segment") if isinstance(sup, dict) else None
        if not isinstance(seg, dict):
            dropped.add("groundingSupports(no segment)")
            continue
        start, end, part = seg.get("startIndex", 0), seg.get("endIndex"), seg.get("partIndex")
        if type(start) is not int or type(end) is not int or end <= start:
            dropped.add("groundingSupports(no span)")
            continue
        for i in sup.get("groundingChunkIndices") or ():
            if type(i) is not int or not 0 <= i < len(sources):
                dropped.add("groundingSupports(bad chunk index)")
                continue
            src = sources[i]
            cited = seg.get("text")
            cite = s.Citation(url=src.url, title=src.title, cited_text=cited if isinstance(cited, str) else None)
            out.append((part if type(part) is int else None, start, end, cite))
    return out


# ---------------------------------------------------------------- encode (IR -> Gemini client)


class Grounding:
    """Collects searches and citations of one answer into its ``groundingMetadata``. Citations are added with
    the byte offset of their block in the answer's text and the block's text (for characters -> bytes)."""

    __slots__ = ("queries", "chunks", "_index", "supports", "dropped")

    def __init__(self, dropped: Dropped) -> None:
        self.queries: list[str] = []
        self.chunks: list[dict[str, Any]] = []
        self._index: dict[str, int] = {}
        self.supports: dict[tuple[int, int], tuple[str, list[int]]] = {}
        self.dropped = dropped

    def _chunk(self, url: str, title: str | None) -> int:
        i = self._index.get(url)
        if i is None:
            i = self._index[url] = len(self.chunks)
            self.chunks.append({"web": {"uri": url, "title": title or url}})
        return i

    def search(self, part: s.WebSearchPart) -> None:
        if part.error is not None:
            self.dropped.add(f"web_search({part.error})")
            return
        if part.query:
            self.queries.append(part.query)
        for src in part.sources:
            self._chunk(src.url, src.title)

    def citation(self, c: s.Citation, block_text: str, block_byte: int) -> None:
        end = len(block_text) if c.end < 0 else min(c.end, len(block_text))
        start = max(0, min(c.start, end))
        if end <= start:
            self.dropped.add("citations(empty span)")
            return
        key = (block_byte + char_to_byte(block_text, start), block_byte + char_to_byte(block_text, end))
        idx = self._chunk(c.url, c.title)
        lst = self.supports.setdefault(key, (block_text[start:end], []))[1]
        if idx not in lst:
            lst.append(idx)

    def metadata(self) -> dict[str, Any] | None:
        """The ``groundingMetadata`` of what was added; None: nothing."""
        if not self.queries and not self.chunks:
            return None
        meta: dict[str, Any] = {}
        if self.queries:
            meta["webSearchQueries"] = self.queries
        meta["groundingChunks"] = self.chunks
        if self.supports:
            meta["groundingSupports"] = [
                {"segment": {"startIndex": a, "endIndex": b, "text": t}, "groundingChunkIndices": idx}
                for (a, b), (t, idx) in sorted(self.supports.items())
            ]
        return meta


def cite_texts(meta: dict[str, Any], texts: list[tuple[int, Any]], dropped: Dropped) -> None:
    """Puts the supports of ``meta`` on the text parts they cite. ``texts``: ``(Gemini part index, TextPart)``
    of the answer's non-thought text parts in order. A segment with ``partIndex`` indexes that part's bytes;
    one without indexes the parts' text joined (a span over several parts is cited in each)."""
    starts: list[int] = []
    at = 0
    for _, tp in texts:
        starts.append(at)
        at += len(tp.text.encode())
    by_index = {gi: n for n, (gi, _) in enumerate(texts)}
    for part, a, b, cite in supports_from(meta, dropped):
        if part is not None:
            n = by_index.get(part)
            if n is None:
                dropped.add("groundingSupports(bad partIndex)")
                continue
            a, b = a + starts[n], b + starts[n]
        placed = False
        for n, (_, tp) in enumerate(texts):
            lo, hi = starts[n], starts[n] + len(tp.text.encode())
            if b <= lo or a >= hi:
                continue
            c = s.Citation(cite.url, cite.title, cited_text=cite.cited_text)
            c.start = byte_to_char(tp.text, max(a, lo) - lo)
            c.end = byte_to_char(tp.text, min(b, hi) - lo)
            if c.end > c.start:
                tp.citations = (tp.citations or []) + [c]
                placed = True
        if not placed:
            dropped.add("groundingSupports(out of range)")
