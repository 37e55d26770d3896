"""Issue 33: an upstream that cannot search answers with the client's own "search unavailable" result (never a
silent success), and the next turn of a session with search history is re-encoded so that every upstream
accepts it (search blocks only back to Anthropic; elsewhere plain text context, citations dropped and named).

History bodies are real second-turn requests (tests/corpus): Anthropic
``pydantic-ai__json-web-search-citations.yaml#1`` (server_tool_use, web_search_tool_result, cited text blocks)
and Responses ``pydantic-ai__json-web-search.yaml#1`` (a web_search_call item).
"""

from __future__ import annotations

import json
import time

import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import samples
from dragoman.ir.search import WebSearchPart
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
from search_clients import responses_sdk as _responses_sdk
from validators import anthropic as va
from validators import responses as vr

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES
QUESTION = "What happened in tech news today?"


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)


def _sample(name: str):
    proto = {"anthropic": "anthropic", "chat": "openai-chat", "responses": "openai-responses"}[name.split("/")[0]]
    return next(s for s in samples(proto, stream=".sse" in name or "stream" in name, ok=True) if s.name == name)


def _encode(client: Protocol, body: dict, upstream: Protocol, profile=profiles.GENERIC, model="m"):
    cr = decode_client_request(json.dumps(body).encode(), client)
    ctx = Context(profile=profile)
    out = json.loads(encode_upstream_request(cr, Plan(client, upstream), ctx, model))
    return out, ctx


# ---------------------------------------------------------------- an upstream that cannot search


@pytest.mark.parametrize(
    "profile,model,searches",
    [
        ("generic", "m", False),
        ("deepseek", "deepseek-chat", False),
        ("openai", "gpt-4.1", False),
        ("openai", "gpt-4o-search-preview", True),
        ("openrouter", "anthropic/claude-sonnet-4", True),
    ],
)
def test_which_chat_upstreams_search(profile, model, searches):
    out, ctx = _encode(A, SEARCH_REQUESTS[A], C, profiles.get(profile), model)
    assert ctx.search == ("annotations" if searches else "unavailable")
    if not searches:
        assert "web_search_options" not in out and "tools" not in out
        assert "web_search(unavailable)" in ctx.dropped.fields
    elif profile == "openai":  # OpenAI's search models: web_search_options (no domains, no max_uses there)
        assert out["web_search_options"] == {
            "user_location": {"type": "approximate", "approximate": {"city": "Paris", "country": "FR"}}
        }
        assert {"web_search.allowed_domains", "web_search.max_uses"} <= set(ctx.dropped.fields)
    else:  # OpenRouter's server tool carries them all
        assert out["tools"] == [
            {
                "type": "openrouter:web_search",
                "parameters": {
                    "max_uses": 5,
                    "allowed_domains": ["example.com"],
                    "user_location": {"type": "approximate", "city": "Paris", "country": "FR"},
                },
            }
        ]


def test_request_settings_map_to_responses_and_back():
    out, ctx = _encode(A, SEARCH_REQUESTS[A], R)
    assert out["tools"] == [
        {
            "type": "web_search",
            "filters": {"allowed_domains": ["example.com"]},
            "user_location": {"type": "approximate", "city": "Paris", "country": "FR"},
        }
    ]
    assert "web_search.max_uses" in ctx.dropped.fields
    back, _ = _encode(R, SEARCH_REQUESTS[R], A)
    assert back["tools"] == [
        {"type": "web_search_20250305", "name": "web_search", "user_location": {"type": "approximate", "country": "FR"}}
    ]
    chat, cctx = _encode(C, SEARCH_REQUESTS[C], R)
    assert chat["tools"] == [{"type": "web_search", "search_context_size": "medium"}]
    chat_a, cactx = _encode(C, SEARCH_REQUESTS[C], A)
    assert chat_a["tools"] == [{"type": "web_search_20250305", "name": "web_search"}]
    assert "web_search.search_context_size" in cactx.dropped.fields


#: Claude Code's WebSearch sub-request (seen from the real Claude Code 2.1.197, tests/clients/test_web_search.py):
#: only the server tool, forced by tool_choice
CLAUDE_CODE_SEARCH = {
    "model": "m",
    "max_tokens": 64000,
    "stream": True,
    "system": [{"type": "text", "text": "You are an assistant for performing a web search tool use"}],
    "messages": [{"role": "user", "content": "Perform a web search for the query: dragoman"}],
    "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 8}],
    "tool_choice": {"type": "tool", "name": "web_search"},
}


