"""Issue 32 follow-up: Google Search grounding (``googleSearch`` + ``groundingMetadata``) through the IR's search
and citation events, both ways, streamed (every chunking) and whole.

Shapes: Gemini API reference ``GroundingMetadata`` / ``GroundingSupport`` / ``Segment`` (ai.google.dev/api/
generate-content) and the "Grounding with Google Search" guide (ai.google.dev/gemini-api/docs/google-search),
read 2026-11; segment offsets are UTF-8 bytes ("measured in bytes", the reference). The corpus has no Gemini
recording with grounding, so the Gemini upstream answers below are written from those docs, with non-ASCII text
so a character/byte mix-up shows. The other upstreams are the real search recordings of test_search.

* Gemini client <- Anthropic / Responses / OpenRouter-Chat recordings: ``groundingMetadata`` with the upstream's
  queries, every source as a chunk, each citation a support whose byte span holds exactly the cited text.
* Anthropic / Responses / Chat clients <- a Gemini upstream: a search call per query (sources on the first) and
  every support a citation of exactly its segment's text.
* Requests: ``googleSearch`` -> each protocol's search tool; any client's search -> ``{"googleSearch": {}}``;
  an upstream that cannot search -> no grounding for the Gemini client, listed.
"""

from __future__ import annotations

import json

import pytest

from conftest import chunkings
from conftest import run_stream
from dragoman.protocols import Protocol
from dragoman.protocols import profiles
from dragoman.protocols.base import Context
from dragoman.protocols.gemini import search as gsearch
from dragoman.protocols.registry import get_codec
from dragoman.translate.plan import Plan
from dragoman.translate.request import decode_client_request
from dragoman.translate.request import encode_upstream_request
from dragoman.translate.response import translate_response
from dragoman.translate.stream import StreamTranslator
from search_clients import SEARCH_REQUESTS
from translate.test_search import BODY_VALIDATORS
from translate.test_search import STREAM_VALIDATORS
from translate.test_search import _check_sdk
from translate.test_search import _expected_cites
from translate.test_search import _search_samples
from translate.test_search import _upstream_summary
from translate.test_search import frozen_clock  # noqa: F401  (autouse fixture)
from validators import gemini as vg
from validators import search as vs
from validators.search import Cite

A, C, R, G = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES, Protocol.GEMINI
GEMINI_REQUEST = {
    "contents": [{"role": "user", "parts": [{"text": "Wer hat die EM 2024 gewonnen?"}]}],
    "tools": [{"googleSearch": {}}],
}
PATH = "/v1beta/models/gemini-2.5-flash:generateContent"
SPATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"

# ---------------------------------------------------------------- a Gemini upstream's grounded answer

TEXT1 = "Spanien gewann die EM 2024 – im Finale in Berlin schlug es England 2:1. "
TEXT2 = "Das Siegtor schoss Mikel Oyarzabal (86.); Torschützenkönig wurden sechs Spieler 🏆."
SOURCES = [("https://www.uefa.com/euro2024/", "uefa.com"), ("https://de.wikipedia.org/wiki/EM_2024", "wikipedia.org")]


def _span(full: str, piece: str) -> tuple[int, int]:
    a = full.encode().index(piece.encode())
    return a, a + len(piece.encode())


def grounding() -> dict:
    full = TEXT1 + TEXT2
    sups = []
    for piece, idx in (
        ("Spanien gewann die EM 2024 – im Finale in Berlin schlug es England 2:1.", [0, 1]),
        ("Das Siegtor schoss Mikel Oyarzabal (86.)", [1]),
        ("Torschützenkönig wurden sechs Spieler 🏆", [0]),
    ):
        a, b = _span(full, piece)
        sups.append({"segment": {"startIndex": a, "endIndex": b, "text": piece}, "groundingChunkIndices": idx})
    return {
        "webSearchQueries": ["EM 2024 Sieger", "EM 2024 Finale Torschütze"],
        "searchEntryPoint": {"renderedContent": "<style>...</style><div>...</div>"},
        "groundingChunks": [{"web": {"uri": u, "title": t}} for u, t in SOURCES],
        "groundingSupports": sups,
    }


