"""The Recorder around Translate (hooks called in the addon-list order), with taddons/tflow. No network."""

from __future__ import annotations

import json
import logging
import time

import pytest
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy.addons import save
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman import demo as fu
from dragoman.mitm.recording import files as store
from dragoman.mitm.recording.recorder import UPSTREAM_CHUNKS_KEY
from dragoman.mitm.recording.recorder import Recorder
from dragoman.mitm.translate_addon import Translate
from dragoman.record.model import Exchange

KEY = "sk-client-SECRET-0123456789"
BODY = {
    "model": "claude-x",
    "max_tokens": 64,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
    "metadata": {"user_id": "u-1"},
}


def client_flow(body: dict | None = None, key: str = KEY) -> http.HTTPFlow:
    raw = json.dumps(body or BODY).encode()
    req = http.Request.make(
        "POST",
        "https://api.anthropic.com/v1/messages",
        raw,
        {
            "content-type": "application/json",
            "x-api-key": key,
            "cookie": "sid=cookie-SECRET-987",
            "anthropic-version": "2023-06-01",
        },
    )
    return tflow.tflow(req=req)


@pytest.fixture
def chain(tmp_path):
    rec, tr = Recorder(), Translate()
    with taddons.context(rec, tr) as tctx:
        tctx.configure(tr, dragoman_target="openai-chat", dragoman_upstream="http://up.example/v1")
        tctx.configure(rec, dragoman_record=str(tmp_path / "rec"), dragoman_record_session="s")
        yield rec, tr, tctx


def run_request(rec, tr, flow):
    rec.before.request(flow)
    tr.request(flow)
    rec.request(flow)


def run_stream(rec, tr, flow, events: list[bytes], gap: float = 0.0, end: bool = True) -> bytes:
    flow.response = http.Response.make(
        200, b"", {"content-type": "text/event-stream; charset=utf-8", "set-cookie": "up=upstream-cookie-SECRET"}
    )
    flow.response.raw_content = None
    rec.before.responseheaders(flow)
    tr.responseheaders(flow)
    rec.responseheaders(flow)
    out = b""
    for ev in [*events, *([b""] if end else [])]:
        if gap and ev:
            time.sleep(gap)
        r = flow.response.stream(ev)
        out += r if isinstance(r, bytes) else b"".join(r)
    return out


def finish(rec, tr, flow):
    rec.before.response(flow)
    tr.response(flow)
    rec.response(flow)
    rec.wait()  # the writer thread has written it


def recorded(tmp_path) -> list[Exchange]:
    return [ex for _, ex in store.load_exchanges(tmp_path / "rec")]


def test_streamed_exchange_is_recorded_with_both_sides_chunks_and_timing(chain, tmp_path):
    rec, tr, _ = chain
    flow = client_flow()
    run_request(rec, tr, flow)
    events = fu.chat_reply("text", "claude-x", True, True).events
    out = run_stream(rec, tr, flow, events, gap=0.02)
    finish(rec, tr, flow)
    files = list((tmp_path / "rec" / "s").iterdir())
    assert [f.name for f in files] == ["001-anthropic-to-openai-chat-claude-x.json"]
    (ex,) = recorded(tmp_path)
    assert (ex.client_protocol, ex.upstream_protocol, ex.stream) == ("anthropic", "openai-chat", True)
    assert ex.client_request.body.json_["metadata"] == {"user_id": "u-1"}  # as received
    assert ex.client_request.url.endswith("/v1/messages")
    assert ex.upstream_request.url == "http://up.example/v1/chat/completions"
    assert "messages" in ex.upstream_request.body.json_ and "max_tokens" in ex.upstream_request.body.json_
    up = ex.upstream_response
    assert up.status == 200 and up.body.raw() == b"".join(events)
    assert [c for c, _ in up.chunk_bytes()] == events  # original boundaries
    times = [t for _, t in up.chunks]
    assert times == sorted(times) and times[-1] - times[0] >= 0.02 * (len(events) - 1) * 0.9
    assert not up.truncated
    assert ex.client_response.body.raw() == out  # what the client got
    assert b"event: message_start" in out