def test_a_forced_web_search_is_required_on_responses():
    """Responses has no tool_choice naming its hosted web_search: a function choice would be a 400."""
    out, ctx = _encode(A, CLAUDE_CODE_SEARCH, R)
    assert out["tools"] == [{"type": "web_search"}]
    assert out["tool_choice"] == "required"
    assert "tool_choice.web_search" not in ctx.dropped.fields  # the only tool: forcing a tool forces the search
    bash = {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}
    both, bctx = _encode(A, {**CLAUDE_CODE_SEARCH, "tools": [bash, *CLAUDE_CODE_SEARCH["tools"]]}, R)
    assert both["tool_choice"] == "required" and "tool_choice.web_search" in bctx.dropped.fields
    forced_bash, _ = _encode(
        A, {**CLAUDE_CODE_SEARCH, "tools": [bash], "tool_choice": {"type": "tool", "name": "Bash"}}, R
    )
    assert forced_bash["tool_choice"] == {"type": "function", "name": "Bash"}
    # a Chat upstream that cannot search gets neither the tool nor a choice naming it
    chat, cctx = _encode(A, CLAUDE_CODE_SEARCH, C)
    assert "tools" not in chat and "tool_choice" not in chat
    assert "web_search(unavailable)" in cctx.dropped.fields


PLAIN_CHAT_STREAM = "chat/pydantic-ai__stream-plain-text-with-request.yaml#0"
PLAIN_CHAT_BODY = "chat/pydantic-ai__json-tool-call-roundtrip.yaml#1"


@pytest.mark.parametrize("client", [A, R])
def test_unavailable_search_streamed(client):
    sample = _sample(PLAIN_CHAT_STREAM)
    outputs = set()
    for _, pieces in chunkings(sample.body, seeds=2):
        body = dict(SEARCH_REQUESTS[client], stream=True)
        cr = decode_client_request(json.dumps(body).encode(), client)
        ctx = Context()
        encode_upstream_request(cr, Plan(client, C), ctx, "m")
        tr = StreamTranslator(get_codec(C).stream_decoder(ctx), get_codec(client).stream_encoder(ctx))
        outputs.add(run_stream(tr, pieces))
        assert tr.error_info is None
    assert len(outputs) == 1
    out = outputs.pop()
    if client is A:
        s = va.validate_stream(out).search
        msg = _anthropic_sdk(out, True)
        assert [b.type for b in msg.content[:2]] == ["server_tool_use", "web_search_tool_result"]
        assert msg.content[1].content.error_code == "unavailable"
        assert msg.content[0].input == {"query": QUESTION}
    else:
        s = vr.validate_stream(out).search
        resp = _responses_sdk(out, True)
        assert resp.output[0].type == "web_search_call" and resp.output[0].status == "failed"
    assert [(x.query, x.error) for x in s.searches] == [(QUESTION, "unavailable")]
    assert s.text  # the model's answer follows the failed search


@pytest.mark.parametrize("client", [A, R])
def test_unavailable_search_whole(client):
    sample = _sample(PLAIN_CHAT_BODY)
    body = SEARCH_REQUESTS[client]
    cr = decode_client_request(json.dumps(body).encode(), client)
    ctx = Context()
    encode_upstream_request(cr, Plan(client, C), ctx, "m")
    out = translate_response(sample.body, Plan(client, C), ctx)
    if client is A:
        s = va.validate_message(out).search
        assert _anthropic_sdk(out, False).content[1].content.error_code == "unavailable"
    else:
        s = vr.validate_response(out).search
        assert _responses_sdk(out, False).output[0].status == "failed"
    assert [(x.query, x.error) for x in s.searches] == [(QUESTION, "unavailable")]


# ---------------------------------------------------------------- history


ANTHROPIC_HISTORY = "anthropic/pydantic-ai__json-web-search-citations.yaml#1"
RESPONSES_HISTORY = "responses/pydantic-ai__json-web-search.yaml#1"


def _history(name: str) -> tuple[Protocol, dict]:
    """The real second-turn request; for Anthropic its assistant turn is the real first reply as the API sent
    it (its text blocks cite: Claude Code sends them back like that; pydantic-ai had stripped them)."""
    s = _sample(name)
    body = dict(s.request)
    if name.startswith("anthropic"):
        first = json.loads(_sample(name.replace("#1", "#0")).body)
        assert any(b.get("citations") for b in first["content"])
        body["messages"] = [
            body["messages"][0],
            {"role": "assistant", "content": first["content"]},
            body["messages"][2],
        ]
    return (A if name.startswith("anthropic") else R), body