def gemini_events() -> list[dict]:
    usage = {"promptTokenCount": 9, "candidatesTokenCount": 40, "totalTokenCount": 49}
    head = {"modelVersion": "gemini-2.5-flash", "responseId": "r-1"}
    return [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": TEXT1}]}, "index": 0}], **head},
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": TEXT2}]},
                    "finishReason": "STOP",
                    "groundingMetadata": grounding(),
                    "index": 0,
                }
            ],
            "usageMetadata": usage,
            **head,
        },
    ]


def gemini_sse() -> bytes:
    return b"".join(b"data: " + json.dumps(e, ensure_ascii=False).encode() + b"\r\n\r\n" for e in gemini_events())


def gemini_body() -> dict:
    ev = gemini_events()
    cand = dict(ev[1]["candidates"][0], content={"role": "model", "parts": [{"text": TEXT1}, {"text": TEXT2}]})
    return {**ev[1], "candidates": [cand]}


UPSTREAM = vs.gemini_body(gemini_body())


def _ctx(client: Protocol, upstream: Protocol, stream: bool, profile: str = "generic") -> Context:
    if client is G:
        cr = decode_client_request(json.dumps(GEMINI_REQUEST).encode(), G, path=SPATH if stream else PATH)
    else:
        cr = decode_client_request(json.dumps(dict(SEARCH_REQUESTS[client], stream=stream)).encode(), client)
    ctx = Context(profile=profiles.get(profile))
    encode_upstream_request(cr, Plan(client, upstream), ctx, "m")
    return ctx


def _stream(client: Protocol, upstream: Protocol, data: bytes, profile: str = "generic") -> bytes:
    outputs = {}
    for label, pieces in chunkings(data, seeds=2):
        ctx = _ctx(client, upstream, True, profile)
        tr = StreamTranslator(get_codec(upstream).stream_decoder(ctx), get_codec(client).stream_encoder(ctx))
        outputs[label] = run_stream(tr, pieces)
        assert tr.error_info is None, tr.error_info
    for label, out in outputs.items():
        assert out == outputs["whole"], f"chunking {label!r} changes the output"
    return outputs["whole"]


# ---------------------------------------------------------------- Gemini upstream -> other clients


def _check_from_gemini(got: vs.SearchSummary) -> None:
    assert got.text == UPSTREAM.text == TEXT1 + TEXT2
    assert set(got.citations) == set(UPSTREAM.citations) and len(UPSTREAM.citations) == 4
    assert {c.text for c in got.citations} == {
        "Spanien gewann die EM 2024 – im Finale in Berlin schlug es England 2:1.",
        "Das Siegtor schoss Mikel Oyarzabal (86.)",
        "Torschützenkönig wurden sechs Spieler 🏆",
    }


@pytest.mark.parametrize("client", [A, R, C])
def test_gemini_upstream_streamed(client):
    out = _stream(client, G, gemini_sse(), "openrouter" if client is C else "generic")
    got = STREAM_VALIDATORS[client](out).search
    _check_from_gemini(got)
    _check_sdk(client, out, got, stream=True)
    if client is not C:  # Chat has no search call
        assert [(x.query, x.urls) for x in got.searches] == [(x.query, x.urls) for x in UPSTREAM.searches]


@pytest.mark.parametrize("client", [A, R, C])
def test_gemini_upstream_whole(client):
    ctx = _ctx(client, G, False)
    out = translate_response(json.dumps(gemini_body()).encode(), Plan(client, G), ctx)
    got = BODY_VALIDATORS[client](out).search
    _check_from_gemini(got)
    _check_sdk(client, out, got, stream=False)
    if client is not C:
        assert [(x.query, x.urls) for x in got.searches] == [(x.query, x.urls) for x in UPSTREAM.searches]
    assert "groundingMetadata.searchEntryPoint" in ctx.dropped.fields


# ---------------------------------------------------------------- other upstreams -> a Gemini client


def _gemini_cases(stream: bool) -> list:
    return [pytest.param(up, s, id=s.name) for up in (A, R, C) for s in _search_samples(up, stream)]


