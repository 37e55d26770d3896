"""The ``dragoman_lint`` option in the addon (issue 35 item 4), with taddons/tflow: validated like the other
options; ``log`` lists violations in the flow metadata and logs each once; ``strict`` ends our stream with
an error event in the client's protocol when our own output breaks its grammar."""

from __future__ import annotations

import json
import logging

import pytest
from mitmproxy import exceptions
from mitmproxy import flow
from mitmproxy import http

from dragoman import demo as fu
from dragoman.mitm.answer import callables
from dragoman.mitm.answer import inbound
from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.translate.stream import StreamTranslator
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr

from ..test_translate_addon import make_flow

UPSTREAM = "http://127.0.0.1:1/v1"


def stream(tctx, addon, events: list[bytes], mode: str, corrupt=None, mp=None) -> tuple[http.HTTPFlow, bytes]:
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM, dragoman_lint=mode)
    f = make_flow("anthropic", stream=True)
    addon.request(f)
    f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    f.response.raw_content = None
    if corrupt is not None:  # a bug in our encoder, simulated
        feed = StreamTranslator.feed
        mp.setattr(StreamTranslator, "feed", lambda self, data: corrupt(feed(self, data)))
    addon.responseheaders(f)
    out = b""
    for ev in [*events, b""]:
        r = f.response.stream(ev)
        out += r if isinstance(r, bytes) else b"".join(r)
    addon.response(f)
    return f, out


EVENTS = fu.chat_reply("text", "gpt-x", True, True).events


def test_the_option_is_validated(tctx, addon):
    with pytest.raises(exceptions.OptionsError):
        tctx.configure(addon, dragoman_lint="loud")
    tctx.configure(addon, dragoman_lint="strict")
    assert addon.lint == "strict"


def test_log_finds_nothing_in_a_good_translation(tctx, addon, caplog):
    caplog.set_level(logging.WARNING)
    f, out = stream(tctx, addon, EVENTS, "log")
    va.validate_stream(out)
    assert "lint" not in f.metadata[METADATA_KEY]
    assert not [r for r in caplog.records if "lint:" in r.getMessage()]


def test_log_reports_a_broken_upstream_stream_once(tctx, addon, caplog):
    caplog.set_level(logging.WARNING)
    broken = [EVENTS[0], b'data: {"choices": "no"}\n\n', *EVENTS[1:]]
    f, _ = stream(tctx, addon, broken, "log")
    reports = f.metadata[METADATA_KEY]["lint"]
    assert [(r["side"], r["protocol"], r["index"]) for r in reports] == [("upstream", "chat", 1)]
    lines = [r.getMessage() for r in caplog.records if "lint:" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"flow {f.id}: lint: upstream (chat)") and "event #1" in lines[0]


def _wrong_role(out: bytes) -> bytes:
    return out.replace(b'"role":"assistant"', b'"role":"user"')


def test_log_reports_our_own_violation_but_keeps_the_stream(tctx, addon, monkeypatch):
    f, out = stream(tctx, addon, EVENTS, "log", corrupt=_wrong_role, mp=monkeypatch)
    (rep,) = f.metadata[METADATA_KEY]["lint"]
    assert (rep["side"], rep["protocol"], rep["index"]) == ("ours", "anthropic", 0)
    assert "assistant" in rep["message"]
    assert out.rstrip().endswith(b'data: {"type":"message_stop"}')


def test_strict_turns_our_violation_into_an_error_event(tctx, addon, monkeypatch):
    f, out = stream(tctx, addon, EVENTS, "strict", corrupt=_wrong_role, mp=monkeypatch)
    events = [e for e in out.split(b"\n\n") if e.strip()]
    assert events[-1].startswith(b"event: error\n")
    err = json.loads(events[-1].split(b"data: ", 1)[1])
    assert err["type"] == "error" and "lint" in err["error"]["message"]
    assert b"message_stop" not in out  # the rest of the stream is cut
    assert f.metadata[METADATA_KEY]["lint"][0]["side"] == "ours"