def test_no_secret_reaches_the_file(chain, tmp_path):
    rec, tr, _ = chain
    flow = client_flow()
    run_request(rec, tr, flow)
    # an upstream that echoes the key must not leak it either
    events = [
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"'
        + KEY.encode()
        + b'"},"finish_reason":null}]}\n\n'
    ]
    events += fu.chat_reply("text", "claude-x", True, True).events[1:]
    run_stream(rec, tr, flow, events)
    finish(rec, tr, flow)
    text = "".join(p.read_text() for p in (tmp_path / "rec").rglob("*") if p.is_file())
    for secret in (KEY, "cookie-SECRET-987", "upstream-cookie-SECRET"):
        assert secret not in text
    assert "[REDACTED]" in text
    (ex,) = recorded(tmp_path)
    up = ex.upstream_response
    assert len(up.body.raw()) == len(b"".join(events))  # masked in place: chunk offsets still valid


def test_user_redaction_option(chain, tmp_path):
    rec, tr, tctx = chain
    tctx.configure(rec, dragoman_redact=["x-custom", "user_id", "user"])
    flow = client_flow()
    flow.request.headers["x-custom"] = "custom-value-123456"
    run_request(rec, tr, flow)
    run_stream(rec, tr, flow, fu.chat_reply("text", "claude-x", True, True).events)
    finish(rec, tr, flow)
    text = next((tmp_path / "rec").rglob("*.json")).read_text()
    assert "custom-value-123456" not in text and "u-1" not in text


def test_whole_json_response_keeps_the_raw_upstream_body(chain, tmp_path):
    rec, tr, _ = chain
    flow = client_flow(dict(BODY, stream=False))
    run_request(rec, tr, flow)
    upstream = json.dumps(fu.chat_reply("text", "claude-x", False, False).json_body).encode()
    flow.response = http.Response.make(200, upstream, {"content-type": "application/json"})
    rec.before.responseheaders(flow)
    tr.responseheaders(flow)
    rec.responseheaders(flow)
    finish(rec, tr, flow)
    (ex,) = recorded(tmp_path)
    assert ex.upstream_response.body.raw() == upstream and ex.upstream_response.chunks is None
    assert json.loads(ex.client_response.body.raw())["type"] == "message"


def test_error_mid_stream_is_recorded_as_truncated(chain, tmp_path):
    rec, tr, _ = chain
    flow = client_flow()
    run_request(rec, tr, flow)
    events = fu.chat_reply("text", "claude-x", True, True).events[:3]
    run_stream(rec, tr, flow, events, end=False)
    flow.error = tflow.terr("connection closed")
    tr.error(flow)
    rec.error(flow)
    rec.wait()
    (ex,) = recorded(tmp_path)
    assert ex.error == "connection closed" and ex.upstream_response.truncated
    assert ex.upstream_response.body.raw() == b"".join(events)


def test_rejected_request_has_no_upstream_side(chain, tmp_path):
    rec, tr, _ = chain
    flow = client_flow({"model": "x"})  # no messages, no max_tokens: Translate answers 400 itself
    run_request(rec, tr, flow)
    assert flow.response is not None and flow.response.status_code == 400
    finish(rec, tr, flow)
    (ex,) = recorded(tmp_path)
    assert ex.upstream_request is None and ex.upstream_response is None and ex.client_response.status == 400


def test_non_llm_flows_and_inactive_recorder_are_ignored(tmp_path):
    rec = Recorder()
    with taddons.context(rec) as tctx:
        f = tflow.tflow()
        rec.before.request(f)
        assert not rec.pending
        tctx.configure(rec, dragoman_record=str(tmp_path))
        rec.before.request(f)  # GET /path: not an LLM endpoint
        assert not rec.pending


def test_sequence_numbers_and_session_folders(tmp_path):
    (tmp_path / "s").mkdir()
    assert store.new_session_dir(tmp_path, "s").name == "s-2"
    assert (
        store.exchange_filename(7, "anthropic", "to", "openai-chat", "a/b c")
        == "007-anthropic-to-openai-chat-a-b-c.json"
    )
    assert store.exchange_filename(1) == "001-exchange.json"


