"""The lossiness report of a flow (issue 35 item 1): in the flow's metadata (and so in ``-w`` flow files), in
the recording, in one log line of names, and counted in ``x-dragoman-lossy`` (``dragoman_lossy_header``).
With taddons/tflow, no network."""

from __future__ import annotations

import io
import json
import logging

from mitmproxy import http
from mitmproxy import io as mio
from mitmproxy.test import taddons

from dragoman import demo as fu
from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.mitm.recording import files as store
from dragoman.mitm.recording.recorder import Recorder
from dragoman.mitm.translate_addon import LOSSY_HEADER
from dragoman.mitm.translate_addon import Translate

from .recording.test_recorder import client_flow
from .recording.test_recorder import finish as rec_finish
from .recording.test_recorder import run_request
from .recording.test_recorder import run_stream
from .test_translate_addon import BODIES
from .test_translate_addon import make_flow

LOSSY_BODY = {**BODIES["anthropic"], "top_k": 5, "metadata": {"user_id": "u-VALUE-SECRET", "tier": "x"}}


def whole(tctx, addon, client: str, target: str, body: dict, reply: dict, **opts) -> http.HTTPFlow:
    tctx.configure(addon, dragoman_target=target, dragoman_upstream="http://127.0.0.1:1/v1", **opts)
    f = make_flow(client, body=body)
    addon.request(f)
    f.response = http.Response.make(200, json.dumps(reply).encode(), {"content-type": "application/json"})
    addon.responseheaders(f)
    addon.response(f)
    return f


CHAT_REPLY = fu.chat_reply("text", "gpt-x", False, False).json_body


def test_whole_answer_counts_every_entry_in_the_header_and_metadata(tctx, addon, caplog):
    caplog.set_level(logging.INFO)
    f = whole(tctx, addon, "anthropic", "openai-chat", LOSSY_BODY, CHAT_REPLY)
    meta = f.metadata[METADATA_KEY]
    paths = [e["path"] for e in meta["lossy"]]
    assert paths == ["metadata.tier", "top_k"]
    assert all(e["kind"] == "dropped" and e["reason"] for e in meta["lossy"])
    assert meta["dropped"] == paths  # the first API's names
    assert f.response.headers[LOSSY_HEADER] == "2"
    lines = [r.getMessage() for r in caplog.records if "lossy translation" in r.getMessage()]
    assert lines == [f"flow {f.id}: lossy translation, 2 not carried as sent (dropped: metadata.tier, top_k)"]
    assert not any("u-VALUE-SECRET" in r.getMessage() for r in caplog.records)


def test_a_faithful_translation_says_zero(tctx, addon, caplog):
    caplog.set_level(logging.INFO)
    f = whole(tctx, addon, "anthropic", "openai-chat", BODIES["anthropic"], CHAT_REPLY)
    assert f.metadata[METADATA_KEY]["lossy"] == []
    assert f.response.headers[LOSSY_HEADER] == "0"
    assert not any("lossy translation" in r.getMessage() for r in caplog.records)


def test_the_header_can_be_turned_off(tctx, addon):
    f = whole(tctx, addon, "anthropic", "openai-chat", LOSSY_BODY, CHAT_REPLY, dragoman_lossy_header=False)
    assert LOSSY_HEADER not in f.response.headers
    assert len(f.metadata[METADATA_KEY]["lossy"]) == 2  # the report is kept all the same


def test_same_protocol_has_an_empty_report_and_no_header(tctx, addon, caplog):
    caplog.set_level(logging.INFO)
    reply = fu.anthropic_reply("text", "claude-x", False).json_body
    f = whole(tctx, addon, "anthropic", "anthropic", LOSSY_BODY, reply)
    assert f.metadata[METADATA_KEY]["lossy"] == [] and f.metadata[METADATA_KEY]["dropped"] == []
    assert LOSSY_HEADER not in f.response.headers
    assert not any("lossy translation" in r.getMessage() for r in caplog.records)


