"""The "Dragoman" content view (issue 35 item 4, whole answers): chosen automatically for a translated flow by
mitmproxy's own view selection, on mitmproxy 12 (``Contentview``) and 11 (``View``); it shows the answer the
client got assembled (thinking, text, tool calls with parsed arguments, stop, usage), the request as sent
upstream, the lossiness report and the provider profile. Runs in all 6 cross directions. No browser here."""

from __future__ import annotations

import pytest
from mitmproxy import contentviews
from mitmproxy import http
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman import demo as fu
from dragoman.mitm import view
from dragoman.mitm.translate_addon import Translate

from .test_lossy_flow import whole
from .test_translate_addon import BODIES
from .test_translate_addon import make_flow

PROTOS = ["anthropic", "openai-chat", "openai-responses"]
CROSS = [(c, u) for c in PROTOS for u in PROTOS if c != u]
LOSSY_EXTRA = {"anthropic": {"top_k": 5}, "openai-chat": {"seed": 1}, "openai-responses": {"truncation": "auto"}}


def reply(upstream: str, scenario: str) -> dict:
    if upstream == "anthropic":
        return fu.anthropic_reply(scenario, "m", False).json_body
    if upstream == "openai-chat":
        return fu.chat_reply(scenario, "m", False, False).json_body
    return fu.responses_reply(scenario, "m", False).json_body


def shown(flow: http.HTTPFlow, message) -> tuple[str, str]:
    """(view name, text) as mitmproxy's automatic view selection renders ``message``."""
    if hasattr(contentviews, "prettify_message"):  # mitmproxy 12
        res = contentviews.prettify_message(message, flow)
        return str(res.view_name), res.text
    desc, lines, err = contentviews.get_message_content_view("auto", message, flow)  # mitmproxy 11
    assert err is None, err
    text = "\n".join("".join(t for _, t in line) for line in lines)
    return desc, text


@pytest.fixture
def addon():
    return Translate()


@pytest.mark.parametrize("client,upstream", CROSS, ids=[f"{c}->{u}" for c, u in CROSS])
def test_the_view_shows_the_assembled_answer_request_and_report(addon, client, upstream):
    with taddons.context(addon) as tctx:
        body = {**BODIES[client], **LOSSY_EXTRA[client]}
        f = whole(tctx, addon, client, upstream, body, reply(upstream, "tools"))
        name, text = shown(f, f.response)
        assert "Dragoman" in name
        assert f"Dragoman: {client} client -> {upstream} upstream" in text
        for _, fn, _ in fu.TOOL_CALLS:
            assert f"tool call {fn} (" in text
        assert "stop: tool_use" in text
        assert "lossiness report (" in text and "nothing lost" not in text
        extra = next(iter(LOSSY_EXTRA[client]))
        assert f"  {extra}: dropped, " in text
        if upstream == "openai-chat":
            assert "provider profile: generic" in text
        name, text = shown(f, f.request)
        assert "Dragoman" in name and f"request as sent upstream ({upstream}):" in text
        f = whole(tctx, addon, client, upstream, BODIES[client], reply(upstream, "thinking"))
        _, text = shown(f, f.response)
        assert "thinking:" in text and fu.THINKING.split()[0] in text
        assert "text:" in text and fu.TEXT.split()[0] in text


def test_other_flows_keep_mitmproxys_own_views(addon):
    with taddons.context(addon):
        f = tflow.tflow(resp=True)
        f.response.headers["content-type"] = "application/json"
        f.response.content = b'{"a": 1}'
        name, _ = shown(f, f.response)
        assert "Dragoman" not in name


def stream_events(upstream: str, scenario: str) -> list[bytes]:
    if upstream == "anthropic":
        return fu.anthropic_reply(scenario, "m", True).events
    if upstream == "openai-chat":
        return fu.chat_reply(scenario, "m", True, True).events
    return fu.responses_reply(scenario, "m", True).events


def streamed(tctx, addon, client: str, upstream: str, scenario: str, **opts) -> http.HTTPFlow:
    tctx.configure(addon, dragoman_target=upstream, dragoman_upstream="http://127.0.0.1:1/v1", **opts)
    f = make_flow(client, body={**BODIES[client], **LOSSY_EXTRA[client], "stream": True})
    addon.request(f)
    f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    f.response.raw_content = None  # as mitmproxy has it for a streamed answer: no body kept
    addon.responseheaders(f)
    for ev in stream_events(upstream, scenario):
        f.response.stream(ev)
    f.response.stream(b"")
    addon.response(f)
    f.response.stream = False
    # with keep_answer the addon gives the flow an empty body, so mitmproxy asks the view (None: "missing")
    assert f.response.raw_content == (b"" if opts.get("dragoman_keep_answer") else None)
    return f


@pytest.mark.parametrize("client,upstream", CROSS, ids=[f"{c}->{u}" for c, u in CROSS])
def test_a_streamed_answer_is_assembled_with_keep_answer(addon, client, upstream):
    with taddons.context(addon) as tctx:
        f = streamed(tctx, addon, client, upstream, "tools", dragoman_keep_answer=True)
        name, text = shown(f, f.response)
        assert "Dragoman" in name
        assert f"upstream sent ({upstream}, " in text and f"client got ({client}, " in text  # both sides
        assert text.count('get_weather {"city": "Paris", "unit": "c"}') == 2  # parsed arguments, each side
        assert text.count('get_time {"tz": "Asia/Tokyo"}') == 2
        stop = next(line for line in text.splitlines() if line[3:].startswith("stop "))
        assert stop.count("tool_use") == 2
        assert f"  {next(iter(LOSSY_EXTRA[client]))}: dropped, " in text
        f = streamed(tctx, addon, client, upstream, "thinking", dragoman_keep_answer=True)
        _, text = shown(f, f.response)
        row = next(line for line in text.splitlines() if line[3:].startswith("thinking "))
        assert row.count(fu.THINKING) == 2
        row = next(line for line in text.splitlines() if line[3:].startswith("text "))
        assert row.count(fu.TEXT) == 2


def test_a_streamed_answer_without_keep_answer_says_where_to_find_it(addon):
    with taddons.context(addon) as tctx:
        f = streamed(tctx, addon, "anthropic", "openai-chat", "tools")
        assert "answer" not in f.metadata["dragoman"]
        text = view.render(b"", f, f.response)  # as the view renders it when asked
        assert "streamed: mitmproxy does not keep a streamed body" in text
        assert "message_start.usage.input_tokens: approximated" in text
