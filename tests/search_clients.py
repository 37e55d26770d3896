"""Shared by the search tests (tests/translate/test_search*.py): a client request offering a web search per
protocol, and the official SDKs (anthropic, openai) accumulating a translated reply, whole or streamed."""

from __future__ import annotations

import pytest

from dragoman.protocols import Protocol

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES

#: a client request offering a web search, per client protocol (each protocol's documented tool shape)
SEARCH_REQUESTS: dict[Protocol, dict] = {
    A: {
        "model": "m",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "What happened in tech news today?"}],
        "tools": [
            {
                "type": "web_search_20250305",
                "name": "web_search",
                "max_uses": 5,
                "allowed_domains": ["example.com"],
                "user_location": {"type": "approximate", "city": "Paris", "country": "FR"},
            }
        ],
    },
    R: {
        "model": "m",
        "input": "What happened in tech news today?",
        "tools": [{"type": "web_search", "user_location": {"type": "approximate", "country": "FR"}}],
    },
    C: {
        "model": "m",
        "messages": [{"role": "user", "content": "What happened in tech news today?"}],
        "web_search_options": {"search_context_size": "medium"},
    },
}


def _mock_client(sdk, httpx, data: bytes, stream: bool):
    ctype = "text/event-stream" if stream else "application/json"

    def handler(request):
        return httpx.Response(200, headers={"content-type": ctype}, content=data)

    return sdk, httpx.Client(transport=httpx.MockTransport(handler))


def _httpx():
    try:
        import httpx2 as httpx
    except ImportError:
        httpx = pytest.importorskip("httpx")
    return httpx


def anthropic_sdk(data: bytes, stream: bool):
    anthropic = pytest.importorskip("anthropic")
    _, http = _mock_client(anthropic, _httpx(), data, stream)
    client = anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9", max_retries=0, http_client=http)
    args = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    if not stream:
        return client.messages.create(**args)
    with client.messages.stream(**args) as s:
        return s.get_final_message()


def responses_sdk(data: bytes, stream: bool):
    openai = pytest.importorskip("openai")
    _, http = _mock_client(openai, _httpx(), data, stream)
    client = openai.OpenAI(api_key="sk-test", base_url="http://test.invalid/v1", http_client=http, max_retries=0)
    if not stream:
        return client.responses.create(model="m", input="hi")
    with client.responses.stream(model="m", input="hi") as s:
        last = None
        for ev in s:  # the SDK's parsed events; the terminal one holds the response (also when incomplete)
            if ev.type in ("response.completed", "response.incomplete"):
                last = ev.response
        assert last is not None
        return last


def chat_sdk(data: bytes, stream: bool):
    openai = pytest.importorskip("openai")
    if not stream:
        return openai.types.chat.ChatCompletion.model_validate_json(data).choices[0].message
    streaming = pytest.importorskip("openai.lib.streaming.chat")
    state = streaming.ChatCompletionStreamState()
    for frame in data.split(b"\n\n"):
        if frame.startswith(b"data: ") and frame[6:] != b"[DONE]":
            state.handle_chunk(openai.types.chat.ChatCompletionChunk.model_validate_json(frame[6:]))
    # the accumulated snapshot (get_final_completion raises on a content_filter finish, as after a refusal)
    return state.current_completion_snapshot.choices[0].message