def whole(tctx, addon, reply: dict, mode: str) -> http.HTTPFlow:
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM, dragoman_lint=mode)
    f = make_flow("anthropic")
    addon.request(f)
    f.response = http.Response.make(200, json.dumps(reply).encode(), {"content-type": "application/json"})
    addon.responseheaders(f)
    addon.response(f)
    return f


def test_whole_bodies_are_linted(tctx, addon):
    good = fu.chat_reply("text", "gpt-x", False, False).json_body
    f = whole(tctx, addon, good, "strict")
    assert "lint" not in f.metadata[METADATA_KEY]
    va.validate_message(f.response.content)
    bad = {**good, "object": 7, "choices": [{**good["choices"][0], "finish_reason": "weird"}]}
    f = whole(tctx, addon, bad, "log")
    sides = [r["side"] for r in f.metadata[METADATA_KEY]["lint"]]
    assert sides[0] == "upstream"


# a whole (non-streamed) answer of ours forced broken: (client, upstream, the upstream's reply, the break)
BROKEN_WHOLE = {
    "anthropic": ("openai-chat", lambda: fu.chat_reply("text", "gpt-x", False, False).json_body, b'"role":"assistant"'),
    "openai-chat": (
        "anthropic",
        lambda: fu.anthropic_reply("text", "claude-x", False).json_body,
        b'"object":"chat.completion"',
    ),
    "openai-responses": (
        "anthropic",
        lambda: fu.anthropic_reply("text", "claude-x", False).json_body,
        b'"object":"response"',
    ),
}
ERROR_BODY = {
    "anthropic": va.validate_error_body,
    "openai-chat": vc.validate_error_body,
    "openai-responses": vr.validate_error_body,
}


def _broken_whole(tctx, addon, monkeypatch, client: str, mode: str) -> http.HTTPFlow:
    upstream, reply, token = BROKEN_WHOLE[client]
    translate = inbound.translate_whole

    def broken(flow, state, *more):  # a bug in our response encoder, simulated
        translate(flow, state, *more)
        assert token in flow.response.content
        flow.response.content = flow.response.content.replace(token, token.replace(b'":"', b'":"x'))

    monkeypatch.setattr(inbound, "translate_whole", broken)
    tctx.configure(addon, dragoman_target=upstream, dragoman_upstream=UPSTREAM, dragoman_lint=mode)
    f = make_flow(client)
    addon.request(f)
    f.response = http.Response.make(200, json.dumps(reply()).encode(), {"content-type": "application/json"})
    addon.responseheaders(f)
    addon.response(f)
    return f


@pytest.mark.parametrize("client", sorted(BROKEN_WHOLE))
def test_strict_answers_our_broken_whole_body_with_an_error_in_the_clients_protocol(tctx, addon, monkeypatch, client):
    f = _broken_whole(tctx, addon, monkeypatch, client, "strict")
    assert f.response.status_code == 502
    assert f.response.headers["content-type"].startswith("application/json")
    err = ERROR_BODY[client](f.response.content)  # the strict error grammar of the client's protocol
    assert "lint: our output" in err["message"] and "breaks the grammar" in err["message"]
    (rep,) = f.metadata[METADATA_KEY]["lint"]
    assert (rep["side"], rep["index"]) == ("ours", -1)


@pytest.mark.parametrize("client", sorted(BROKEN_WHOLE))
def test_log_keeps_our_broken_whole_body_and_reports_it(tctx, addon, monkeypatch, client):
    f = _broken_whole(tctx, addon, monkeypatch, client, "log")
    assert f.response.status_code == 200
    assert b'":"x' in f.response.content
    (rep,) = f.metadata[METADATA_KEY]["lint"]
    assert rep["side"] == "ours"


