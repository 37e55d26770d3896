"""The Replayer: options, matching, the per-flow target, and the in-process upstream's playback (timing,
chunk boundaries, truncation). Hooks called directly; the only socket is the replay server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman.mitm.flowstate import TARGET_OVERRIDE_KEY
from dragoman.mitm.recording import files as store
from dragoman.mitm.recording.replayer import TOKEN_HEADER
from dragoman.mitm.recording.replayer import Replayer
from dragoman.mitm.recording.replayer import parse_speed
from dragoman.record.model import Body
from dragoman.record.model import Exchange
from dragoman.record.model import HttpRequest
from dragoman.record.model import HttpResponse

BODY = {
    "model": "claude-x",
    "max_tokens": 64,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
    "metadata": {"user_id": "a"},
}
CHUNKS = [b"data: one\n\n", b"data: t", b"wo\n\n", b"data: [DONE]\n\n"]
TIMES = [0.0, 0.1, 0.1, 0.25]


def write_session(folder: Path, truncated: bool = False) -> None:
    offsets, pos = [], 0
    for c, t in zip(CHUNKS, TIMES, strict=True):
        offsets.append((pos, t))
        pos += len(c)
    ex = Exchange(
        client_protocol="anthropic",
        upstream_protocol="openai-chat",
        client_request=HttpRequest(url="http://x/v1/messages", body=Body(json=BODY)),
        upstream_response=HttpResponse(
            status=200,
            headers=[("content-type", "text/event-stream"), ("content-length", "9")],
            body=Body.of(b"".join(CHUNKS)),
            chunks=offsets,
            truncated=truncated,
        ),
    )
    store.write_atomic(folder / "001-a.json", ex.to_json())
    (folder / "expected.json").write_text("{}")  # not an exchange: skipped


def client_flow(body: dict) -> http.HTTPFlow:
    req = http.Request.make(
        "POST", "https://api.anthropic.com/v1/messages", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    return tflow.tflow(req=req)


def test_parse_speed():
    assert parse_speed("1") == 1.0 and parse_speed("0") == 0.0 and parse_speed("2.5") == 2.5
    for bad in ("-1", "fast", "nan", "inf"):
        with pytest.raises(ValueError):
            parse_speed(bad)


def test_options_are_validated(tmp_path):
    rp = Replayer()
    with taddons.context(rp) as tctx:
        with pytest.raises(exceptions.OptionsError, match="dragoman_replay_speed"):
            tctx.configure(rp, dragoman_replay_speed="-2")
        with pytest.raises(exceptions.OptionsError, match="Cannot load"):
            tctx.configure(rp, dragoman_replay=str(tmp_path / "missing"))
        with pytest.raises(exceptions.OptionsError, match="no recorded exchanges"):
            tctx.configure(rp, dragoman_replay=str(tmp_path))
        (tmp_path / "bad.json").write_text('{"schema_version": 1}')
        with pytest.raises(exceptions.OptionsError, match="not a valid exchange"):
            tctx.configure(rp, dragoman_replay=str(tmp_path))
        with pytest.raises(exceptions.OptionsError, match="unmatched"):
            tctx.configure(rp, dragoman_replay_unmatched="maybe")


def run(coro):
    return asyncio.run(coro)


async def fetch(port: int, token: str) -> tuple[bytes, list[tuple[bytes, float]]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{TOKEN_HEADER}: {token}\r\ncontent-length: 2\r\n\r\n{{}}".encode()
    )
    await writer.drain()
    t0 = time.monotonic()
    head = await reader.readuntil(b"\r\n\r\n")
    got = []
    while b"chunked" in head:
        size_line = await reader.readline()
        if not size_line:
            break
        size = int(size_line.strip(), 16)
        if size == 0:
            break
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        got.append((data, time.monotonic() - t0))
    writer.close()
    return head, got


def test_matching_request_is_played_with_original_chunks_and_timing(tmp_path):
    write_session(tmp_path)

    async def main():
        rp = Replayer()
        with taddons.context(rp) as tctx:
            tctx.configure(rp, dragoman_replay=str(tmp_path))
            flow = client_flow(dict(BODY, metadata={"user_id": "b"}))
            await rp.before.request(flow)
            assert flow.metadata[TARGET_OVERRIDE_KEY] == "openai-chat"
            rp.request(flow)
            assert (flow.request.host, flow.request.port) == ("127.0.0.1", rp.port)
            head, got = await fetch(rp.port, flow.request.headers[TOKEN_HEADER])
            rp.done()
            return head, got

    head, got = run(main())
    assert b"HTTP/1.1 200" in head and b"transfer-encoding: chunked" in head and b"content-length: 9" not in head
    assert [d for d, _ in got] == CHUNKS
    # never before its recorded offset (how late depends on the machine: no upper bound here)
    for (_, t), want in zip(got, TIMES, strict=True):
        assert t >= want - 0.01, (t, want)


def test_speed_zero_and_truncated_stream(tmp_path):
    write_session(tmp_path, truncated=True)

    async def main():
        rp = Replayer()
        with taddons.context(rp) as tctx:
            tctx.configure(rp, dragoman_replay=str(tmp_path / "001-a.json"), dragoman_replay_speed="0")
            flow = client_flow(BODY)
            await rp.before.request(flow)
            rp.request(flow)
            got = await fetch(rp.port, flow.request.headers[TOKEN_HEADER])
            bad = await fetch(rp.port, "unknown")
            rp.done()
            return got, bad

    (head, got), (bad_head, _) = run(main())
    assert [d for d, _ in got] == CHUNKS and got[-1][1] < TIMES[-1]  # not paced: ahead of the recording
    assert b"502" in bad_head


def test_unmatched_error_forward_next(tmp_path):
    write_session(tmp_path)
    other = dict(BODY, messages=[{"role": "user", "content": "something else"}])

    async def main():
        rp = Replayer()
        with taddons.context(rp) as tctx:
            tctx.configure(rp, dragoman_replay=str(tmp_path))
            f1 = client_flow(other)
            await rp.before.request(f1)
            tctx.configure(rp, dragoman_replay_unmatched="forward")
            f2 = client_flow(other)
            await rp.before.request(f2)
            tctx.configure(rp, dragoman_replay_unmatched="next")
            f3 = client_flow(other)
            await rp.before.request(f3)
            rp.done()
            return f1, f2, f3

    f1, f2, f3 = run(main())
    assert f1.response.status_code == 404
    err = json.loads(f1.response.content)
    assert err["type"] == "error" and "no recorded exchange" in err["error"]["message"]  # Anthropic's shape
    assert f2.response is None and TARGET_OVERRIDE_KEY not in f2.metadata
    assert f3.response is None and f3.metadata[TARGET_OVERRIDE_KEY] == "openai-chat"


def test_a_flow_answered_by_translate_is_not_redirected(tmp_path):
    write_session(tmp_path)

    async def main():
        rp = Replayer()
        with taddons.context(rp) as tctx:
            tctx.configure(rp, dragoman_replay=str(tmp_path))
            flow = client_flow(BODY)
            await rp.before.request(flow)
            flow.response = http.Response.make(400)
            rp.request(flow)
            rp.done()
            return rp, flow

    rp, flow = run(main())
    assert not rp.tokens and flow.request.host == "api.anthropic.com"
