"""Through a real mitmdump toward an Anthropic upstream (issue 7, items 4 and 6):

* requests the target cannot serve (``n > 1`` from a Chat client, ``previous_response_id`` from a
  Responses client) get a 400 in the client's own error shape with a clear message, and the upstream
  receives nothing;
* 300 sequential streamed flows leave no per-flow state behind: the addon's DEBUG line at the end of
  every flow reports the flows still in flight, which must be 0 each time (and RSS stays flat).
"""

from __future__ import annotations

import http.client
import json
import re
import time
from pathlib import Path

import pytest

from dragoman import demo as fu
from e2e.conftest import Proxy
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr

from .rawupstream import RawUpstream
from .rawupstream import chunk
from .rawupstream import sse_head

pytestmark = pytest.mark.e2e

ANTHROPIC_EVENTS = fu.anthropic_reply("text", "m", True).events
PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}
VALIDATE = {"anthropic": va.validate_stream, "openai-chat": vc.validate_stream, "openai-responses": vr.validate_stream}
RELEASED = re.compile(r"state released, (\d+) flows in flight")


def script(seen):
    # one write: many small writes meet Nagle + delayed ACK (~40 ms a flow) on the keep-alive connection
    return [sse_head() + b"".join(chunk(e) for e in ANTHROPIC_EVENTS) + b"0\r\n\r\n"]


@pytest.fixture(scope="module")
def upstream():
    with RawUpstream(script) as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    p = Proxy("anthropic", upstream, tmp_path_factory.mktemp("proxy"))
    yield p
    p.stop()


def body_for(client: str, **extra) -> dict:
    if client == "anthropic":
        b = {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    elif client == "openai-responses":
        b = {"model": "m", "stream": True, "input": "hi"}
    else:
        b = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    b.update(extra)
    return b


def post(conn: http.client.HTTPConnection, client: str, body: dict) -> tuple[int, bytes]:
    conn.request(
        "POST", PATHS[client], json.dumps(body).encode(), {"content-type": "application/json", "x-api-key": "k"}
    )
    r = conn.getresponse()
    return r.status, r.read()


@pytest.mark.parametrize(
    "client, extra, needle, validate",
    [
        ("openai-chat", {"n": 2}, "n > 1", vc.validate_error_body),
        ("openai-responses", {"previous_response_id": "resp_123"}, "previous_response_id", vr.validate_error_body),
    ],
    ids=["chat-n2", "responses-previous_response_id"],
)
def test_unservable_request_gets_400_in_client_shape_and_nothing_is_forwarded(
    proxy, upstream, client, extra, needle, validate
):
    before = len(upstream.seen)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    try:
        status, data = post(conn, client, body_for(client, **extra))
    finally:
        conn.close()
    assert status == 400, data[:300]
    err = validate(data)  # the OpenAI error shape: {"error": {"message", "type", "param", "code"}}
    assert needle in err["message"], err
    assert err["type"] == "invalid_request_error"
    time.sleep(0.2)
    assert len(upstream.seen) == before, "a request the target cannot serve was forwarded"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_300_sequential_flows_leave_no_flow_state(proxy, upstream):
    clients = ["openai-chat", "openai-responses", "anthropic"]  # anthropic -> anthropic: the identity path
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    rss = []
    try:
        for i in range(300):
            client = clients[i % 3]
            status, data = post(conn, client, body_for(client))
            assert status == 200, data[:300]
            s = VALIDATE[client](data)
            assert s.error is None and s.text == fu.TEXT
            if i in (49, 299):
                rss.append(_rss_kib(proxy.proc.pid))
    finally:
        conn.close()
    deadline = time.monotonic() + 5
    counts: list[int] = []
    while time.monotonic() < deadline:  # the log is written asynchronously
        counts = [int(n) for n in RELEASED.findall(proxy.log_path.read_text(errors="replace"))]
        if len(counts) >= 300:
            break
        time.sleep(0.1)
    assert len(counts) >= 300, f"only {len(counts)} 'state released' lines in the mitmdump log"
    assert set(counts) == {0}, f"flows still in flight after sequential flows ended: {sorted(set(counts))}"
    growth = rss[1] - rss[0]
    print(f"\n300 sequential flows: 0 flow states left; mitmdump RSS {rss[0]} -> {rss[1]} KiB ({growth:+d})")
    assert growth < 20_000, f"mitmdump RSS grew by {growth} KiB over 250 flows"