def _gemini_array_stream(tctx, addon, mode: str, corrupt=None, mp=None) -> tuple[http.HTTPFlow, bytes]:
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM, dragoman_lint=mode)
    body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}).encode()
    hdrs = {"host": "client.example:8080", "content-type": "application/json", "x-goog-api-key": "k"}
    f = make_flow("anthropic")
    f.request = http.Request.make(
        "POST", "http://client.example:8080/v1beta/models/gemini-x:streamGenerateContent", body, hdrs
    )
    addon.request(f)
    f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    f.response.raw_content = None
    if corrupt is not None:
        feed = StreamTranslator.feed
        mp.setattr(StreamTranslator, "feed", lambda self, data: corrupt(feed(self, data)))
    addon.responseheaders(f)
    assert f.response.headers["content-type"].startswith("application/json")  # the array stream
    out = b""
    for ev in [*EVENTS, b""]:
        r = f.response.stream(ev)
        out += r if isinstance(r, bytes) else b"".join(r)
    addon.response(f)
    return f, out


def test_a_gemini_array_stream_of_ours_is_linted(tctx, addon, monkeypatch):
    f, out = _gemini_array_stream(tctx, addon, "log")
    assert out.strip().startswith(b"[") and out.endswith(b"]")
    assert "lint" not in f.metadata[METADATA_KEY]
    f, out = _gemini_array_stream(
        tctx, addon, "strict", corrupt=lambda o: o.replace(b'"role":"model"', b'"role":"user"'), mp=monkeypatch
    )
    (rep,) = f.metadata[METADATA_KEY]["lint"]
    assert (rep["side"], rep["protocol"], rep["index"]) == ("ours", "gemini", 0)
    assert b'"error"' in out and b"lint" in out  # strict: our error element ends the array
    assert json.loads(out)[-1]["error"]["message"].startswith("Dragoman lint")


def _log_stream(tctx, addon) -> http.HTTPFlow:
    """A streamed Anthropic -> Chat flow with ``dragoman_lint=log``, past its response headers."""
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM, dragoman_lint="log")
    f = make_flow("anthropic", stream=True)
    addon.request(f)
    f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    f.response.raw_content = None
    addon.responseheaders(f)
    return f


def test_log_checks_what_it_gathered_when_the_stream_is_cut_off(tctx, addon, caplog):
    caplog.set_level(logging.WARNING)
    f = _log_stream(tctx, addon)
    for ev in [EVENTS[0], b'data: {"choices": "no"}\n\n']:
        f.response.stream(ev)
    assert not [r for r in caplog.records if "lint:" in r.getMessage()]  # gathered, not checked yet
    f.error = flow.Error("connection reset")
    addon.error(f)
    lines = [r.getMessage() for r in caplog.records if "lint:" in r.getMessage()]
    assert len(lines) == 1 and "upstream (chat)" in lines[0] and "event #1" in lines[0]


def test_log_reports_mid_stream_once_a_batch_is_gathered(tctx, addon, caplog, monkeypatch):
    # the plain stream callable gathers both sides itself and checks them every ``LINT_BATCH`` bytes: a broken
    # upstream event is reported while the stream still runs, once, and the flow's later batches stay quiet
    monkeypatch.setattr(callables, "LINT_BATCH", 300)
    caplog.set_level(logging.WARNING)
    f = _log_stream(tctx, addon)

    def reports() -> list[str]:
        return [r.getMessage() for r in caplog.records if "lint:" in r.getMessage()]

    f.response.stream(EVENTS[0])
    assert not reports()  # below the batch: gathered only
    f.response.stream(b'data: {"choices": "no"}\n\n')
    for ev in EVENTS[1:3]:
        f.response.stream(ev)
    assert len(reports()) == 1 and "upstream (chat)" in reports()[0] and "event #1" in reports()[0]
    for ev in [*EVENTS[3:], b""]:
        f.response.stream(ev)
    addon.response(f)
    assert len(reports()) == 1
    (rep,) = f.metadata[METADATA_KEY]["lint"]
    assert (rep["side"], rep["index"]) == ("upstream", 1)
