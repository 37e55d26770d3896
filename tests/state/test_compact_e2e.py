"""``POST /v1/responses/compact`` through a real mitmdump: on an Anthropic and a Chat upstream it becomes a
summarising turn (the history plus a request for a handoff summary, no tool call allowed) and the answer
is the ``response.compaction`` object Codex reads (``output``: the user's messages and the summary as plain
message items it can send back); toward a Responses upstream the call passes untouched."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from tests.e2e.conftest import Proxy

from dragoman.demo import FakeUpstream
from dragoman.demo.answer import Answer
from dragoman.demo.answer import Ids
from dragoman.demo.answer import pieces
from dragoman.demo.render import render
from dragoman.demo.server import RecordedRequest
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from dragoman.mitm.responses.compact import SUMMARY_PREFIX
from dragoman.mitm.responses.compact import SUMMARY_REQUEST

TOOLS = [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}}]
HISTORY: list[dict[str, Any]] = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "build the landing page zq81"}]},
    {"type": "function_call", "call_id": "call_a", "name": "shell", "arguments": '{"cmd": "ls"}'},
    {"type": "function_call_output", "call_id": "call_a", "output": "index.html"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Edited index.html."}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "now add a footer"}]},
]
COMPACTED = {"id": "resp_x", "object": "response.compaction", "created_at": 1, "output": [], "usage": None}


def summarise(request: Request) -> Reply:
    ids = Ids(message="msg_s", completion="chatcmpl-s", response="resp_s", reasoning="rs_s")
    text = "" if "empty-please" in json.dumps(request.body) else "Goal: landing page zq81; next: footer."
    return render(request, Answer(text=pieces(text), ids=ids, usage_in=40, usage_out=9))


def native_compact(rec: RecordedRequest) -> Reply:
    return Reply(json_body=COMPACTED)


@pytest.fixture(scope="module")
def upstream():
    with FakeUpstream(
        scenarios={"summarise": summarise}, scenario="summarise", routes={"/v1/responses/compact": native_compact}
    ) as up:
        yield up


@pytest.fixture(scope="module", params=["anthropic", "openai-chat", "openai-responses"])
def proxy(request, upstream, tmp_path_factory):
    p = Proxy(request.param, upstream, tmp_path_factory.mktemp("compact"))
    yield p
    p.stop()


def post(port: int, body: Any) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/responses/compact",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "authorization": "Bearer sk-client"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def codex_body(**extra: Any) -> dict[str, Any]:
    """What Codex's ``CompactionInput`` serialises to."""
    body = {
        "model": "gpt-5-codex",
        "input": HISTORY,
        "instructions": "You are Codex.",
        "tools": TOOLS,
        "parallel_tool_calls": True,
        "reasoning": {"effort": "medium", "summary": "auto"},
    }
    body.update(extra)
    return body


def test_compact_becomes_a_summarising_turn(proxy, upstream) -> None:
    start = len(upstream.requests)
    status, out = post(proxy.port, codex_body())
    with upstream.lock:
        sent = [(r.path, r.body) for r in upstream.requests[start:]]
    assert len(sent) == 1
    path, body = sent[0]
    if proxy.target == "openai-responses":  # passed through untouched: the upstream compacts itself
        assert (status, out) == (200, COMPACTED)
        assert path == "/v1/responses/compact" and body == codex_body()
        return
    assert status == 200, out
    assert out["object"] == "response.compaction" and out["id"].startswith("resp_")
    assert isinstance(out["created_at"], int)
    assert out["usage"]["input_tokens"] == 40 and out["usage"]["output_tokens"] == 9
    # the user's messages, then the summary as a user message any upstream can take back
    assert [i["type"] for i in out["output"]] == ["message"] * 3
    assert [i["role"] for i in out["output"]] == ["user"] * 3
    assert out["output"][:2] == [HISTORY[0], HISTORY[4]]
    summary = out["output"][2]["content"][0]
    assert summary == {"type": "input_text", "text": SUMMARY_PREFIX + "Goal: landing page zq81; next: footer."}
    # the upstream got the whole history, the instructions and the summary request, and may call no tool
    assert path.endswith("/messages" if proxy.target == "anthropic" else "/chat/completions")
    assert body.get("stream") in (None, False)
    text = json.dumps(body)
    assert "build the landing page zq81" in text and "index.html" in text and "You are Codex." in text
    last = body["messages"][-1]
    assert last["role"] == "user" and SUMMARY_REQUEST in json.dumps(last)
    if proxy.target == "anthropic":
        assert body["tool_choice"] == {"type": "none"}
    else:
        assert body["tool_choice"] == "none"


def test_compact_without_a_summary_is_a_502_in_the_responses_shape(proxy) -> None:
    if proxy.target == "openai-responses":
        pytest.skip("passed through untouched")
    hist = [{"type": "message", "role": "user", "content": "empty-please"}]
    status, out = post(proxy.port, codex_body(input=hist))
    assert status == 502 and out["error"]["type"] == "server_error" and "summary" in out["error"]["message"]


def test_compact_bad_body_is_a_400(proxy) -> None:
    if proxy.target == "openai-responses":
        pytest.skip("passed through untouched")
    status, out = post(proxy.port, ["not", "an", "object"])
    assert status == 400 and "error" in out


def test_openai_sdk_compact(proxy) -> None:
    openai = pytest.importorskip("openai")
    from openai.resources.responses import Responses

    if proxy.target == "openai-responses" or not hasattr(Responses, "compact"):
        pytest.skip("the SDK has no responses.compact, or the upstream compacts itself")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{proxy.port}/v1", api_key="sk-client", max_retries=0)
    got = client.responses.compact(model="gpt-5-codex", input=HISTORY)
    assert got.object == "response.compaction"
    texts = [c.text for item in got.output for c in item.content]  # type: ignore[union-attr]
    assert texts[-1].endswith("next: footer.") and texts[0] == "build the landing page zq81"
