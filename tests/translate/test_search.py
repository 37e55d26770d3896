"""Issue 33: hosted web search and citations across protocols, streamed and whole.

Every case takes a real provider recording with a web search (tests/corpus, see INDEX.tsv; shapes in
``validators.search``), translates it for a client of another protocol whose request offered a web search, and
checks, under every chunking:

* the output passes the client protocol's strict validator (its search and citation checks included);
* the client gets the upstream's searches (query and source urls) where its protocol has search calls, and
  every citation cites exactly the text the upstream cited, as the client received it (a span without a
  range, OpenRouter's 0..0, cites the whole answer);
* the official SDK (anthropic / openai) accumulates the same: search call, query, urls, citations.

Cases: Anthropic client <- Responses upstream; Responses client <- Anthropic upstream; Chat client <-
Anthropic and <- Responses upstreams; Anthropic client <- an OpenRouter-profile Chat upstream.
"""

from __future__ import annotations

import json
import time

import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import samples
from dragoman.protocols import Protocol
from dragoman.protocols import profiles
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.plan import Plan
from dragoman.translate.request import decode_client_request
from dragoman.translate.request import encode_upstream_request
from dragoman.translate.response import translate_response
from dragoman.translate.stream import StreamTranslator
from search_clients import SEARCH_REQUESTS
from search_clients import anthropic_sdk as _anthropic_sdk
from search_clients import chat_sdk as _chat_sdk
from search_clients import responses_sdk as _responses_sdk
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr
from validators.search import Cite

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES
NAMES = {A: "anthropic", C: "openai-chat", R: "openai-responses"}
STREAM_VALIDATORS = {A: va.validate_stream, C: vc.validate_stream, R: vr.validate_stream}
BODY_VALIDATORS = {A: va.validate_message, C: vc.validate_completion, R: vr.validate_response}


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)


def _search_samples(proto: Protocol, stream: bool) -> list:
    out = []
    for s in samples(NAMES[proto], stream=stream, ok=True):
        body = s.body.decode(errors="replace")
        if "web_search_call" in body or "web_search_tool_result" in body or "url_citation" in body:
            out.append(s)
    return out


PAIRS = [(A, R), (R, A), (C, A), (C, R), (A, C)]  # (client, upstream)


def _cases(stream: bool) -> list:
    out = []
    for client, upstream in PAIRS:
        for s in _search_samples(upstream, stream):
            out.append(pytest.param(client, upstream, s, id=f"{NAMES[client]}<-{s.name}"))
    return out


def _ctx(client: Protocol, upstream: Protocol, stream: bool) -> Context:
    """The exchange's context after the client's search request was encoded for the upstream (an
    OpenRouter-profile upstream for a Chat one: it searches with its server tool)."""
    body = dict(SEARCH_REQUESTS[client], stream=stream)
    cr = decode_client_request(json.dumps(body).encode(), client)
    ctx = Context(profile=profiles.get("openrouter") if upstream is C else profiles.GENERIC)
    out = json.loads(encode_upstream_request(cr, Plan(client, upstream), ctx, "m"))
    if upstream is R:
        assert out["tools"][0]["type"] == "web_search" and "web_search_call.action.sources" in out["include"]
    elif upstream is A:
        assert out["tools"][0]["type"] == "web_search_20250305"
    else:
        assert out["tools"][0]["type"] == "openrouter:web_search"
    assert ctx.search in ("native", "annotations")
    return ctx


def _upstream_summary(upstream: Protocol, s) -> object:
    if s.stream:
        return STREAM_VALIDATORS[upstream](s.body, strict=False).search
    return BODY_VALIDATORS[upstream](s.body, strict=False).search


def _expected_cites(up, upstream: Protocol) -> set[Cite]:
    """What the upstream cites; a Chat citation without a span (OpenRouter's 0..0) cites the whole answer."""
    if upstream is C:
        return {Cite(c.url, c.text or up.text) for c in up.citations}
    return set(up.citations)