def test_bad_record_dir_is_a_startup_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rec = Recorder()
    with taddons.context(rec) as tctx:
        with pytest.raises(exceptions.OptionsError, match="Cannot record"):
            tctx.configure(rec, dragoman_record=str(blocker / "sub"))
        with pytest.raises(exceptions.OptionsError, match="folder name"):
            tctx.configure(rec, dragoman_record=str(tmp_path), dragoman_record_session="a/b")


def test_write_failure_is_logged_as_error_and_stops(chain, tmp_path, caplog, monkeypatch):
    rec, tr, _ = chain

    def boom(path, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "write_atomic", boom)
    flow = client_flow()
    run_request(rec, tr, flow)
    run_stream(rec, tr, flow, fu.chat_reply("text", "claude-x", True, True).events)
    with caplog.at_level(logging.ERROR), pytest.raises(SystemExit) as e:
        finish(rec, tr, flow)
    assert e.value.code == 1
    assert any(r.levelno == logging.ERROR and "No space left" in r.getMessage() for r in caplog.records)
    assert KEY not in caplog.text


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "a.json"
    store.write_atomic(target, "old")

    def fail(*a, **k):
        raise OSError("replace failed")

    monkeypatch.setattr(store.os, "replace", fail)
    with pytest.raises(OSError):
        store.write_atomic(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_saved_flows_carry_the_client_body_and_upstream_chunks(tmp_path):
    rec, tr = Recorder(), Translate()
    with taddons.context(rec, tr, save.Save()) as tctx:
        tctx.configure(tr, dragoman_target="openai-chat")
        tctx.options.save_stream_file = str(tmp_path / "flows")
        flow = client_flow()
        run_request(rec, tr, flow)
        events = fu.chat_reply("text", "claude-x", True, True).events
        out = run_stream(rec, tr, flow, events)
        finish(rec, tr, flow)
        assert flow.response.raw_content == out
        assert flow.metadata[UPSTREAM_CHUNKS_KEY] == events
        assert not list(tmp_path.glob("*.json"))  # -w alone records no exchange files


def test_a_stream_goes_to_disk_as_it_arrives_not_into_memory(chain, tmp_path):
    rec, tr, _ = chain
    flow = client_flow()
    run_request(rec, tr, flow)
    events = fu.chat_reply("text", "claude-x", True, True).events
    flow.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    flow.response.raw_content = None
    rec.before.responseheaders(flow)
    tr.responseheaders(flow)
    rec.responseheaders(flow)
    p = rec.pending[flow.id]
    assert p.up.memory is None and p.client.memory is None  # no copy of the body is kept
    for ev in events[:3]:
        flow.response.stream(ev)
    p.up._file.flush()
    on_disk, sent = p.up.path.read_bytes(), b"".join(events[:3])
    # on disk already, mid-stream (but the last bytes, which could start a secret, held back for the mask)
    assert sent.startswith(on_disk) and len(sent) - len(on_disk) < 64 < len(on_disk)
    for ev in [*events[3:], b""]:
        flow.response.stream(ev)
    finish(rec, tr, flow)
    assert [f.name for f in (tmp_path / "rec" / "s").iterdir()] == ["001-anthropic-to-openai-chat-claude-x.json"]
    (ex,) = recorded(tmp_path)
    assert [c for c, _ in ex.upstream_response.chunk_bytes()] == events


def test_a_recorded_stream_lets_its_tee_and_state_go_at_the_flows_end(chain, tmp_path):
    """The recorder's tee around Translate's stream callable is dropped at ``response`` (``detach_stream``): the
    flow no longer holds the stream's spools and translation state until a garbage collection frees the flow."""
    from dragoman.mitm.flowstate import ended_stream

    rec, tr, _ = chain
    flow = client_flow()
    run_request(rec, tr, flow)
    run_stream(rec, tr, flow, fu.chat_reply("text", "claude-x", True, True).events)
    assert flow.response.stream.__qualname__.startswith("Recorder._tee")
    finish(rec, tr, flow)
    assert flow.response.stream is ended_stream
    (ex,) = recorded(tmp_path)  # recorded as before
    assert ex.stream and ex.upstream_response.status == 200