def _check_to_gemini(got: vs.SearchSummary, up, upstream: Protocol) -> None:
    assert got.text == up.text
    assert set(got.citations) == _expected_cites(up, upstream)
    want = [x.query for x in up.searches if x.query]
    assert [x.query for x in got.searches] == want
    urls = set(got.searches[0].urls) if got.searches else set()
    assert {u for x in up.searches for u in x.urls} <= urls
    assert {c.url for c in up.citations} <= urls | {c.url for c in got.citations}


def _genai_sdk(objs: list[dict], want: vs.SearchSummary) -> None:
    """The google-genai SDK's own models read the grounding: the same queries, sources and cited bytes."""
    types = pytest.importorskip("google.genai.types")  # the Python 3.11 venv has no google-genai

    resps = [types.GenerateContentResponse.model_validate(o) for o in objs]
    text = "".join(r.text or "" for r in resps).encode()
    metas = [c.grounding_metadata for r in resps for c in r.candidates or () if c.grounding_metadata]
    if not want.searches and not want.citations:
        assert not metas
        return
    (meta,) = metas
    assert (meta.web_search_queries or []) == [x.query for x in want.searches]
    urls = [ch.web.uri for ch in meta.grounding_chunks or ()]
    cites = {
        Cite(urls[i], text[sup.segment.start_index or 0 : sup.segment.end_index].decode())
        for sup in meta.grounding_supports or ()
        for i in sup.grounding_chunk_indices or ()
    }
    assert cites == set(want.citations)