def _check(client: Protocol, upstream: Protocol, got, up) -> None:
    assert got.text == up.text
    assert set(got.citations) == _expected_cites(up, upstream)
    if client is C:
        assert not got.searches  # Chat has no search call: the sources arrive as annotations
    else:
        assert [(x.query, x.urls) for x in got.searches] == [(x.query, x.urls) for x in up.searches]
    if client is A and up.searches:
        assert got.web_search_requests == (up.web_search_requests or len(up.searches))


# ---------------------------------------------------------------- streamed


@pytest.mark.parametrize("client,upstream,sample", _cases(stream=True))
def test_streamed_search_and_citations(client, upstream, sample):
    outputs = {}
    for label, pieces in chunkings(sample.body, seeds=3):
        ctx = _ctx(client, upstream, True)
        tr = StreamTranslator(get_codec(upstream).stream_decoder(ctx), get_codec(client).stream_encoder(ctx))
        outputs[label] = run_stream(tr, pieces)
        assert tr.error_info is None, tr.error_info
    whole = outputs["whole"]
    for label, out in outputs.items():
        assert out == whole, f"chunking {label!r} changes the output"
    summary = STREAM_VALIDATORS[client](whole)
    _check(client, upstream, summary.search, _upstream_summary(upstream, sample))
    _check_sdk(client, whole, summary.search, stream=True)


# ---------------------------------------------------------------- whole


@pytest.mark.parametrize("client,upstream,sample", _cases(stream=False))
def test_whole_search_and_citations(client, upstream, sample):
    ctx = _ctx(client, upstream, False)
    out = translate_response(sample.body, Plan(client, upstream), ctx)
    summary = BODY_VALIDATORS[client](out)
    _check(client, upstream, summary.search, _upstream_summary(upstream, sample))
    _check_sdk(client, out, summary.search, stream=False)


def test_cases_cover_every_pair_streamed_and_whole():
    """Not vacuous: every pair has streamed and whole cases, and each upstream's recordings have citations
    and (for the APIs with search calls) searches with a query and sources."""
    streamed = {(p.values[0], p.values[1]) for p in _cases(True)}
    whole = {(p.values[0], p.values[1]) for p in _cases(False)}
    assert streamed == whole == set(PAIRS)
    for upstream in (A, R, C):
        for stream in (True, False):
            ups = [_upstream_summary(upstream, s) for s in _search_samples(upstream, stream)]
            assert any(u.citations for u in ups), (upstream, stream)
            if upstream is not C:
                assert any(x.query for u in ups for x in u.searches), (upstream, stream)
            if upstream is A or (
                stream and upstream is R
            ):  # the whole Responses recordings' sources are APIs (weather), not urls
                assert any(x.urls for u in ups for x in u.searches), (upstream, stream)


# ---------------------------------------------------------------- the official SDKs


def _check_sdk(client: Protocol, data: bytes, want, *, stream: bool) -> None:
    """The official SDK's accumulated result has the same searches and citations as the validator saw."""
    if client is A:
        msg = _anthropic_sdk(data, stream)
        searches, cites = [], set()
        for b in msg.content:
            if b.type == "server_tool_use":
                searches.append([b.input["query"], []])
            elif b.type == "web_search_tool_result":
                assert not isinstance(b.content, list) or searches, "a result without its call"
                if isinstance(b.content, list):
                    searches[-1][1] = [r.url for r in b.content]
            elif b.type == "text":
                cites |= {Cite(c.url, b.text) for c in b.citations or []}
        assert [(q, u) for q, u in searches] == [(x.query, x.urls) for x in want.searches]
        assert cites == set(want.citations)
    elif client is R:
        resp = _responses_sdk(data, stream)
        searches, cites = [], set()
        for item in resp.output:
            if item.type == "web_search_call":
                searches.append((item.action.query, [s.url for s in item.action.sources or []]))
            elif item.type == "message":
                for p in item.content:
                    cites |= {Cite(a.url, p.text[a.start_index : a.end_index]) for a in p.annotations}
        assert searches == [(x.query, x.urls) for x in want.searches]
        assert cites == set(want.citations)
    else:
        msg = _chat_sdk(data, stream)
        text = msg.content or ""
        cites = {
            Cite(a.url_citation.url, text[a.url_citation.start_index : a.url_citation.end_index])
            for a in msg.annotations or []
        }
        assert cites == set(want.citations)
