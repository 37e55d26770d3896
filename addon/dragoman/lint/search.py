"""Strict checks of hosted web search and citations in what a client receives, one function per protocol
and shape (stream / whole body). Written from the providers' docs and real recordings, never from
Dragoman's code. Each returns a ``SearchSummary``: the searches (query, source urls, error) and every
citation with the exact text it cites *as the client received it*, so a test can compare a translation with
its source.

Shapes and their sources:

* Anthropic (docs "Web search tool"; recordings ``anthropic/pydantic-ai__stream-web-search-citations.yaml``,
  ``anthropic/pydantic-ai__json-web-search-citations.yaml``): ``server_tool_use`` (name ``web_search``, input
  ``{"query"}``; streamed: ``input: {}`` then ``input_json_delta``) directly followed by its
  ``web_search_tool_result`` (same ``tool_use_id``; ``content`` a list of ``web_search_result`` with ``url``,
  ``title``, ``encrypted_content``, or a ``web_search_tool_result_error`` with an ``error_code``); a cited text
  block starts with ``citations: []`` and gets one ``citations_delta`` per ``web_search_result_location``
  (``url``, ``title``, ``cited_text``, ``encrypted_index``); a citation cites its whole block.
* Responses (docs "Web search" + API reference; recording ``responses/vercel-ai__stream-web-search-citations``):
  a ``web_search_call`` item is added ``in_progress``, then ``response.web_search_call.in_progress``,
  ``.searching``, ``.completed`` (not for a failed call), then done with ``action: {"type": "search", "query",
  "sources": [{"type": "url", "url"}]}``; ``response.output_text.annotation.added`` numbers annotations from 0
  per part and each ``url_citation`` spans text already sent; the part's final ``annotations`` are exactly the
  added ones.
* Chat (OpenAI Chat reference; OpenRouter recordings ``chat/pydantic-ai__*openrouter-url-citations``):
  ``annotations: [{"type": "url_citation", "url_citation": {"url", "title", "start_index", "end_index"}}]`` on the
  message (``delta.annotations`` streamed, accumulated); spans index the whole content. OpenRouter sends spans
  0..0 (no span); ``strict=False`` accepts them.
* Gemini (API reference ``GroundingMetadata``, ``GroundingSupport``, ``Segment`` at ai.google.dev/api/generate-content
  and the "Grounding with Google Search" guide, read 2026-11; the Vertex reference says the same: "Start index in
  the given Part, measured in bytes"): a candidate's ``groundingMetadata`` has ``webSearchQueries`` (strings),
  ``groundingChunks: [{"web": {"uri", "title"}}]`` and ``groundingSupports: [{"segment": {"partIndex"?,
  "startIndex"?, "endIndex", "text"?}, "groundingChunkIndices": [int]}]``. Indices are UTF-8 byte offsets of the
  answer's text (its non-thought text parts joined, no ``partIndex``); ``text``, when given, is exactly those
  bytes; every chunk index names a chunk. Streamed, the metadata rides on the last event (strict).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from dragoman.lint import load_body
from dragoman.lint import need
from dragoman.lint.sse import parse_sse

ERROR_CODES = {
    "unavailable",
    "max_uses_exceeded",
    "too_many_requests",
    "query_too_long",
    "invalid_tool_input",
    "request_too_large",
}


@dataclass
class Search:
    id: str
    query: str
    urls: list[str]
    error: str | None = None


@dataclass(frozen=True)
class Cite:
    url: str
    text: str  # the cited text as the client received it


@dataclass
class SearchSummary:
    searches: list[Search] = field(default_factory=list)
    citations: list[Cite] = field(default_factory=list)
    text: str = ""
    web_search_requests: int | None = None


# ---------------------------------------------------------------- Anthropic


def _anthropic_result(s: SearchSummary, cb: dict[str, Any], pending: Search | None, where: str) -> None:
    need(pending is not None, f"{where}: web_search_tool_result without a server_tool_use before it")
    assert pending is not None
    need(cb.get("tool_use_id") == pending.id, f"{where}: tool_use_id {cb.get('tool_use_id')!r} != {pending.id!r}")
    content = cb.get("content")
    if isinstance(content, dict):
        need(content.get("type") == "web_search_tool_result_error", f"{where}: result error needs its type")
        need(content.get("error_code") in ERROR_CODES, f"{where}: error_code {content.get('error_code')!r}")
        pending.error = content["error_code"]
    else:
        need(isinstance(content, list), f"{where}: web_search_tool_result content must be a list or an error")
        for r in content:
            need(isinstance(r, dict) and r.get("type") == "web_search_result", f"{where}: {r!r} not a result")
            for k in ("url", "title", "encrypted_content"):
                need(isinstance(r.get(k), str), f"{where}: web_search_result.{k} must be a string")
            pending.urls.append(r["url"])
    s.searches.append(pending)


def _anthropic_citation(c: Any, where: str) -> str:
    need(isinstance(c, dict) and c.get("type") == "web_search_result_location", f"{where}: citation {c!r}")
    need(isinstance(c.get("url"), str) and c["url"], f"{where}: citation url")
    need(isinstance(c.get("cited_text"), str), f"{where}: citation cited_text must be a string")
    need(isinstance(c.get("encrypted_index"), str), f"{where}: citation encrypted_index must be a string")
    need(c.get("title") is None or isinstance(c["title"], str), f"{where}: citation title")
    return str(c["url"])


def anthropic_stream(data: bytes, *, strict: bool = True) -> SearchSummary:
    frames, _ = parse_sse(data, strict=strict)
    s = SearchSummary()
    call: Search | None = None  # the web search call awaiting its result
    buf: list[str] = []
    kind = ""
    text: list[str] = []
    urls: list[str] | None = None  # citations of the open text block (None: the block is not cited)
    for f in frames:
        obj = f.json()
        t, where = obj.get("type"), f"event #{f.n}"
        if t == "content_block_start":
            cb = obj["content_block"]
            kind = cb["type"]
            need(call is None or kind == "web_search_tool_result", f"{where}: {kind} between a search and its result")
            if kind == "server_tool_use" and cb.get("name") == "web_search":
                call, buf = Search(cb["id"], "", []), []
            elif kind == "web_search_tool_result":
                _anthropic_result(s, cb, call, where)
                call = None
            elif kind == "text":
                text = []
                urls = [] if "citations" in cb else None
                need(not cb.get("citations"), f"{where}: a streamed text block starts with citations: []")
        elif t == "content_block_delta":
            d = obj["delta"]
            if d["type"] == "input_json_delta" and kind == "server_tool_use" and call is not None:
                buf.append(d["partial_json"])
            elif d["type"] == "text_delta":
                text.append(d["text"])
            elif d["type"] == "citations_delta":
                need(urls is not None, f"{where}: citations_delta in a block that did not start with citations")
                need(not text, f"{where}: citations_delta after the block's text")
                assert urls is not None
                urls.append(_anthropic_citation(d.get("citation"), where))
        elif t == "content_block_stop":
            if kind == "server_tool_use" and call is not None:
                q = json.loads("".join(buf) or "{}").get("query")
                need(isinstance(q, str), f"{where}: web_search input.query must be a string")
                call.query = q
            elif kind == "text":
                block = "".join(text)
                s.text += block
                s.citations.extend(Cite(u, block) for u in urls or [])
            kind = ""
        elif t == "message_delta":
            stu = (obj.get("usage") or {}).get("server_tool_use")
            if isinstance(stu, dict):
                s.web_search_requests = stu.get("web_search_requests")
    need(call is None or not strict, "a web search call without its web_search_tool_result")
    return s


def anthropic_message(body: bytes | str | dict) -> SearchSummary:
    obj = load_body(body)
    s = SearchSummary()
    call: Search | None = None
    for n, b in enumerate(obj["content"]):
        where = f"content[{n}]"
        t = b["type"]
        need(call is None or t == "web_search_tool_result", f"{where}: {t} between a search and its result")
        if t == "server_tool_use" and b.get("name") == "web_search":
            need(isinstance((b.get("input") or {}).get("query"), str), f"{where}: input.query must be a string")
            call = Search(b["id"], b["input"]["query"], [])
        elif t == "web_search_tool_result":
            _anthropic_result(s, b, call, where)
            call = None
        elif t == "text":
            s.text += b["text"]
            for c in b.get("citations") or []:
                s.citations.append(Cite(_anthropic_citation(c, where), b["text"]))
    stu = (obj.get("usage") or {}).get("server_tool_use")
    if isinstance(stu, dict):
        s.web_search_requests = stu.get("web_search_requests")
    return s


# ---------------------------------------------------------------- Responses


def _responses_call(item: dict[str, Any], where: str) -> Search:
    need(item.get("status") in ("completed", "failed", "incomplete"), f"{where}: web_search_call status")
    action = item.get("action") or {}
    need(
        action.get("type") in ("search", "open_page", "find", "find_in_page"),
        f"{where}: action.type {action.get('type')!r}",
    )
    urls = []
    for src in action.get("sources") or []:
        need(isinstance(src, dict) and src.get("type") in ("url", "api"), f"{where}: source {src!r}")
        if src["type"] == "url":
            need(isinstance(src.get("url"), str), f"{where}: source url")
            urls.append(src["url"])
    if action.get("type") != "search":  # open_page / find_in_page: the page it read
        need(isinstance(action.get("url"), str), f"{where}: {action.get('type')} needs its url")
        urls.append(action["url"])
    query = action.get("query", "")
    need(isinstance(query, str), f"{where}: action.query must be a string")
    return Search(item["id"], query, urls, "unavailable" if item["status"] == "failed" else None)


def _url_citation(a: Any, length: int, where: str, strict: bool) -> tuple[str, int, int]:
    need(isinstance(a, dict) and a.get("type") == "url_citation", f"{where}: annotation {a!r}")
    need(isinstance(a.get("url"), str) and isinstance(a.get("title"), str), f"{where}: url_citation url/title")
    st, en = a.get("start_index"), a.get("end_index")
    need(isinstance(st, int) and isinstance(en, int), f"{where}: url_citation start/end must be ints")
    need(0 <= st <= en <= length, f"{where}: span {st}..{en} outside the {length} characters sent")
    need(en > st or not strict, f"{where}: empty span {st}..{en}")
    return a["url"], st, en


def responses_stream(data: bytes, *, strict: bool = True) -> SearchSummary:
    frames, _ = parse_sse(data, strict=strict)
    s = SearchSummary()
    calls: dict[str, list[str]] = {}  # web_search_call id -> its events so far
    texts: dict[tuple[str, int], list[str]] = {}
    added: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for f in frames:
        if f.data.strip() == "[DONE]":  # OpenRouter's Responses API ends like Chat (tolerated by the validator)
            continue
        obj = f.json()
        t, where = obj.get("type", ""), f"event #{f.n} ({obj.get('type')})"
        item = obj.get("item") if isinstance(obj.get("item"), dict) else {}
        if t == "response.output_item.added" and item.get("type") == "web_search_call":
            need(item.get("status") == "in_progress", f"{where}: a web_search_call is added in_progress")
            calls[item["id"]] = ["added"]
        elif t.startswith("response.web_search_call."):
            seen = calls.get(obj.get("item_id"))
            need(seen is not None, f"{where}: for an unknown web_search_call")
            assert seen is not None
            step = t.rsplit(".", 1)[1]
            order = ["added", "in_progress", "searching", "completed"]
            need(order.index(step) == len(seen), f"{where}: {step} after {seen}")
            seen.append(step)
        elif t == "response.output_item.done" and item.get("type") == "web_search_call":
            seen = calls.pop(item["id"], None)
            need(seen is not None, f"{where}: done for a web_search_call never added")
            assert seen is not None
            want = ["added", "in_progress", "searching"] + ([] if item.get("status") == "failed" else ["completed"])
            need(seen == want, f"{where}: events {seen}, expected {want}")
            s.searches.append(_responses_call(item, where))
        elif t == "response.output_text.delta":
            texts.setdefault((obj["item_id"], obj["content_index"]), []).append(obj["delta"])
        elif t == "response.output_text.annotation.added":
            key = (obj["item_id"], obj["content_index"])
            got = added.setdefault(key, [])
            need(obj.get("annotation_index") == len(got), f"{where}: annotation_index {obj.get('annotation_index')}")
            _url_citation(obj.get("annotation"), len("".join(texts.get(key, []))), where, strict)
            got.append(obj["annotation"])
        elif t == "response.output_item.done" and item.get("type") == "message":
            for ci, p in enumerate(item.get("content") or []):
                if p.get("type") != "output_text":
                    continue
                text = p["text"]
                s.text += text
                ann = p.get("annotations") or []
                need(ann == added.get((item["id"], ci), []), f"{where}: part annotations differ from the added ones")
                for a in ann:
                    url, st, en = _url_citation(a, len(text), where, strict)
                    s.citations.append(Cite(url, text[st:en]))
    need(not calls, f"web_search_call items never done: {sorted(calls)}")
    return s


def responses_body(body: bytes | str | dict, *, strict: bool = True) -> SearchSummary:
    obj = load_body(body)
    s = SearchSummary()
    for n, item in enumerate(obj.get("output") or []):
        where = f"output[{n}]"
        if item.get("type") == "web_search_call":
            s.searches.append(_responses_call(item, where))
        elif item.get("type") == "message":
            for p in item.get("content") or []:
                if p.get("type") == "output_text":
                    s.text += p["text"]
                    for a in p.get("annotations") or []:
                        url, st, en = _url_citation(a, len(p["text"]), where, strict)
                        s.citations.append(Cite(url, p["text"][st:en]))
    return s


# ---------------------------------------------------------------- Chat


def _chat_annotations(s: SearchSummary, anns: list[Any], strict: bool) -> None:
    for n, a in enumerate(anns):
        where = f"annotations[{n}]"
        need(isinstance(a, dict) and a.get("type") == "url_citation", f"{where}: {a!r}")
        url, st, en = _url_citation({"type": "url_citation", **a["url_citation"]}, len(s.text), where, strict)
        s.citations.append(Cite(url, s.text[st:en]))


def chat_stream(data: bytes, *, strict: bool = True) -> SearchSummary:
    frames, _ = parse_sse(data, strict=strict)
    s = SearchSummary()
    anns: list[Any] = []
    for f in frames:
        if f.data.strip() == "[DONE]":
            break
        obj = f.json()
        for ch in obj.get("choices") or []:
            d = ch.get("delta") or {}
            if isinstance(d.get("content"), str):
                s.text += d["content"]
            anns.extend(d.get("annotations") or [])
        d = (obj.get("usage") or {}).get("server_tool_use_details")
        if isinstance(d, dict):
            s.web_search_requests = d.get("web_search_requests")
    _chat_annotations(s, anns, strict)
    return s


def chat_completion(body: bytes | str | dict, *, strict: bool = True) -> SearchSummary:
    obj = load_body(body)
    s = SearchSummary()
    msg = obj["choices"][0]["message"]
    s.text = msg.get("content") or ""
    _chat_annotations(s, msg.get("annotations") or [], strict)
    return s


# ---------------------------------------------------------------- Gemini


def _gemini_grounding(s: SearchSummary, meta: Any, raw: bytes, strict: bool, where: str) -> None:
    need(isinstance(meta, dict), f"{where}: groundingMetadata must be an object")
    queries = meta.get("webSearchQueries", [])
    need(isinstance(queries, list) and all(isinstance(q, str) and q for q in queries), f"{where}: webSearchQueries")
    chunks = meta.get("groundingChunks", [])
    need(isinstance(chunks, list), f"{where}: groundingChunks must be a list")
    urls: list[str] = []
    for i, ch in enumerate(chunks):
        web = ch.get("web") if isinstance(ch, dict) else None
        need(isinstance(web, dict) and isinstance(web.get("uri"), str) and web["uri"], f"{where}: chunk {i}: web.uri")
        need(not strict or isinstance(web.get("title"), str), f"{where}: chunk {i}: web.title must be a string")
        urls.append(web["uri"])
    need(not strict or len(set(urls)) == len(urls), f"{where}: a source listed twice")
    for n, q in enumerate(queries):
        s.searches.append(Search(id=f"q{n}", query=q, urls=urls if n == 0 else []))
    sups = meta.get("groundingSupports", [])
    need(isinstance(sups, list), f"{where}: groundingSupports must be a list")
    for i, sup in enumerate(sups):
        w = f"{where}.groundingSupports[{i}]"
        need(isinstance(sup, dict) and isinstance(sup.get("segment"), dict), f"{w}: segment")
        seg = sup["segment"]
        need("partIndex" not in seg or not strict, f"{w}: partIndex (our answers index the joined text)")
        a, b = seg.get("startIndex", 0), seg.get("endIndex")
        need(type(a) is int and type(b) is int and 0 <= a < b <= len(raw), f"{w}: byte span {a}..{b} of {len(raw)}")
        span = raw[a:b]
        try:
            text = span.decode()
        except UnicodeDecodeError:
            raise AssertionError(f"{w}: byte span {a}..{b} cuts a UTF-8 character") from None
        need("text" not in seg or seg["text"] == text, f"{w}: segment.text {seg.get('text')!r} != bytes {text!r}")
        idx = sup.get("groundingChunkIndices")
        need(isinstance(idx, list) and idx, f"{w}: groundingChunkIndices must be a non-empty list")
        for k in idx:
            need(type(k) is int and 0 <= k < len(urls), f"{w}: chunk index {k!r} out of range")
            s.citations.append(Cite(urls[k], text))


def _gemini_text(parts: Any) -> str:
    return "".join(
        p["text"]
        for p in parts or ()
        if isinstance(p, dict) and isinstance(p.get("text"), str) and p.get("thought") is not True
    )


def gemini_stream(data: bytes, *, strict: bool = True) -> SearchSummary:
    """Gemini SSE events: the answer text accumulated, the grounding read on the event that carries it."""
    frames, _ = parse_sse(data, strict=strict)
    objs = [f.json() for f in frames]
    s = SearchSummary()
    text: list[str] = []
    seen = False
    for n, obj in enumerate(objs):
        obj = obj.get("response", obj) if "candidates" not in obj else obj
        cands = obj.get("candidates") or [{}]
        c = cands[0]
        text.append(_gemini_text((c.get("content") or {}).get("parts")))
        if "groundingMetadata" in c:
            need(not strict or n == len(objs) - 1, f"event #{n}: groundingMetadata before the last event")
            need(not seen, f"event #{n}: groundingMetadata twice")
            seen = True
            _gemini_grounding(s, c["groundingMetadata"], "".join(text).encode(), strict, f"event #{n}")
    s.text = "".join(text)
    return s


def gemini_body(body: bytes | str | dict, *, strict: bool = True) -> SearchSummary:
    obj = load_body(body)
    obj = obj.get("response", obj) if "candidates" not in obj else obj
    s = SearchSummary()
    c = (obj.get("candidates") or [{}])[0]
    s.text = _gemini_text((c.get("content") or {}).get("parts"))
    if "groundingMetadata" in c:
        _gemini_grounding(s, c["groundingMetadata"], s.text.encode(), strict, "candidate")
    return s
