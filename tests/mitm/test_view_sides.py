"""The Dragoman view shows a streamed answer from both sides (issue 35 item 2): the upstream's stream read in
its protocol and the client-bound stream read back in the client's, in two columns, rows that differ marked.
Each of the 12 cross directions of the four protocols, over a streamed answer with thinking, text and two
parallel tool calls; on mitmproxy 12 and 11 (this file runs under both Pythons). No browser here."""

from __future__ import annotations

import json

import pytest
from mitmproxy import http
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman import demo as fu
from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.render import render
from dragoman.demo.wire import Request
from dragoman.inspect.compare import MARK
from dragoman.mitm import view
from dragoman.mitm.translate_addon import Translate

from .test_translate_addon import BODIES
from .test_translate_addon import make_flow
from .test_view import shown

PROTOS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
CROSS = [(c, u) for c in PROTOS for u in PROTOS if c != u]
IDS = [f"{c}->{u}" for c, u in CROSS]
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
#: thinking, a line of text, then the two parallel calls of the ``tools`` scenario
ANSWER = Answer(
    thinking=fu.THINKING_PIECES,
    signature=fu.SIGNATURE,
    encrypted=fu.ENCRYPTED,
    text=("Checking", " both."),
    calls=tuple(Call(cid, fn, frags, item_id=f"fc_fake_{n}") for n, (cid, fn, frags) in enumerate(fu.TOOL_CALLS)),
    reasoning_tokens=3,
)


def upstream_events(protocol: str) -> list[bytes]:
    return render(Request(protocol, "m", True, include_usage=True), ANSWER).events


def client_flow(client: str) -> http.HTTPFlow:
    if client == "openai-chat":  # usage in a Chat stream only when asked for
        return make_flow(client, body={**BODIES[client], "stream": True, "stream_options": {"include_usage": True}})
    if client != "gemini":
        return make_flow(client, body={**BODIES[client], "stream": True})
    from mitmproxy.proxy import mode_specs

    req = http.Request.make(
        "POST",
        "http://client.example:8080/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
        json.dumps(GEMINI_BODY).encode(),
        {"host": "client.example:8080", "content-type": "application/json", "x-goog-api-key": "client-key"},
    )
    f = tflow.tflow(req=req)
    f.client_conn.proxy_mode = mode_specs.ProxyMode.parse("reverse:http://client.example:8080")
    return f


def streamed(tctx, addon, client: str, upstream: str, keep: bool = True) -> http.HTTPFlow:
    tctx.configure(
        addon, dragoman_target=upstream, dragoman_upstream="http://127.0.0.1:1/v1", dragoman_keep_answer=keep
    )
    f = client_flow(client)
    addon.request(f)
    assert f.response is None, f.response and f.response.content
    f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    f.response.raw_content = None
    addon.responseheaders(f)
    callable_ = f.response.stream
    assert callable(callable_)
    for ev in upstream_events(upstream):
        for n in range(0, len(ev), 7):  # the upstream's events cut into small chunks
            callable_(ev[n : n + 7])
    callable_(b"")
    addon.response(f)
    f.response.stream = False
    return f


@pytest.fixture
def addon():
    return Translate()


@pytest.mark.parametrize("client,upstream", CROSS, ids=IDS)
def test_both_sides_of_a_streamed_thinking_and_tools_answer(addon, client, upstream):
    with taddons.context(addon) as tctx:
        f = streamed(tctx, addon, client, upstream)
        meta = f.metadata["dragoman"]
        up, cl = meta["answer"], meta["client_answer"]
        assert (up["protocol"], cl["protocol"]) == (upstream, client)
        for side in (up, cl):
            assert side["problem"] is None and side["events"] > 0, side
            assert side["thinking"] == fu.THINKING
            assert side["text"] == "Checking both."
            assert [(c["name"], c["arguments"]) for c in side["tool_calls"]] == [
                ("get_weather", {"city": "Paris", "unit": "c"}),
                ("get_time", {"tz": "Asia/Tokyo"}),
            ]
            assert side["stop"] == "tool_use"
            assert (side["usage"]["input_tokens"], side["usage"]["output_tokens"]) == (fu.USAGE_IN, fu.USAGE_OUT)
        name, text = shown(f, f.response)
        assert "Dragoman" in name
        lines = text.splitlines()
        head = next(n for n, line in enumerate(lines) if line.startswith("the answer on both sides"))
        assert f"upstream sent ({upstream}, " in lines[head + 1] and f"client got ({client}, " in lines[head + 1]
        row = next(line for line in lines if line[3:].startswith("tool call 1"))
        left, right = row[3 + 12 :].split(" | ")
        assert left.strip() == right.strip() == 'get_weather {"city": "Paris", "unit": "c"}'
        thinking = next(line for line in lines if line[3:].startswith("thinking"))
        assert not thinking.startswith(MARK) and fu.THINKING in thinking
        stop = next(line for line in lines if line[3:].startswith("stop"))
        assert not stop.startswith(MARK) and stop.count("tool_use") == 2
        end = lines.index("", head)
        assert all(len(line) <= view.VIEW_WIDTH for line in lines[head + 1 : end])
        # a row that differs carries the mark, and the heading names it
        marked = [line for line in lines[head + 2 : end] if line.startswith(MARK)]
        named = lines[head].partition("marks where they differ: ")[2].rstrip("):")
        if marked:
            assert named and all(line[3:].split()[0] in named for line in marked)
        else:
            assert lines[head].endswith("(the two sides agree):")


