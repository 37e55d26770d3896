"""Explicit-proxy (regular) mode, offline: clients talk TLS to the official host names through mitmdump, which
must not dial them (connection_strategy=lazy, set by the addon) and routes their calls to local upstreams.

mitmdump runs with a temporary confdir; its CA is trusted by the clients (``verify=`` / ``cafile=``). The raw
calls use urllib (works on the 3.11 venv too); the SDK calls need the anthropic/openai SDKs.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from dragoman.demo import FakeUpstream
from dragoman.demo import Reply
from dragoman.demo import Request

from .conftest import SCRIPT
from .conftest import free_port
from .conftest import mitmdump_bin
from .conftest import wait_port

pytestmark = pytest.mark.e2e

CLIENT_KEY = "sk-client-secret"
UPSTREAM_KEY = "sk-upstream-configured"


MODELS = {
    "data": [{"type": "model", "id": "claude-up-1", "display_name": "Up 1", "created_at": "2025-01-02T03:04:05Z"}],
    "has_more": False,
    "first_id": "claude-up-1",
    "last_id": "claude-up-1",
}


def stub_answer(request: Request) -> Reply:
    """The stub's model endpoints: a fixed non-streamed Anthropic message; any other protocol is echoed."""
    if request.protocol != "anthropic":
        return Reply(json_body={"echo": request.protocol})
    message = {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": [{"type": "text", "text": "Hello from the stub"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 4},
    }
    return Reply(json_body=message)


def Stub() -> FakeUpstream:  # noqa: N802 - reads as the class it was
    """A recording Anthropic upstream on the demo fake: models list, count_tokens, a non-streamed message, and
    chat completions echoed (the "unrelated" destination)."""
    routes = {
        "/v1/models": lambda rec: Reply(json_body=MODELS),
        "/v1/messages/count_tokens": lambda rec: Reply(json_body={"input_tokens": 4242}),
    }
    return FakeUpstream(answer=stub_answer, routes=routes).start()