def _sources(body: dict) -> list[str]:
    urls = []
    for m in body["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b["type"] == "web_search_tool_result":
                urls.extend(r["url"] for r in b["content"])
    return urls


def test_anthropic_history_to_responses_is_text_context():
    client, body = _history(ANTHROPIC_HISTORY)
    out, ctx = _encode(client, body, R)
    assert {i.get("type") for i in out["input"]} <= {"message", "reasoning"}
    text = json.dumps(out["input"])
    assert "web_search_call" not in text and "server_tool_use" not in text and "encrypted_index" not in text
    assert all(p.get("annotations", []) == [] for i in out["input"] for p in i.get("content") or [])
    context = [p["text"] for i in out["input"] for p in i.get("content") or [] if "[web search:" in p.get("text", "")]
    assert len(context) == 1 and all(u in context[0] for u in _sources(body))
    assert {"messages[1].web_search_call(as_text)", "messages[1].citations"} <= set(ctx.dropped.fields)


def test_anthropic_history_to_chat_is_text_context():
    client, body = _history(ANTHROPIC_HISTORY)
    out, ctx = _encode(client, body, C, profiles.get("openrouter"))
    assert all(set(m) <= {"role", "content", "reasoning_content", "reasoning_details"} for m in out["messages"])
    assert all(isinstance(m["content"], (str, list)) for m in out["messages"])
    assistant = next(m for m in out["messages"] if m["role"] == "assistant")
    assert "[web search:" in assistant["content"] and all(u in assistant["content"] for u in _sources(body))
    assert {"messages[1].web_search_call(as_text)", "messages[1].citations"} <= set(ctx.dropped.fields)


def test_anthropic_history_back_to_anthropic_keeps_search_blocks():
    """A route that translates (here: the Anthropic codec re-encoding its own decoded history) sends the search
    blocks and their citations back as Anthropic made them (encrypted content and index included)."""
    client, body = _history(ANTHROPIC_HISTORY)
    req = get_codec(A).decode_request(body)
    assert any(type(p) is WebSearchPart for m in req.messages for p in m.parts)
    out = get_codec(A).encode_request(req, Context(request=req))
    want = [b for b in body["messages"][1]["content"] if b["type"] != "thinking"]
    got = [b for b in out["messages"][1]["content"] if b["type"] != "thinking"]
    assert got == [{k: v for k, v in b.items() if v is not None} | _keep_none(b) for b in want]


def _keep_none(b: dict) -> dict:
    """Fields the recording sends as null (page_age) and the encoder keeps."""
    if b["type"] != "web_search_tool_result":
        return {}
    return {"content": b["content"]}


def test_responses_history_to_anthropic_and_chat_is_text_context():
    client, body = _history(RESPONSES_HISTORY)
    out, ctx = _encode(client, body, A)
    blocks = [b for m in out["messages"] for b in m["content"] if isinstance(m["content"], list)]
    assert not [b for b in blocks if b["type"] in ("server_tool_use", "web_search_tool_result")]
    assert any("[web search: weather: San Francisco, CA]" in b.get("text", "") for b in blocks)
    assert "input[1].web_search_call(as_text)" in ctx.dropped.fields
    chat, _ = _encode(client, body, C)
    assert any("[web search: weather: San Francisco, CA]" in (m["content"] or "") for m in chat["messages"])


def test_a_search_dragoman_made_for_a_responses_client_goes_back_as_text():
    """A web_search_call Dragoman made from an Anthropic search (its ``ws_srvtoolu...`` id is not the Responses
    API's): toward a Responses upstream it is text context, never an item the API would not know."""
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": QUESTION},
            {
                "type": "web_search_call",
                "id": "ws_srvtoolu_01abc",
                "status": "completed",
                "action": {
                    "type": "search",
                    "query": "tech news",
                    "sources": [{"type": "url", "url": "https://x.test/"}],
                },
            },
            {"role": "user", "content": "more"},
        ],
    }
    req = get_codec(R).decode_request(body)
    out = get_codec(R).encode_request(req, Context(request=req))
    assert "web_search_call" not in [i.get("type") for i in out["input"]]
    assert "https://x.test/" in json.dumps(out["input"])
    native = dict(body, input=[dict(body["input"][1], id="ws_0123")])
    req = get_codec(R).decode_request(native)
    out = get_codec(R).encode_request(req, Context(request=req))
    assert out["input"][0]["type"] == "web_search_call" and out["input"][0]["id"] == "ws_0123"