def _sse_objs(data: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("upstream,sample", _gemini_cases(True))
def test_gemini_client_streamed(upstream, sample):
    out = _stream(G, upstream, sample.body, "openrouter" if upstream is C else "generic")
    vg.validate_stream(out)
    got = vs.gemini_stream(out)
    _check_to_gemini(got, _upstream_summary(upstream, sample), upstream)
    _genai_sdk(_sse_objs(out), got)


@pytest.mark.parametrize("upstream,sample", _gemini_cases(False))
def test_gemini_client_whole(upstream, sample):
    ctx = _ctx(G, upstream, False, "openrouter" if upstream is C else "generic")
    out = translate_response(sample.body, Plan(G, upstream), ctx)
    vg.validate_response(out)
    got = vs.gemini_body(out)
    _check_to_gemini(got, _upstream_summary(upstream, sample), upstream)
    _genai_sdk([json.loads(out)], got)


def test_gemini_cases_are_not_vacuous():
    for stream in (True, False):
        ups = {p.values[0] for p in _gemini_cases(stream)}
        assert ups == {A, R, C}, stream


def test_gemini_roundtrip_keeps_byte_spans():
    """Gemini upstream -> IR -> Gemini client (a different profile would do this): the same grounding."""
    out = _stream(G, G, gemini_sse())  # same protocol both sides is untouched by the proxy; the codecs here
    got = vs.gemini_stream(out)
    assert got.text == UPSTREAM.text and set(got.citations) == set(UPSTREAM.citations)
    assert [(x.query, x.urls) for x in got.searches] == [(x.query, x.urls) for x in UPSTREAM.searches]


# ---------------------------------------------------------------- requests and "search unavailable"


@pytest.mark.parametrize(
    "upstream,profile,tool",
    [(A, "generic", "web_search_20250305"), (R, "generic", "web_search"), (C, "openrouter", "openrouter:web_search")],
)
def test_google_search_tool_to_other_upstreams(upstream, profile, tool):
    cr = decode_client_request(json.dumps(GEMINI_REQUEST).encode(), G, path=PATH)
    assert cr.request.web_search is not None and not cr.request.tools
    ctx = Context(profile=profiles.get(profile))
    body = json.loads(encode_upstream_request(cr, Plan(G, upstream), ctx, "m"))
    assert [t["type"] for t in body["tools"]] == [tool]
    assert ctx.search in ("native", "annotations")


@pytest.mark.parametrize("client", [A, R, C])
def test_other_clients_search_to_gemini(client):
    cr = decode_client_request(json.dumps(SEARCH_REQUESTS[client]).encode(), client)
    ctx = Context()
    body = json.loads(encode_upstream_request(cr, Plan(client, G), ctx, "m"))
    assert body["tools"] == [{"googleSearch": {}}]
    assert ctx.search == "grounding"
    if client is A:  # Gemini's tool has no domains, location or use limit: listed
        assert {"web_search.allowed_domains", "web_search.max_uses", "web_search.user_location"} <= set(
            ctx.dropped.fields
        )


def test_gemini_client_on_upstream_that_cannot_search():
    """A Chat upstream without search: the request goes without it and the Gemini client gets no grounding
    (Gemini has no failed-search shape), listed as web_search(unavailable)."""
    sse = (
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
        b'"delta":{"role":"assistant","content":"Ich kann nicht suchen."},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
        b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    cr = decode_client_request(json.dumps(GEMINI_REQUEST).encode(), G, path=SPATH)
    ctx = Context(profile=profiles.GENERIC)
    body = json.loads(encode_upstream_request(cr, Plan(G, C), ctx, "m"))
    assert "tools" not in body and "web_search_options" not in body and ctx.search == "unavailable"
    tr = StreamTranslator(get_codec(C).stream_decoder(ctx), get_codec(G).stream_encoder(ctx))
    out = run_stream(tr, [sse])
    vg.validate_stream(out)
    assert b"groundingMetadata" not in out and vs.gemini_stream(out).text == "Ich kann nicht suchen."
    assert "web_search(unavailable)" in ctx.dropped.fields


def test_search_history_to_gemini_as_text():
    """An earlier turn's search and citations (from an Anthropic upstream) go to Gemini as text, listed."""
    msgs = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "EM 2024"}},
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_1",
                    "content": [
                        {"type": "web_search_result", "url": SOURCES[0][0], "title": "UEFA", "encrypted_content": "x"}
                    ],
                },
                {
                    "type": "text",
                    "text": "Spanien.",
                    "citations": [
                        {
                            "type": "web_search_result_location",
                            "url": SOURCES[0][0],
                            "title": "UEFA",
                            "cited_text": "Spanien",
                            "encrypted_index": "y",
                        }
                    ],
                },
            ],
        },
        {"role": "user", "content": "danke"},
    ]
    cr = decode_client_request(json.dumps({"model": "m", "max_tokens": 9, "messages": msgs}).encode(), A)
    ctx = Context()
    body = json.loads(encode_upstream_request(cr, Plan(A, G), ctx, "m"))
    texts = [p.get("text") for p in body["contents"][1]["parts"]]
    assert texts == [f"[web search: EM 2024]\n- UEFA <{SOURCES[0][0]}>", "Spanien."]
    assert {"messages[1].web_search_call(as_text)", "messages[1].citations"} <= set(ctx.dropped.fields)


# ---------------------------------------------------------------- byte offsets


@pytest.mark.parametrize("text", ["abc", "Zürich", "東京タワー", "a🏆b", ""])
def test_byte_char_offsets_are_exact(text):
    for c in range(len(text) + 1):
        b = gsearch.char_to_byte(text, c)
        assert b == len(text[:c].encode())
        assert gsearch.byte_to_char(text, b) == c
    assert gsearch.byte_to_char("a🏆b", 2) == 1  # inside a character: that character's start
    assert Cite("u", "x") == Cite("u", "x")


def test_grounding_validator_rejects_character_offsets():
    """The strict check can fail: the same supports with character (not byte) offsets, or a wrong chunk index."""
    body = gemini_body()
    full = TEXT1 + TEXT2
    sup = body["candidates"][0]["groundingMetadata"]["groundingSupports"][2]
    piece = sup["segment"]["text"]
    a = full.index(piece)
    sup["segment"].update(startIndex=a, endIndex=a + len(piece))  # characters: wrong for non-ASCII text
    with pytest.raises(AssertionError):
        vs.gemini_body(body)
    body = gemini_body()
    body["candidates"][0]["groundingMetadata"]["groundingSupports"][0]["groundingChunkIndices"] = [2]
    with pytest.raises(AssertionError, match="out of range"):
        vs.gemini_body(body)