def test_a_difference_is_marked(addon):
    with taddons.context(addon) as tctx:
        f = streamed(tctx, addon, "anthropic", "openai-chat")
        meta = f.metadata["dragoman"]
        meta["client_answer"] = {**meta["client_answer"], "text": "Checking neither.", "stop": "end_turn"}
        text = view.render(b"", f, f.response)
        lines = text.splitlines()
        assert "marks where they differ: text, stop)" in text
        text_row = next(line for line in lines if line[3:].startswith("text"))
        assert text_row.startswith(MARK) and "Checking both." in text_row and "Checking neither." in text_row
        stop_row = next(line for line in lines if line[3:].startswith("stop"))
        assert stop_row.startswith(MARK) and "tool_use" in stop_row and "end_turn" in stop_row
        assert not next(line for line in lines if line[3:].startswith("tool call 1")).startswith(MARK)


def test_without_keep_answer_no_side_is_kept(addon):
    with taddons.context(addon) as tctx:
        f = streamed(tctx, addon, "openai-responses", "gemini", keep=False)
        meta = f.metadata["dragoman"]
        assert "answer" not in meta and "client_answer" not in meta
        assert "streamed: mitmproxy does not keep" in view.render(b"", f, f.response)


def test_a_gemini_array_stream_is_read_back_as_the_client_got_it(addon):
    """A Gemini client without ``alt=sse`` gets one JSON array: the client side is read from its elements."""
    with taddons.context(addon) as tctx:
        tctx.configure(addon, dragoman_target="anthropic", dragoman_upstream="http://127.0.0.1:1/v1")
        f = client_flow("gemini")
        f.request.url = f.request.url.replace("?alt=sse", "")
        f = streamed_flow(tctx, addon, f, "anthropic")
        cl = f.metadata["dragoman"]["client_answer"]
        assert cl["problem"] is None and cl["text"] == "Checking both." and len(cl["tool_calls"]) == 2


def streamed_flow(tctx, addon, f: http.HTTPFlow, upstream: str) -> http.HTTPFlow:
    tctx.configure(addon, dragoman_keep_answer=True)
    addon.request(f)
    f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    addon.responseheaders(f)
    assert f.response.headers["content-type"].startswith("application/json")
    for ev in upstream_events(upstream):
        for n in range(0, len(ev), 5):
            f.response.stream(ev[n : n + 5])
    f.response.stream(b"")
    addon.response(f)
    return f


def whole_flow(tctx, addon, client: str, upstream: str) -> http.HTTPFlow:
    tctx.configure(
        addon, dragoman_target=upstream, dragoman_upstream="http://127.0.0.1:1/v1", dragoman_keep_answer=True
    )
    f = client_flow(client)
    if client == "gemini":
        f.request.url = f.request.url.replace(":streamGenerateContent?alt=sse", ":generateContent")
    else:
        body = json.loads(f.request.content)
        body.pop("stream", None)
        body.pop("stream_options", None)
        f.request.content = json.dumps(body).encode()
    addon.request(f)
    reply = render(Request(upstream, "m", False), ANSWER).json_body
    f.response = http.Response.make(200, json.dumps(reply).encode(), {"content-type": "application/json"})
    addon.responseheaders(f)
    addon.response(f)
    return f


@pytest.mark.parametrize("client,upstream", CROSS, ids=IDS)
def test_both_sides_of_a_whole_answer(addon, client, upstream):
    """A whole answer: the upstream's side read from its body before translation, the client's from the body."""
    with taddons.context(addon) as tctx:
        f = whole_flow(tctx, addon, client, upstream)
        assert f.metadata["dragoman"]["answer"]["protocol"] == upstream
        text = view.render(f.response.content, f, f.response)
        assert f"upstream sent ({upstream})" in text and f"client got ({client})" in text
        rows = {line[3:15].strip(): line for line in text.splitlines() if " | " in line}
        for label in ("thinking", "text", "tool call 1", "tool call 2", "stop"):
            left, right = rows[label][15:].split(" | ")
            assert left.strip() == right.strip() and left.strip(), (label, rows[label])
        assert rows["stop"][15:].split(" | ")[1].strip() == "tool_use"
