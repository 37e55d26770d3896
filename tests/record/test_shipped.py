"""Every shipped recording (recordings/) x every client protocol: the recorded upstream response, translated
as replay translates it (recorded upstream protocol -> client protocol), passes the client's strict
validator, over the recorded chunk boundaries and over ``chunkings`` with identical output. Recorded
clients see what the recording says they saw."""

from __future__ import annotations

import time

import pytest

from conftest import chunkings
from conftest import run_stream
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.record.keys import conversation_key
from dragoman.translate.plan import Plan
from dragoman.translate.response import translate_error
from dragoman.translate.response import translate_response
from dragoman.translate.stream import StreamTranslator
from recordings_loader import EXCHANGES
from recordings_loader import SESSIONS
from recordings_loader import exchange_id
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr

STREAM = {
    Protocol.ANTHROPIC_MESSAGES: va.validate_stream,
    Protocol.OPENAI_CHAT: vc.validate_stream,
    Protocol.OPENAI_RESPONSES: vr.validate_stream,
}
BODY = {
    Protocol.ANTHROPIC_MESSAGES: va.validate_message,
    Protocol.OPENAI_CHAT: vc.validate_completion,
    Protocol.OPENAI_RESPONSES: vr.validate_response,
}
ERROR = {
    Protocol.ANTHROPIC_MESSAGES: va.validate_error_body,
    Protocol.OPENAI_CHAT: vc.validate_error_body,
    Protocol.OPENAI_RESPONSES: vr.validate_error_body,
}


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)


def test_recordings_cover_the_required_sessions():
    assert len(SESSIONS) >= 8
    names = " ".join(SESSIONS)
    for needed in ("text", "thinking", "reasoning", "tools", "error"):
        assert needed in names
    for path, ex in EXCHANGES:
        assert ex.schema_version == 1
        if path.parent.name.startswith("corpus-"):
            assert ex.source and ex.source["license"] and ex.source["repository"], path


@pytest.mark.parametrize("client", list(Protocol), ids=lambda p: p.value)
@pytest.mark.parametrize("path,ex", EXCHANGES, ids=[exchange_id(p) for p, _ in EXCHANGES])
def test_replay_translation_is_valid_for_every_client(path, ex, client):
    upstream = Protocol(ex.upstream_protocol)
    resp = ex.upstream_response
    assert resp is not None
    plan = Plan(client, upstream)
    ctx = Context()
    if client is not Protocol(ex.client_protocol):
        # the request a client of this protocol would send decodes to the recorded conversation's IR
        req_ir = get_codec(Protocol(ex.client_protocol)).decode_request(ex.client_request.body.parsed())
        ctx.request = req_ir
    body = resp.body.raw()
    if not 200 <= resp.status < 300:
        status, out, _ = translate_error(resp.status, body, plan, dict(resp.headers))
        assert status == resp.status
        ERROR[client](out)
        return
    if resp.chunks is None:
        BODY[client](translate_response(body, plan, ctx))
        return
    outputs = set()
    recorded = [c for c, _ in resp.chunk_bytes()]
    for _, pieces in [("recorded", recorded), *chunkings(body, seeds=2)[:3]]:
        c2 = Context(request=ctx.request)
        tr = StreamTranslator(get_codec(upstream).stream_decoder(c2), get_codec(client).stream_encoder(c2))
        outputs.add(run_stream(tr, pieces))
    assert len(outputs) == 1, "output depends on the chunking"
    out = outputs.pop()
    parts = vr.split_streams(out) if client is Protocol.OPENAI_RESPONSES else [out]
    summary = STREAM[client](parts[0])
    if b"error" in body and (summary.error is not None):
        return
    assert summary.text or summary.tool_calls or summary.thinking, "nothing came through"
    if (
        client is Protocol(ex.client_protocol)
        and ex.client_response is not None
        and ex.client_protocol != ex.upstream_protocol
    ):
        assert STREAM[client](ex.client_response.body.raw()).text == summary.text


def test_conversation_keys_exist_for_every_recorded_request():
    for path, ex in EXCHANGES:
        assert conversation_key(ex.client_protocol, ex.client_request.body.parsed()) is not None, path