class RegularProxy:
    """``mitmdump -s addon/dragoman.py -p PORT`` (regular mode, no --mode), CA in a temporary confdir."""

    def __init__(self, workdir: Path, *sets: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.confdir = workdir / f"confdir-{self.port}"
        self.ca = self.confdir / "mitmproxy-ca-cert.pem"
        self.log_path = workdir / f"mitmdump-regular-{self.port}.log"
        argv = [mitmdump_bin(), "-s", str(SCRIPT), "--listen-host", "127.0.0.1", "-p", str(self.port)]
        argv += ["--set", f"confdir={self.confdir}", "--set", "termlog_verbosity=debug"]
        for s in sets:
            argv += ["--set", s]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            wait_port(self.port, self.proc)
            deadline = time.monotonic() + 10
            while not self.ca.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"mitmdump failed to start:\n{self.log()}") from None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def opener(self) -> urllib.request.OpenerDirector:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        return urllib.request.build_opener(
            urllib.request.ProxyHandler({"http": self.url, "https": self.url}),
            urllib.request.HTTPSHandler(context=ctx),
        )

    def call(self, method: str, url: str, body: object = None, headers: dict | None = None):
        """(status, headers, body bytes) of one request through the proxy."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={**(headers or {})})
        if data is not None:
            req.add_header("content-type", "application/json")
        try:
            with self.opener().open(req, timeout=20) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("proxy-mode")


@pytest.fixture(scope="module")
def fake():
    with FakeUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def stub():
    s = Stub()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def to_chat(workdir, fake):
    """Anthropic clients (api.anthropic.com) -> an openai-chat upstream (the fake)."""
    p = RegularProxy(
        workdir,
        "dragoman_target=openai-chat",
        f"dragoman_upstream={fake.url}/v1",
        "dragoman_model_map=claude-opus-4-8=gpt-fake",
    )
    yield p
    p.stop()


@pytest.fixture(scope="module")
def to_anthropic(workdir, stub):
    """OpenAI clients (api.openai.com) -> an anthropic upstream (the stub), with a configured key."""
    p = RegularProxy(
        workdir, "dragoman_target=anthropic", f"dragoman_upstream={stub.url}", f"dragoman_api_key={UPSTREAM_KEY}"
    )
    yield p
    p.stop()


def explain(proxy: RegularProxy) -> str:
    return f"--- mitmdump log ---\n{proxy.log()}"


# -- raw calls (urllib) ---------------------------------------------------------------------------------


def test_lazy_connect_is_set_and_official_host_is_not_dialed(to_chat, fake):
    """Offline, CONNECT api.anthropic.com succeeds and the message reaches the fake (translated to Chat)."""
    before = len(fake.requests)
    status, _, body = to_chat.call(
        "POST",
        "https://api.anthropic.com/v1/messages",
        {"model": "claude-opus-4-8", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]},
        {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"},
    )
    assert status == 200, body[:500].decode(errors="replace") + explain(to_chat)
    msg = json.loads(body)
    assert msg["type"] == "message" and msg["content"][0]["type"] == "text"
    seen = fake.requests[before:]
    assert [r.path for r in seen] == ["/v1/chat/completions"]
    assert seen[0].body["model"] == "gpt-fake"
    assert seen[0].headers["authorization"] == f"Bearer {CLIENT_KEY}"
    assert "connection_strategy set to lazy" in to_chat.log()


def test_head_probe_answered(to_chat):
    status, _, body = to_chat.call("HEAD", "https://api.anthropic.com/")
    assert status == 200 and body == b"", explain(to_chat)


def test_models_from_model_map_when_upstream_has_no_list(to_chat):
    # the fake upstream answers GET with text/plain "ok": not a model list -> the model map's names
    status, _, body = to_chat.call(
        "GET", "https://api.anthropic.com/v1/models", headers={"x-api-key": CLIENT_KEY, "anthropic-version": "x"}
    )
    assert status == 200, explain(to_chat)
    listed = json.loads(body)
    assert [m["id"] for m in listed["data"]] == ["claude-opus-4-8", "gpt-fake"]
    assert all(m["type"] == "model" for m in listed["data"]) and listed["has_more"] is False


def test_count_tokens_estimated(to_chat, fake):
    before = len(fake.requests)
    status, headers, body = to_chat.call(
        "POST",
        "https://api.anthropic.com/v1/messages/count_tokens",
        {"model": "claude-opus-4-8", "system": "be brief " * 40, "messages": [{"role": "user", "content": "hi"}]},
        {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"},
    )
    assert status == 200, explain(to_chat)
    assert headers.get("x-dragoman-estimate") == "true"
    assert 80 < json.loads(body)["input_tokens"] < 200
    assert len(fake.requests) == before  # answered locally


def test_models_forwarded_and_converted_to_openai_shape(to_anthropic, stub):
    before = len(stub.requests)
    status, _, body = to_anthropic.call(
        "GET", "https://api.openai.com/v1/models", headers={"authorization": f"Bearer {CLIENT_KEY}"}
    )
    assert status == 200, explain(to_anthropic)
    listed = json.loads(body)
    assert listed["object"] == "list"
    assert listed["data"] == [{"id": "claude-up-1", "object": "model", "created": 1735787045, "owned_by": "dragoman"}]
    seen = stub.requests[before:]
    assert [r.path for r in seen] == ["/v1/models"]
    assert seen[0].headers["x-api-key"] == UPSTREAM_KEY
    assert "authorization" not in seen[0].headers


def test_count_tokens_forwarded_to_anthropic_upstream(to_anthropic, stub):
    before = len(stub.requests)
    status, headers, body = to_anthropic.call(
        "POST",
        "https://api.anthropic.com/v1/messages/count_tokens",
        {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]},
        {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"},
    )
    assert status == 200 and json.loads(body) == {"input_tokens": 4242}, explain(to_anthropic)
    assert "x-dragoman-estimate" not in headers
    seen = stub.requests[before:]
    assert [r.path for r in seen] == ["/v1/messages/count_tokens"]
    assert seen[0].headers["x-api-key"] == UPSTREAM_KEY


WS_HEADERS = {
    "connection": "Upgrade",
    "upgrade": "websocket",
    "sec-websocket-version": "13",
    "sec-websocket-key": "6MdvBW366LMfj7GSxKnwWQ==",
    "openai-beta": "responses_websockets=2026-02-06",
    "authorization": f"Bearer {CLIENT_KEY}",
}


def test_responses_websocket_upgrade_accepted(to_anthropic, stub):
    """Codex's Responses WebSocket is served (docs/responses-state.md): 101, and nothing reaches the upstream."""
    before = len(stub.requests)
    status, _, _ = to_anthropic.call("GET", "https://api.openai.com/v1/responses", headers=WS_HEADERS)
    assert status == 101, explain(to_anthropic)
    assert "Responses WebSocket accepted" in to_anthropic.log()
    assert len(stub.requests) == before


