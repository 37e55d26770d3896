"""Two rules of the real Anthropic API that a Chat or Responses client's history breaks, through a real
mitmdump in front of the fake Anthropic upstream, which enforces both as the API does (400):

* tool ids must match ``^[a-zA-Z0-9_-]+$`` (Kimi's ``functions.get_time:0``, MCP-derived ids do not);
* with thinking on, the assistant turn whose ``tool_use`` the last user turn answers must start with a signed
  thinking block (a Chat client's history never has one).

Without Dragoman's handling, each request below is a 400 from the API; with it, a normal answer.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

pytestmark = pytest.mark.e2e


def chat(port: int, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json", "authorization": "Bearer sk-test", "x-fake-scenario": "text"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def tool_loop(call_id: str, **extra) -> dict:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4000,
        "messages": [
            {"role": "user", "content": "what time is it?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "12:00"},
        ],
        "tools": [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}],
        **extra,
    }


@pytest.mark.parametrize(
    "call_id,extra",
    [
        ("functions.get_time:0", {}),  # Kimi-style id
        ("call_abc123", {"reasoning_effort": "medium"}),  # thinking on, no signed thinking in the history
        ("mcp/clock.now@1", {"reasoning_effort": "high"}),  # both
    ],
    ids=["kimi-id", "thinking-tool-loop", "both"],
)
def test_chat_client_history_reaches_anthropic_in_a_shape_it_accepts(proxies, fake, call_id, extra):
    proxy = proxies("anthropic")
    before = len(fake.requests)
    status, body = chat(proxy.port, tool_loop(call_id, **extra))
    assert status == 200, body
    assert body["choices"][0]["message"]["content"]
    [sent] = fake.requests[before:]
    assert sent.path == "/v1/messages"
    use, result = sent.body["messages"][1]["content"][0], sent.body["messages"][2]["content"][0]
    assert use["type"] == "tool_use" and result["type"] == "tool_result"
    assert use["id"] == result["tool_use_id"]
    assert ("thinking" in sent.body) is False  # with reasoning asked, it went without (the log lists why)
    if extra:
        assert "thinking.tool_loop_without_signature" in proxy.log()
