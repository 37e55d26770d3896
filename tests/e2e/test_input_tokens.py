"""Input tokens in ``message_start`` (issue 11 item 6), through a real mitmdump: an Anthropic client streaming
from an upstream that reports usage only at the end (Chat, Responses) sees the local estimate of its prompt
in ``message_start`` (the figure count_tokens gives) and the upstream's real figures in ``message_delta``."""

from __future__ import annotations

import json
import urllib.request

import pytest

from dragoman import demo as fu
from dragoman.sse import SSEDecoder
from dragoman.translate.tokens import estimate_input_tokens

pytestmark = pytest.mark.e2e

#: a long prompt (~6,000 words), as a coding agent's context would be
PROMPT = " ".join(f"line {i}: the quick brown fox jumps over the lazy dog." for i in range(600))


def stream_events(port: int, body: dict) -> list[dict]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/messages",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "content-type": "application/json",
            "x-api-key": "sk-test",
            "anthropic-version": "2023-06-01",
            "x-fake-scenario": "text",
        },
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=30) as resp:
        assert resp.status == 200 and resp.headers["content-type"].startswith("text/event-stream")
        raw = resp.read()
    dec = SSEDecoder()
    return [json.loads(e.data) for e in dec.feed(raw) + dec.close() if e.data.strip()]


@pytest.mark.parametrize("target", ["openai-chat", "openai-responses"])
def test_long_prompt_sees_its_input_tokens_in_message_start(proxies, fake, target):
    body = {
        "model": "claude-test",
        "max_tokens": 64,
        "stream": True,
        "system": "You are terse.",
        "messages": [{"role": "user", "content": PROMPT}],
    }
    events = stream_events(proxies(target).port, body)
    start, delta = events[0], next(e for e in events if e["type"] == "message_delta")
    assert start["type"] == "message_start" and events[-1]["type"] == "message_stop"
    estimate = estimate_input_tokens(body)
    assert estimate > 5000
    assert start["message"]["usage"] == {
        "input_tokens": estimate,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
    }
    # the upstream's own figures arrive at the end
    assert delta["usage"]["input_tokens"] == fu.USAGE_IN and delta["usage"]["output_tokens"] == fu.USAGE_OUT