def test_a_stream_header_counts_what_was_known_when_it_left(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
    f = make_flow("anthropic", body={**LOSSY_BODY, "stream": True})
    addon.request(f)
    f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    addon.responseheaders(f)
    # top_k, metadata.tier and the estimated message_start input_tokens
    assert f.response.headers[LOSSY_HEADER] == "3"
    for ev in fu.chat_reply("text", "gpt-x", True, True).events:
        f.response.stream(ev)
    f.response.stream(b"")
    addon.response(f)
    kinds = {e["path"]: e["kind"] for e in f.metadata[METADATA_KEY]["lossy"]}
    assert kinds == {"top_k": "dropped", "metadata.tier": "dropped", "message_start.usage.input_tokens": "approximated"}


def test_the_report_survives_a_saved_flow_file(tctx, addon):
    f = whole(tctx, addon, "anthropic", "openai-chat", LOSSY_BODY, CHAT_REPLY)
    buf = io.BytesIO()
    mio.FlowWriter(buf).add(f)
    buf.seek(0)
    (back,) = list(mio.FlowReader(buf).stream())
    assert back.metadata[METADATA_KEY]["lossy"] == f.metadata[METADATA_KEY]["lossy"]


def test_the_recording_carries_the_report(tmp_path):
    rec, tr = Recorder(), Translate()
    with taddons.context(rec, tr) as tctx:
        tctx.configure(tr, dragoman_target="openai-chat", dragoman_upstream="http://up.example/v1")
        tctx.configure(rec, dragoman_record=str(tmp_path / "rec"), dragoman_record_session="s")
        flow = client_flow({**LOSSY_BODY, "stream": True})
        run_request(rec, tr, flow)
        run_stream(rec, tr, flow, fu.chat_reply("text", "claude-x", True, True).events)
        rec_finish(rec, tr, flow)
    ((_, ex),) = list(store.load_exchanges(tmp_path / "rec"))
    assert ex.lossy is not None
    paths = [e["path"] for e in ex.lossy]
    assert sorted(paths) == ["message_start.usage.input_tokens", "metadata.tier", "top_k"]
    assert ex.dropped == paths


def test_the_log_line_names_each_field_once_with_indexes_collapsed(tctx, addon, caplog):
    """30 tools with a cache hint: 30 indexed entries in the metadata and the header, one name in the log."""
    caplog.set_level(logging.INFO)
    tool = {"description": "d", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}
    body = {**BODIES["anthropic"], "tools": [{**tool, "name": f"t{i}"} for i in range(30)]}
    f = whole(tctx, addon, "anthropic", "openai-chat", body, CHAT_REPLY)
    paths = [e["path"] for e in f.metadata[METADATA_KEY]["lossy"]]
    assert paths == [f"tools[{i}].cache_control" for i in range(30)]
    assert f.response.headers[LOSSY_HEADER] == "30"
    lines = [r.getMessage() for r in caplog.records if "lossy translation" in r.getMessage()]
    assert lines == [f"flow {f.id}: lossy translation, 30 not carried as sent (dropped: tools[].cache_control)"]


def test_the_same_losses_are_a_warning_once_then_a_line_at_info(tctx, addon, caplog):
    """Claude Code toward Chat loses the same fields on every request: warned about once, every flow still
    has its line (at INFO); other losses are a WARNING again the first time."""
    caplog.set_level(logging.INFO)
    flows = [whole(tctx, addon, "anthropic", "openai-chat", LOSSY_BODY, CHAT_REPLY) for _ in range(3)]
    other = {k: v for k, v in LOSSY_BODY.items() if k != "top_k"}
    flows.append(whole(tctx, addon, "anthropic", "openai-chat", other, CHAT_REPLY))
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if "lossy translation" in r.getMessage()]
    same = "lossy translation, 2 not carried as sent (dropped: metadata.tier, top_k)"
    assert lines == [
        (logging.WARNING, f"flow {flows[0].id}: {same}"),
        (logging.INFO, f"flow {flows[1].id}: {same}"),
        (logging.INFO, f"flow {flows[2].id}: {same}"),
        (logging.WARNING, f"flow {flows[3].id}: lossy translation, 1 not carried as sent (dropped: metadata.tier)"),
    ]
    assert all(f.metadata[METADATA_KEY]["dropped"] for f in flows)  # the report itself is per flow, unchanged