def test_other_websocket_upgrade_refused_with_426(to_anthropic, stub):
    before = len(stub.requests)
    status, _, body = to_anthropic.call("GET", "https://api.openai.com/v1/chat/completions", headers=WS_HEADERS)
    assert status == 426, explain(to_anthropic)
    assert json.loads(body)["error"]["message"]
    assert len(stub.requests) == before


def test_unrelated_traffic_passes_unchanged(to_anthropic, stub):
    """A POST to another host's /v1/chat/completions through the same proxy is not translated or re-keyed."""
    before = len(stub.requests)
    payload = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    status, _, body = to_anthropic.call(
        "POST", f"{stub.url}/v1/chat/completions", payload, {"authorization": "Bearer sk-other-app"}
    )
    assert status == 200, explain(to_anthropic)
    seen = stub.requests[before:]
    assert len(seen) == 1 and seen[0].path == "/v1/chat/completions"
    assert json.loads(seen[0].raw) == payload
    assert seen[0].headers["authorization"] == "Bearer sk-other-app"
    assert "x-api-key" not in seen[0].headers


# -- the official SDKs --------------------------------------------------------------------------------


def test_anthropic_sdk_through_proxy_to_chat_upstream(to_chat, fake, monkeypatch):
    anthropic = pytest.importorskip("anthropic")
    # the README recipe: HTTPS_PROXY + SSL_CERT_FILE in the environment, no base URL
    for name in ("ANTHROPIC_BASE_URL", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", to_chat.url)
    monkeypatch.setenv("SSL_CERT_FILE", str(to_chat.ca))
    with anthropic.DefaultHttpxClient() as http_client:
        client = anthropic.Anthropic(api_key=CLIENT_KEY, http_client=http_client, max_retries=0)
        assert str(client.base_url).startswith("https://api.anthropic.com")
        before = len(fake.requests)
        msg = client.messages.create(
            model="claude-opus-4-8", max_tokens=64, messages=[{"role": "user", "content": "hello"}]
        )
        assert msg.content[0].type == "text" and msg.content[0].text, explain(to_chat)
        with client.messages.stream(
            model="claude-opus-4-8", max_tokens=64, messages=[{"role": "user", "content": "hello"}]
        ) as stream:
            text = "".join(stream.text_stream)
        assert text == msg.content[0].text
        assert [r.path for r in fake.requests[before:]] == ["/v1/chat/completions"] * 2
        count = client.messages.count_tokens(model="claude-opus-4-8", messages=[{"role": "user", "content": "hello"}])
        assert count.input_tokens > 0
        models = client.models.list()
        assert [m.id for m in models.data] == ["claude-opus-4-8", "gpt-fake"]


def test_openai_sdk_through_proxy_to_anthropic_upstream(to_anthropic, stub, monkeypatch):
    openai = pytest.importorskip("openai")
    # the README recipe: HTTPS_PROXY + SSL_CERT_FILE in the environment, no base URL
    for name in ("OPENAI_BASE_URL", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", to_anthropic.url)
    monkeypatch.setenv("SSL_CERT_FILE", str(to_anthropic.ca))
    with openai.DefaultHttpxClient() as http_client:
        client = openai.OpenAI(api_key=CLIENT_KEY, http_client=http_client, max_retries=0)
        assert str(client.base_url).startswith("https://api.openai.com/v1")
        before = len(stub.requests)
        done = client.chat.completions.create(model="claude-x", messages=[{"role": "user", "content": "hello"}])
        assert done.choices[0].message.content == "Hello from the stub", explain(to_anthropic)
        seen = stub.requests[before:]
        assert [r.path for r in seen] == ["/v1/messages"]
        assert seen[0].headers["x-api-key"] == UPSTREAM_KEY  # the client's key never reaches the upstream
        assert CLIENT_KEY not in json.dumps(seen[0].headers)
        assert [m.id for m in client.models.list().data] == ["claude-up-1"]
