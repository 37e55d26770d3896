"""Secrets, bad requests and concurrency through a real mitmdump (issue 7, items 4-6)."""

from __future__ import annotations

import http.client
import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from e2e.conftest import Proxy
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr

from .rawupstream import RawUpstream
from .rawupstream import chunk
from .rawupstream import sse_head

pytestmark = pytest.mark.e2e

SECRET = "sk-dragoman-upstream-SECRET-0123456789"
CLIENT_SECRET = "sk-client-own-SECRET-abcdef"


def chat_events(token: str) -> list[bytes]:
    def c(delta, fr=None):
        obj = {
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": fr}],
        }
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    pieces = [token[i : i + 3] for i in range(0, len(token), 3)]
    return [
        c({"role": "assistant", "content": ""}),
        *[c({"content": p}) for p in pieces],
        c({}, "stop"),
        b"data: [DONE]\n\n",
    ]


def script(seen):
    """Echo the token of the last user message back, split into small deltas."""
    try:
        msgs = seen.json()["messages"]
        token = msgs[-1]["content"] if isinstance(msgs[-1]["content"], str) else msgs[-1]["content"][0]["text"]
    except Exception:  # noqa: BLE001
        token = "?"
    return [sse_head(), *[chunk(e) for e in chat_events(token)], b"0\r\n\r\n"]


@pytest.fixture(scope="module")
def upstream():
    with RawUpstream(script) as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    import os

    os.environ["DRAGOMAN_TEST_UPSTREAM_KEY"] = SECRET  # inherited by mitmdump
    p = Proxy(
        "openai-chat",
        upstream,
        tmp_path_factory.mktemp("proxy"),
        ["--set", "dragoman_api_key=env:DRAGOMAN_TEST_UPSTREAM_KEY", "--set", "flow_detail=1"],
    )
    yield p
    p.stop()


CLIENTS = {
    "anthropic": ("/v1/messages", va.validate_stream, va.validate_error_body),
    "openai-responses": ("/v1/responses", vr.validate_stream, vr.validate_error_body),
    "openai-chat": ("/v1/chat/completions", vc.validate_stream, vc.validate_error_body),
}


def body_for(client: str, token: str, **extra) -> dict:
    if client == "anthropic":
        b = {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": token}]}
    elif client == "openai-responses":
        b = {"model": "m", "stream": True, "input": [{"role": "user", "content": token}]}
    else:
        b = {"model": "m", "stream": True, "messages": [{"role": "user", "content": token}]}
    b.update(extra)
    return b


def post(proxy: Proxy, client: str, payload: bytes, headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    h = {
        "content-type": "application/json",
        "x-api-key": CLIENT_SECRET,
        "authorization": f"Bearer {CLIENT_SECRET}",
        "cookie": f"session={CLIENT_SECRET}",
    }
    h.update(headers or {})
    conn.request("POST", CLIENTS[client][0], payload, h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def test_client_credentials_never_reach_upstream_nor_logs(proxy, upstream):
    token = "secret-check-token"
    status, data = post(proxy, "anthropic", json.dumps(body_for("anthropic", token)).encode())
    assert status == 200, data[:300]
    assert va.validate_stream(data).text == token
    seen = [s for s in upstream.seen if token.encode() in s.body][-1]
    dump = json.dumps(seen.headers)
    assert CLIENT_SECRET not in dump and "cookie" not in seen.headers
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    time.sleep(0.3)
    log = proxy.log()
    assert SECRET not in log and CLIENT_SECRET not in log, "a key reached mitmdump's output"


@pytest.mark.parametrize(
    "client, payload, needle",
    [
        ("anthropic", b"{not json", "JSON"),
        ("openai-chat", b"[1, 2]", ""),
        ("anthropic", json.dumps({"model": "m", "max_tokens": "many", "messages": []}).encode(), "max_tokens"),
        ("openai-chat", json.dumps({"model": "m", "messages": "hi"}).encode(), "messages"),
        ("openai-responses", json.dumps({"model": 5, "input": "hi"}).encode(), "model"),
    ],
)
def test_bad_requests_get_400_in_client_shape_and_nothing_is_forwarded(proxy, upstream, client, payload, needle):
    before = len(upstream.seen)
    status, data = post(proxy, client, payload)
    assert status == 400, data[:300]
    err = CLIENTS[client][2](data)
    assert needle.lower() in json.dumps(err).lower()
    time.sleep(0.1)
    assert len(upstream.seen) == before, "an invalid request was forwarded"


def test_200_concurrent_streams_no_cross_talk(proxy):
    clients = list(CLIENTS)

    def one(i: int):
        client = clients[i % 3]
        token = f"tok{i:04d}-" + "abcdefghij"[i % 10] * (i % 7 + 1)
        status, data = post(proxy, client, json.dumps(body_for(client, token)).encode())
        assert status == 200, data[:200]
        s = CLIENTS[client][1](data)
        assert s.error is None and s.text == token, (client, token, s.text)
        return True

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=200) as ex:
        results = list(ex.map(one, range(200)))
    elapsed = time.monotonic() - t0
    print(f"\n200 concurrent streams in {elapsed:.1f} s, 0 cross-talk")
    assert all(results)
