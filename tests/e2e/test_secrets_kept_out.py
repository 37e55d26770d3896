"""Secrets are never kept or echoed, against a real mitmdump run the way a user debugging would run it
(``-w flows`` and ``--set flow_detail=4``):

- the configured key leaves the flow once the request is sent: the flow file and the console never hold it,
  nor the client's own key when Dragoman moves it to the upstream (no configured key);
- an upstream error quoting the key it received reaches the client with the key masked (JSON error bodies,
  an error event mid-stream; same protocol and translated);
- the client's credentials for any provider (Authorization, x-api-key, api-key, x-goog-api-key, ``?key=``,
  ``?api_key=``, ``?access_token=``, ``?token=``) never travel upstream beside the configured key.
"""

from __future__ import annotations

import json
import secrets
import threading

import pytest

from dragoman.demo import FakeUpstream
from dragoman.demo import Reply
from dragoman.demo import Request
from dragoman.demo.wire import sse

from .hostile import Attacker
from .hostile import Mitmdump
from .hostile import http_request
from .hostile import send_direct
from .hostile import status_of
from .hostile import wait_for

pytestmark = pytest.mark.e2e

CANARY = "sk-ant-canary-" + secrets.token_hex(12)
CLIENT_CANARY = "sk-client-canary-" + secrets.token_hex(12)
#: the client's credentials for other providers, and where it sends them
OTHER = {
    "api-key": "azure-client-secret-" + secrets.token_hex(6),
    "x-goog-api-key": "goog-client-secret-" + secrets.token_hex(6),
    "authorization": "Bearer openai-client-secret-" + secrets.token_hex(6),
}
QUERY_SECRETS = {name: f"q-{name}-{secrets.token_hex(6)}" for name in ("key", "api_key", "access_token", "token")}
QUERY = "&".join(f"{k}={v}" for k, v in QUERY_SECRETS.items()) + "&beta=true"
ALL_CLIENT_SECRETS = [CLIENT_CANARY, *OTHER.values(), *QUERY_SECRETS.values()]
ALL_CLIENT_SECRETS = [s.removeprefix("Bearer ") for s in ALL_CLIENT_SECRETS]


def answer(request: Request) -> Reply:
    """Anthropic upstream: a normal answer, or one that quotes the key it received (``echo-*`` models)."""
    key = request.headers.get("x-api-key", "")
    if request.model == "echo-error":  # a request-bound error: the key does not rest
        err = {"type": "error", "error": {"type": "invalid_request_error", "message": f"bad request with key {key}"}}
        return Reply(400, {"x-echo-key": key}, json_body=err)
    if request.model == "echo-auth":  # the key rests after this one: asked last
        err = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key: {key}"}}
        return Reply(401, {"x-echo-key": key}, json_body=err)
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 0},
    }
    if request.model == "echo-stream-error":
        err = {"type": "error", "error": {"type": "overloaded_error", "message": f"key {key} is overloaded"}}
        events = [sse({"type": "message_start", "message": message}, "message_start"), sse(err, "error")]
        return Reply(headers={"x-echo-key": key}, events=events)
    text = {**message, "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn"}
    if not request.stream:
        return Reply(json_body=text)
    return Reply(
        events=[
            sse({"type": "message_start", "message": message}, "message_start"),
            sse(
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                "content_block_start",
            ),
            sse(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hello"}},
                "content_block_delta",
            ),
            sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            sse(
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
                "message_delta",
            ),
            sse({"type": "message_stop"}, "message_stop"),
        ]
    )


def call(proxy: Mitmdump, path: str, body: dict | None, key: str = CLIENT_CANARY, method: str = "POST") -> bytes:
    headers = {"host": "localhost", "x-api-key": key, "anthropic-version": "2023-06-01", **OTHER}
    data = json.dumps(body).encode() if body is not None else b""
    if body is not None:
        headers["content-type"] = "application/json"
    return send_direct(proxy.port, http_request(method, f"{path}?{QUERY}", headers, data))


def messages(model: str, stream: bool) -> dict:
    return {"model": model, "max_tokens": 16, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}


