"""WebSocket turns through a real mitmdump write the usage ledger like HTTP turns (one row per turn, the
upstream's reported tokens, errors counted) and get the same reply filters: with ``dragoman_mcp_prefix`` an
Anthropic upstream's call of ``mcp__browser_click`` reaches the client as ``mcp_browser_click`` again."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.conftest import Proxy
from tests.e2e.conftest import free_port
from tests.state.ws_client import WsClient

from dragoman.demo import FakeUpstream
from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.answer import pieces
from dragoman.demo.render import render
from dragoman.demo.wire import ANTHROPIC
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request

TOOLS = [
    {"type": "function", "name": "mcp_browser_click", "parameters": {"type": "object", "properties": {}}},
    {"type": "function", "name": "mcp__fs__read", "parameters": {"type": "object", "properties": {}}},
]
SEEN: list[list[str]] = []


def call_offered(request: Request) -> Reply:
    """Calls the first tool offered, by the name the upstream got; reports 21 in, 5 out."""
    tools = request.body.get("tools") or []
    names = [t.get("name") or (t.get("function") or {}).get("name") for t in tools]
    SEEN.append(names)
    if "fail" in str(request.body.get("messages")):
        if request.protocol == ANTHROPIC:
            return Reply(status=500, json_body={"type": "error", "error": {"type": "api_error", "message": "busy"}})
        return Reply(status=500, json_body={"error": {"message": "busy", "type": "server_error", "code": None}})
    call = Call("call_1" if request.protocol != ANTHROPIC else "toolu_1", names[0], pieces('{"x": 1}'))
    return render(request, Answer(text=pieces("Calling."), calls=(call,), usage_in=21, usage_out=5))


@pytest.fixture(scope="module")
def upstream():
    with FakeUpstream(scenarios={"call": call_offered}, scenario="call") as up:
        yield up


@pytest.fixture(scope="module", params=["anthropic", "openai-chat"])
def proxy(request, upstream, tmp_path_factory):
    work = tmp_path_factory.mktemp("wsl")
    p = Proxy(
        request.param,
        upstream,
        work,
        ["--set", f"dragoman_ledger={work / 'usage.sqlite3'}", "--set", "dragoman_mcp_prefix=true"],
    )
    p.ledger = work / "usage.sqlite3"  # type: ignore[attr-defined]
    yield p
    p.stop()


def rows(path: Path, want: int) -> list[dict[str, Any]]:
    """The ledger's rows once ``want`` are written (the ledger writes from a queue, in batches)."""
    deadline = time.monotonic() + 20
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        if path.exists():
            con = sqlite3.connect(path)
            con.row_factory = sqlite3.Row
            try:
                found = [dict(r) for r in con.execute("SELECT * FROM usage ORDER BY ts")]
            except sqlite3.OperationalError:
                found = []
            finally:
                con.close()
            if len(found) >= want:
                return found
        time.sleep(0.1)
    return found


def test_websocket_turns_are_ledgered_and_renamed_back(proxy, upstream) -> None:
    c = WsClient(proxy.port)
    try:
        assert c.status == 101
        body = {"model": "gpt-5-codex", "tools": TOOLS, "store": False, "input": [{"role": "user", "content": "go"}]}
        events = c.turn(dict(body))
        assert events[-1]["type"] == "response.completed"
        done = events[-1]["response"]
        calls = [o for o in done["output"] if o["type"] == "function_call"]
        added = [
            m["item"]["name"]
            for m in events
            if m["type"] == "response.output_item.added" and m["item"]["type"] == "function_call"
        ]
        if proxy.target == "anthropic":
            assert SEEN[-1] == ["mcp__browser_click", "mcp__fs__read"]  # renamed going up
        else:
            assert SEEN[-1] == ["mcp_browser_click", "mcp__fs__read"]  # a Chat upstream takes them as they are
        # the client sees its own name back, in the streamed item and in the finished response
        assert [o["name"] for o in calls] == ["mcp_browser_click"]
        assert added == ["mcp_browser_click"]
        assert "mcp__browser_click" not in str(events)
        # a failing upstream: an error event on the socket, and a ledger row marked as an error
        failing = c.turn(dict(body, input=[{"role": "user", "content": "fail"}]))
        assert failing[-1]["type"] == "error" and failing[-1]["status"] >= 500
    finally:
        c.close()
    got = rows(proxy.ledger, 2)
    assert len(got) == 2, got
    ok, bad = got
    assert (ok["input_tokens"], ok["output_tokens"], ok["error"], ok["estimated"]) == (21, 5, 0, 0)
    assert ok["client_model"] == "gpt-5-codex" and ok["stream"] == 1
    assert bad["error"] == 1 and bad["status"] == 500 and bad["output_tokens"] == 0


def test_refused_upstream_is_a_ledger_error_row(tmp_path) -> None:
    class Gone:
        url = f"http://127.0.0.1:{free_port()}"  # nothing listens there: connections are refused

    gone: Any = Gone()
    p = Proxy("anthropic", gone, tmp_path, ["--set", f"dragoman_ledger={tmp_path / 'usage.sqlite3'}"])
    try:
        c = WsClient(p.port)
        try:
            body = {"model": "gpt-5-codex", "store": False, "input": [{"role": "user", "content": "go"}]}
            events = c.turn(body)
            assert events[-1]["type"] == "error" and events[-1]["status"] == 502
        finally:
            c.close()
    finally:
        p.stop()
    got = rows(tmp_path / "usage.sqlite3", 1)
    assert [(r["status"], r["error"], r["output_tokens"]) for r in got] == [(502, 1, 0)]
