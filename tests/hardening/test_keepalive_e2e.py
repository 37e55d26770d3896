"""Keepalives cross over, as a user sees it (issue 11, item 5), through a real mitmdump in reverse mode.

A raw Chat upstream sends one event, then only ``: keepalive`` comments every 0.5 s for 3 s, then the rest.
The official Anthropic SDK (streaming) gets a ``ping`` event for each comment while the upstream is silent,
then the whole text; Chat and Responses clients get ``: keepalive`` comments. Dragoman invents none: a stream
without upstream keepalives carries none beyond the Anthropic framing ping.
"""

from __future__ import annotations

import http.client
import json
import time

import pytest

from dragoman import demo as fu
from e2e.conftest import Proxy

from .rawupstream import RawUpstream
from .rawupstream import chunk
from .rawupstream import sse_head

pytestmark = pytest.mark.e2e

CHAT_EVENTS = fu.chat_reply("text", "m", True, False).events  # role, text deltas, finish, [DONE]
QUIET = 6  # comments, 0.5 s apart


def script(seen):
    head = [sse_head(), chunk(CHAT_EVENTS[0])]
    rest = [*[chunk(e) for e in CHAT_EVENTS[1:]], b"0\r\n\r\n"]
    if seen.headers.get("x-fault") == "quiet":
        return [*head, *[x for _ in range(QUIET) for x in (("sleep", 0.5), chunk(b": keepalive\n\n"))], *rest]
    return [*head, *rest]


@pytest.fixture(scope="module")
def upstream():
    with RawUpstream(script) as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    p = Proxy("openai-chat", upstream, tmp_path_factory.mktemp("keepalive"))
    yield p
    p.stop()


def test_anthropic_sdk_sees_pings_during_the_upstream_silence(proxy):
    """The SDK hides ``ping`` events from its event iterator (they only keep its read timeout alive), so the
    stream is read through the SDK's own streaming response, line by line as the SDK's transport gets them."""
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{proxy.port}", api_key="sk-test", max_retries=0)
    t0 = time.monotonic()
    seen: list[tuple[str, float]] = []
    text = ""
    with client.messages.with_streaming_response.create(
        model="m",
        max_tokens=50,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        extra_headers={"x-fault": "quiet"},
    ) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("event: "):
                seen.append((line[7:], time.monotonic() - t0))
            elif line.startswith("data: "):
                obj = json.loads(line[6:])
                if obj["type"] == "content_block_delta" and obj["delta"]["type"] == "text_delta":
                    text += obj["delta"]["text"]
    assert text == fu.TEXT
    kinds = [k for k, _ in seen]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds
    first_text = next(t for k, t in seen if k == "content_block_delta")
    pings = [t for k, t in seen if k == "ping"]
    # one ping per upstream comment (+ the framing ping after the first content_block_start)
    assert len(pings) == QUIET + 1, kinds
    # the upstream's silence lasts 3 s: at least two pings arrived well before the text that followed it
    early = [t for t in pings if t < first_text - 1.0]
    assert len(early) >= 2, f"pings did not arrive while the upstream was silent: {seen}"


def raw_stream(proxy: Proxy, path: str, body: dict, fault: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json", "x-fault": fault})
    resp = conn.getresponse()
    assert resp.status == 200
    data = resp.read()
    conn.close()
    return data


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/chat/completions", {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/responses", {"model": "m", "stream": True, "input": "hi"}),
        (
            "/v1/messages",
            {"model": "m", "stream": True, "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]},
        ),
    ],
    ids=["chat", "responses", "anthropic"],
)
def test_keepalives_cross_over_and_none_is_invented(proxy, path, body):
    quiet = raw_stream(proxy, path, body, "quiet")
    plain = raw_stream(proxy, path, body, "none")
    if path == "/v1/chat/completions":
        # the same protocol: the upstream's bytes pass through, comments included
        assert quiet.count(b": keepalive\n\n") == QUIET and b": keepalive" not in plain
    elif path == "/v1/responses":
        assert quiet.count(b": keepalive\n\n") == QUIET and b": keepalive" not in plain
    else:
        assert quiet.count(b"event: ping\n") == QUIET + 1 and plain.count(b"event: ping\n") == 1
        assert b": keepalive" not in quiet