def chat(model: str, stream: bool) -> dict:
    return {"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}


#: (path, body): every kind of call, same protocol (anthropic) and translated (chat, responses)
CALLS = [
    ("/v1/messages", messages("claude-x", False)),
    ("/v1/messages", messages("claude-x", True)),
    ("/v1/chat/completions", chat("gpt-x", False)),
    ("/v1/chat/completions", chat("gpt-x", True)),
    ("/v1/responses", {"model": "gpt-x", "input": "hi", "stream": True}),
    ("/v1/messages/count_tokens", messages("claude-x", False)),
    ("/v1/models", None),
]
ECHOES = [
    ("/v1/messages", messages("echo-error", False)),
    ("/v1/messages", messages("echo-error", True)),
    ("/v1/messages", messages("echo-stream-error", True)),
    ("/v1/chat/completions", chat("echo-error", False)),
    ("/v1/chat/completions", chat("echo-error", True)),
    ("/v1/chat/completions", chat("echo-stream-error", True)),
    ("/v1/responses", {"model": "echo-stream-error", "input": "hi", "stream": True}),
    ("/v1/messages", messages("echo-auth", False)),
]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """A configured key; every kind of call and echo made once; then mitmdump stopped (flow file complete)."""
    workdir = tmp_path_factory.mktemp("secrets")
    upstream = FakeUpstream(answer=answer).start()
    flows = workdir / "flows.mitm"
    proxy = Mitmdump(
        workdir,
        "--mode",
        f"reverse:{upstream.url}",
        "--set",
        "dragoman_target=anthropic",
        "--set",
        f"dragoman_upstream={upstream.url}",
        "--set",
        f"dragoman_api_key={CANARY}",
        "-w",
        str(flows),
        "--set",
        "flow_detail=4",
    )
    answers = {}
    for path, body in CALLS + ECHOES:
        method = "GET" if body is None else "POST"
        answers[(path, json.dumps(body))] = call(proxy, path, body, method=method)
    proxy.stop()
    yield {"upstream": upstream, "answers": answers, "flows": flows.read_bytes(), "log": proxy.log()}
    upstream.stop()


def test_the_upstream_got_the_configured_key_and_no_client_credential(keyed):
    seen = keyed["upstream"].requests
    assert seen, keyed["log"][-3000:]
    assert {r.headers.get("x-api-key") for r in seen} == {CANARY}
    for r in seen:
        sent = json.dumps([r.path, r.headers])
        for secret in ALL_CLIENT_SECRETS:
            assert secret not in sent, (secret, sent)


def test_answers_are_ok(keyed):
    for (path, body), ans in keyed["answers"].items():
        if "echo" in body or "count_tokens" in path:
            continue
        assert status_of(ans) == 200, (path, body, ans[:600])


def test_flow_file_holds_no_secret(keyed):
    data = keyed["flows"]
    assert data.count(b"/v1/messages") > 3  # the flows are there
    assert CANARY.encode() not in data
    for secret in ALL_CLIENT_SECRETS:
        assert secret.encode() not in data, secret


def test_console_at_flow_detail_4_shows_no_secret(keyed):
    log = keyed["log"]
    assert "/v1/messages" in log and "x-api-key" not in log.split("Loading script", 1)[0]
    assert CANARY not in log
    for secret in ALL_CLIENT_SECRETS:
        assert secret not in log, secret


@pytest.mark.parametrize("path, body", ECHOES, ids=[f"{p}-{b['model']}-{b['stream']}" for p, b in ECHOES])
def test_an_upstream_quoting_the_key_reaches_the_client_masked(keyed, path, body):
    ans = keyed["answers"][(path, json.dumps(body))]
    assert CANARY.encode() not in ans, ans[:2000]
    assert b"key masked by Dragoman" in ans, ans[:2000]


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
    """No configured key: the client's own key moves to the upstream, and leaves the flow after the send."""
    workdir = tmp_path_factory.mktemp("secrets-own")
    upstream = FakeUpstream(answer=answer).start()
    flows = workdir / "flows.mitm"
    proxy = Mitmdump(
        workdir,
        "--mode",
        f"reverse:{upstream.url}",
        "--set",
        "dragoman_target=anthropic",
        "--set",
        f"dragoman_upstream={upstream.url}",
        "-w",
        str(flows),
        "--set",
        "flow_detail=4",
    )
    answers = [
        call(proxy, "/v1/messages", messages("claude-x", True)),
        call(proxy, "/v1/chat/completions", chat("gpt-x", False)),
        call(proxy, "/v1/messages/count_tokens", messages("claude-x", False)),
    ]
    proxy.stop()
    yield {"upstream": upstream, "answers": answers, "flows": flows.read_bytes(), "log": proxy.log()}
    upstream.stop()


def test_the_clients_own_key_leaves_the_flow_after_the_send(moved):
    assert [status_of(a) for a in moved["answers"][:2]] == [200, 200], moved["answers"]
    assert CLIENT_CANARY in {r.headers.get("x-api-key") for r in moved["upstream"].requests}
    assert moved["flows"].count(b"/v1/messages") > 1
    assert CLIENT_CANARY.encode() not in moved["flows"]
    assert CLIENT_CANARY not in moved["log"]


def test_a_flow_in_flight_at_shutdown_is_saved_without_the_key(tmp_path):
    """mitmproxy's save addon writes the flows still in flight when it stops: their credentials go first."""
    silent = Attacker(answer=False)  # the configured upstream here: takes the request, never answers
    flows = tmp_path / "flows.mitm"
    proxy = Mitmdump(
        tmp_path,
        "--mode",
        f"reverse:{silent.url}",
        "--set",
        "dragoman_target=anthropic",
        "--set",
        f"dragoman_upstream={silent.url}",
        "--set",
        f"dragoman_api_key={CANARY}",
        "-w",
        str(flows),
    )
    try:
        raw = http_request("POST", "/v1/messages", {"host": "localhost", "content-type": "application/json"}, b"")
        body = json.dumps(messages("claude-x", True)).encode()
        raw = raw.replace(b"content-length: 0", f"content-length: {len(body)}".encode()) + body
        client = threading.Thread(target=send_direct, args=(proxy.port, raw), daemon=True)
        client.start()
        assert wait_for(lambda: silent.saw(CANARY), 20), proxy.log()[-3000:]  # sent, and no answer yet
    finally:
        proxy.stop()
        silent.stop()
    data = flows.read_bytes()
    assert b"/v1/messages" in data, proxy.log()[-3000:]  # the in-flight flow was saved
    assert CANARY.encode() not in data
