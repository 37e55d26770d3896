"""Per-flow state is released after every flow (issue 7, item 4): no growth over 2,000 sequential flows.

The addons are driven with taddons/tflow in mitmproxy's addon-list order (Recorder.before, Translate,
Recorder) through every way a flow can end: a streamed answer, a whole JSON answer, an upstream error
status, a request rejected with 400, a connection failure mid-stream and before any response. After
each flow the per-flow dicts (Translate's ``FlowStates``, the Recorder's ``pending``, the Replayer's
``tokens``/``flow_tokens``) are empty, and at the end no flow object is still referenced by an addon.
"""

from __future__ import annotations

import asyncio
import gc
import json
import weakref

from mitmproxy import flow as mflow
from mitmproxy import http
from mitmproxy.proxy import mode_specs
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman import demo as fu
from dragoman.mitm.recording import files as store
from dragoman.mitm.recording.recorder import Recorder
from dragoman.mitm.recording.replayer import TOKEN_HEADER
from dragoman.mitm.recording.replayer import Replayer
from dragoman.mitm.translate_addon import Translate
from dragoman.record.model import Body
from dragoman.record.model import Exchange
from dragoman.record.model import HttpRequest
from dragoman.record.model import HttpResponse

N_FLOWS = 2000
PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}
BODIES = {
    "anthropic": {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    "openai-chat": {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    "openai-responses": {"model": "m", "max_output_tokens": 64, "input": "hi"},
}
CLIENTS = list(PATHS)
REVERSE = mode_specs.ProxyMode.parse("reverse:http://up.example")
SSE = b"".join(fu.chat_reply("text", "m", True, True).events)
SSE_PIECES = [SSE[i : i + 97] for i in range(0, len(SSE), 97)]
ENDINGS = [
    "stream",
    "json",
    "upstream_500",
    "rejected",
    "error_mid_stream",
    "error_before_response",
    "stream_cut_at_headers",
]


def client_flow(client: str, stream: bool, body: bytes | None = None) -> http.HTTPFlow:
    raw = body if body is not None else json.dumps(dict(BODIES[client], stream=stream)).encode()
    req = http.Request.make(
        "POST",
        f"http://client.example:8080{PATHS[client]}",
        raw,
        {"content-type": "application/json", "x-api-key": "k"},
    )
    f = tflow.tflow(req=req)
    f.client_conn.proxy_mode = REVERSE  # a client pointed at the proxy by a base URL: every endpoint path is ours
    return f


def chat_json() -> bytes:
    return json.dumps(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


def drive(rec: Recorder, tr: Translate, f: http.HTTPFlow, ending: str) -> bytes:
    """Run one flow through the hooks the way mitmproxy does for ``ending``; returns the client's bytes."""
    rec.before.request(f)
    tr.request(f)
    rec.request(f)
    if ending == "rejected":
        assert f.response is not None and f.response.status_code == 400
        rec.before.response(f)
        tr.response(f)
        rec.response(f)
        return f.response.content or b""
    if ending == "error_before_response":
        f.error = mflow.Error("connection refused")
        tr.error(f)
        rec.error(f)
        return b""
    if ending == "json":
        f.response = http.Response.make(200, chat_json(), {"content-type": "application/json"})
    elif ending == "upstream_500":
        f.response = http.Response.make(
            500, b'{"error":{"message":"boom","type":"server_error"}}', {"content-type": "application/json"}
        )
    else:
        f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
        f.response.raw_content = None
    rec.before.responseheaders(f)
    tr.responseheaders(f)
    rec.responseheaders(f)
    out = bytearray()
    if ending in ("stream", "error_mid_stream", "stream_cut_at_headers"):
        fn = f.response.stream
        assert callable(fn)
        pieces = SSE_PIECES if ending == "stream" else SSE_PIECES[:2] if ending == "error_mid_stream" else []
        for p in pieces:
            r = fn(p)
            out += r if isinstance(r, bytes) else b"".join(r)
        if ending != "stream":
            f.error = mflow.Error("peer closed connection")
            tr.error(f)
            rec.error(f)
            return bytes(out)
        r = fn(b"")
        out += r if isinstance(r, bytes) else b"".join(r)
    rec.before.response(f)
    tr.response(f)
    rec.response(f)
    return bytes(out) or (f.response.content or b"")


def test_no_per_flow_state_survives_2000_sequential_flows(tmp_path):
    rec, tr = Recorder(), Translate()
    refs: list[weakref.ref] = []
    max_live = 0
    with taddons.context(rec, tr) as tctx:
        tctx.configure(
            tr, dragoman_target="openai-chat", dragoman_upstream="http://up.example/v1", dragoman_idle_timeout=30
        )
        tctx.configure(rec, dragoman_record=str(tmp_path / "rec"), dragoman_record_session="s")
        for i in range(N_FLOWS):
            ending = ENDINGS[i % len(ENDINGS)]
            client = CLIENTS[i % 3]
            f = client_flow(
                client, stream=ending not in ("json", "upstream_500"), body=b"{bad" if ending == "rejected" else None
            )
            out = drive(rec, tr, f, ending)
            if ending == "stream":
                assert b"Hello" in out or b"Hel" in out, out[:200]
            max_live = max(max_live, len(tr.flows), len(rec.pending))
            assert len(tr.flows) == 0, f"flow {i} ({ending}) left a Translate FlowState"
            assert not rec.pending, f"flow {i} ({ending}) left a Recorder pending entry"
            refs.append(weakref.ref(f))
            del f
        rec.wait()  # the Recorder writes on its own thread
        assert rec.written == N_FLOWS, rec.written  # every flow was recorded (the Recorder was live)
    gc.collect()
    alive = sum(1 for r in refs if r() is not None)
    assert alive == 0, f"{alive} of {N_FLOWS} flows are still referenced after they ended"
    assert max_live == 0


def _write_recording(folder) -> None:
    chunks = [SSE[:100], SSE[100:]]
    ex = Exchange(
        client_protocol="anthropic",
        upstream_protocol="openai-chat",
        client_request=HttpRequest(url="http://x/v1/messages", body=Body(json=dict(BODIES["anthropic"], stream=True))),
        upstream_response=HttpResponse(
            status=200,
            headers=[("content-type", "text/event-stream")],
            body=Body.of(SSE),
            chunks=[(0, 0.0), (len(chunks[0]), 0.0)],
        ),
    )
    store.write_atomic(folder / "001-a.json", ex.to_json())


async def _fetch(port: int, token: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{TOKEN_HEADER}: {token}\r\ncontent-length: 2\r\n\r\n{{}}".encode()
    )
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


def test_replayer_tokens_are_released_for_served_rejected_and_failed_flows(tmp_path):
    _write_recording(tmp_path)
    n = 300

    async def main():
        rp, tr = Replayer(), Translate()
        with taddons.context(rp, tr) as tctx:
            tctx.configure(rp, dragoman_replay=str(tmp_path), dragoman_replay_speed="0")
            tctx.configure(tr, dragoman_target="openai-chat")
            for i in range(n):
                kind = ("served", "rejected", "failed")[i % 3]
                body = b"{bad" if kind == "rejected" else None
                f = client_flow("anthropic", stream=True, body=body)
                if body is not None:  # matching ignores the body when it is not JSON: make it match anyway
                    rp.unmatched = "next"
                await rp.before.request(f)
                tr.request(f)
                rp.request(f)
                rp.unmatched = "error"
                if kind == "served":
                    data = await _fetch(rp.port, f.request.headers[TOKEN_HEADER])
                    assert b"200 OK" in data.split(b"\r\n", 1)[0]
                elif kind == "failed":  # the client went away before the upstream request was sent
                    f.error = mflow.Error("client disconnected")
                    tr.error(f)
                    rp.error(f)
                assert not rp.flow_tokens, f"flow {i} ({kind}) left a flow token"
                assert not rp.tokens, f"flow {i} ({kind}) left a replay token"
                assert len(tr.flows) == 0 or kind == "served"
                tr.flows.pop(f.id)
            rp.done()

    asyncio.run(main())
