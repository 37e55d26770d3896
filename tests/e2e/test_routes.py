"""Routes end to end, as a user runs them: ``mitmdump --set dragoman_config=routes.yaml`` in reverse mode in
front of local fakes that answer by key (tests/keyed_upstream.py), clients of all three protocols over HTTP.

Checks the attempts each upstream really saw (keys, order, count), what the client got (a valid answer in its
own protocol, or one clean error with the last upstream's status and ``retry-after``), and the response
header naming who answered.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from keyed_upstream import KeyedUpstream
from keyed_upstream import Rule
from validators import anthropic as v_anthropic
from validators import chat as v_chat
from validators import responses as v_responses

from .conftest import SCRIPT
from .conftest import PortTaken
from .conftest import free_port
from .conftest import mitmdump_bin
from .conftest import wait_port

pytestmark = pytest.mark.e2e

CLIENT_KEY = "sk-client-own-key-must-not-travel"
PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connections are refused


class Routed:
    def __init__(
        self,
        workdir: Path,
        yaml_text: str,
        env: dict[str, str] | None = None,
        extra: list[str] | None = None,
        verbosity: str = "info",
    ) -> None:
        for attempt in range(3):
            try:
                self._start(workdir, yaml_text, env, extra, verbosity)
                return
            except PortTaken:  # another xdist worker's mitmdump took the port first
                self.stop()
                if attempt == 2:
                    raise

    def _start(
        self, workdir: Path, yaml_text: str, env: dict[str, str] | None, extra: list[str] | None, verbosity: str
    ) -> None:
        self.config = workdir / "routes.yaml"
        self.config.write_text(yaml_text)
        self.port = free_port()
        self.log_path = workdir / f"mitmdump-{self.port}.log"
        argv = [
            mitmdump_bin(),
            "-s",
            str(SCRIPT),
            "--mode",
            "reverse:http://127.0.0.1:9",
            "--listen-host",
            "127.0.0.1",
            "-p",
            str(self.port),
            "--set",
            f"confdir={workdir / 'confdir'}",
            "--set",
            f"termlog_verbosity={verbosity}",
            "--set",
            f"dragoman_config={self.config}",
            *(extra or []),
        ]
        import os

        self._log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        try:
            wait_port(self.port, self.proc)
            self._wait_routes_loaded()
        except PortTaken:
            raise
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"mitmdump failed to start:\n{self.log()}") from None

    def _wait_routes_loaded(self, timeout: float = 60.0) -> None:
        """mitmproxy listens before it has loaded a hot-reloadable ``-s`` script (the script loads in a task
        beside the servers' start), so the port alone does not say the routes file was read: a test that
        rewrites the file too early would change what start-up reads. Wait for the addon's start-up line."""
        deadline = time.monotonic() + timeout
        while "routes from " not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the routes file was not loaded")
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def call(
        self, client: str, model: str, stream: bool, timeout: float = 60, key: str = CLIENT_KEY
    ) -> tuple[int, dict[str, str], bytes]:
        if client == "anthropic":
            body = {"model": model, "max_tokens": 64, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
            headers = (
                {"x-api-key": key, "anthropic-version": "2023-06-01"} if key else {"anthropic-version": "2023-06-01"}
            )
        elif client == "openai-chat":
            body = {"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
            headers = {"authorization": f"Bearer {key}"} if key else {}
        else:
            body = {"model": model, "stream": stream, "input": "hi"}
            headers = {"authorization": f"Bearer {key}"} if key else {}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", PATHS[client], json.dumps(body), {"content-type": "application/json", **headers})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()


def validate(client: str, stream: bool, body: bytes) -> None:
    if client == "anthropic":
        (v_anthropic.validate_stream if stream else v_anthropic.validate_message)(body)
    elif client == "openai-chat":
        (v_chat.validate_stream if stream else v_chat.validate_completion)(body)
    else:
        (v_responses.validate_stream if stream else v_responses.validate_response)(body)


def last_event_is_error(client: str, body: bytes) -> bool:
    text = body.decode()
    if client == "anthropic":
        return text.rstrip().split("\n\n")[-1].startswith("event: error")
    if client == "openai-chat":
        return '"error"' in text.rstrip().split("\n\n")[-1]
    return '"type":"error"' in text.rstrip().split("\n\n")[-1].replace(" ", "") or "response.failed" in text


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("routes")
    fakes = {
        # a Chat upstream with two keys: the first always answers 429 with retry-after 30
        "chat_a": KeyedUpstream("openai-chat", rules={"key-a1": Rule(429, retry_after="30")}),
        # an Anthropic upstream answering 503 to everyone
        "anth": KeyedUpstream("anthropic", always=Rule(503)),
        # a second Chat upstream that works
        "chat_b": KeyedUpstream("openai-chat"),
        "resp": KeyedUpstream("openai-responses"),
        "bad": KeyedUpstream(
            "openai-chat", always=Rule(400, body=b'{"error":{"message":"bad param","type":"invalid_request_error"}}')
        ),
        "limited1": KeyedUpstream("openai-chat", always=Rule(429, retry_after="7")),
        "limited2": KeyedUpstream("anthropic", always=Rule(429, retry_after="11")),
        "dropper": KeyedUpstream("openai-chat", rules={"key-drop": Rule(action="drop")}),
        "revoked": KeyedUpstream("anthropic", rules={"key-revoked": Rule(401)}),
        "anth_ok": KeyedUpstream("anthropic"),
    }
    refused = closed_port()
    text = f"""
upstreams:
  - name: chat_a
    protocol: openai-chat
    base_url: {fakes["chat_a"].url}/v1
    keys: [key-a1, env:ROUTES_TEST_KEY_A2]
  - name: anth
    protocol: anthropic
    base_url: {fakes["anth"].url}
    keys: [key-anth]
  - name: chat_b
    protocol: openai-chat
    base_url: {fakes["chat_b"].url}/v1
    keys: [key-b]
  - name: resp
    protocol: openai-responses
    base_url: {fakes["resp"].url}/v1
    keys: [key-resp]
  - name: bad
    protocol: openai-chat
    base_url: {fakes["bad"].url}/v1
    keys: [key-bad]
  - name: limited1
    protocol: openai-chat
    base_url: {fakes["limited1"].url}/v1
    keys: [key-l1]
  - name: limited2
    protocol: anthropic
    base_url: {fakes["limited2"].url}
    keys: [key-l2]
  - name: dropper
    protocol: openai-chat
    base_url: {fakes["dropper"].url}/v1
    keys: [key-drop]
  - name: revoked
    protocol: anthropic
    base_url: {fakes["revoked"].url}
    keys: [key-revoked, key-valid]
  - name: anth_ok
    protocol: anthropic
    base_url: {fakes["anth_ok"].url}
    keys: [key-anth-ok]
  - name: refused
    protocol: anthropic
    base_url: http://127.0.0.1:{refused}
    keys: [key-refused]
routes:
  - match: "claude-haiku-*"
    to: [chat_a/deepseek-chat]
  - match: "claude-opus-*"
    to: [anth, chat_b/backup-model]
  - match: "gpt-resp"
    to: [refused, resp/gpt-5]
  - match: "bad-*"
    to: [bad, chat_b]
  - match: "limited-*"
    to: [limited1, limited2]
  - match: "drop-*"
    to: [dropper, chat_b]
  - match: "ncand-*"
    to: [anth_ok, chat_b]
  - match: "to-anthropic"
    to: [anth_ok/claude-sonnet-4-5]
  - match: "to-openai-chat"
    to: [chat_b/gpt-4.1]
  - match: "to-openai-responses"
    to: [resp/gpt-5]
  - match: "revoked-*"
    to: [revoked]
  - match: "refused-*"
    to: [refused, chat_b/after-refusal]
limits:
  cooldown: 5
"""
    proxy = Routed(workdir, text, {"ROUTES_TEST_KEY_A2": "key-a2"})
    yield proxy, fakes
    proxy.stop()
    for f in fakes.values():
        f.stop()


def asked(fake: KeyedUpstream, since: int) -> list[str | None]:
    return fake.keys_seen()[since:]


@pytest.mark.parametrize("client", ["anthropic", "openai-chat", "openai-responses"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_key_rotation_and_failover_per_client(world, client, stream):
    proxy, fakes = world
    a0, b0, n0 = len(fakes["chat_a"].requests), len(fakes["chat_b"].requests), len(fakes["anth"].requests)
    status, headers, body = proxy.call(client, "claude-haiku-4-5", stream)
    assert status == 200, body[:500]
    validate(client, stream, body)
    assert headers["x-dragoman-route"] == "chat_a/deepseek-chat"
    keys = asked(fakes["chat_a"], a0)
    # the 429 key rests for its retry-after (30 s): it is tried at most once over the whole module
    assert keys[-1] == "key-a2" and set(keys) <= {"key-a1", "key-a2"}
    assert fakes["chat_a"].keys_seen().count("key-a1") == 1
    assert all(r.body["model"] == "deepseek-chat" for r in fakes["chat_a"].requests)

    status, headers, body = proxy.call(client, "claude-opus-4-5", stream)
    assert status == 200, body[:500]
    validate(client, stream, body)
    assert headers["x-dragoman-route"] == "chat_b/backup-model"
    assert asked(fakes["anth"], n0) == ["key-anth"]  # 503: upstream-bound, next entry
    assert asked(fakes["chat_b"], b0) == ["key-b"]
    assert fakes["chat_b"].requests[-1].body["model"] == "backup-model"


UPSTREAM_FAKE = {"anthropic": "anth_ok", "openai-chat": "chat_b", "openai-responses": "resp"}


@pytest.mark.parametrize("upstream", list(UPSTREAM_FAKE))
@pytest.mark.parametrize("client", ["anthropic", "openai-chat", "openai-responses"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_every_client_protocol_onto_every_upstream_protocol(world, client, upstream, stream):
    proxy, fakes = world
    fake = fakes[UPSTREAM_FAKE[upstream]]
    n0 = len(fake.requests)
    status, headers, body = proxy.call(client, f"to-{upstream}", stream)
    assert status == 200, body[:300]
    if client != upstream:  # same protocol: the upstream's bytes, untouched
        validate(client, stream, body)
    assert headers["x-dragoman-route"].startswith(UPSTREAM_FAKE[upstream] + "/")
    assert len(fake.requests) == n0 + 1 and fake.requests[-1].path.endswith(
        {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}[
            upstream
        ]
    )


def test_401_benches_the_key(world):
    proxy, fakes = world
    for _ in range(3):
        status, _, body = proxy.call("openai-chat", "revoked-model", False)
        assert status == 200, body[:300]
    assert fakes["revoked"].keys_seen() == ["key-revoked", "key-valid", "key-valid", "key-valid"]
    log = proxy.log()
    assert log.count("upstream revoked: key 0 (key #1) rests for 3600 s: HTTP 401: refused, benched") == 1
    assert "key-revoked" not in log


def test_client_key_never_reaches_an_upstream(world):
    proxy, fakes = world
    proxy.call("anthropic", "claude-opus-4-5", True)
    for fake in fakes.values():
        for r in fake.requests:
            assert CLIENT_KEY not in json.dumps(r.headers) and r.key != CLIENT_KEY


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_refused_connection_fails_over_to_another_protocol(world, stream):
    proxy, fakes = world
    b0 = len(fakes["chat_b"].requests)
    status, headers, body = proxy.call("anthropic", "refused-model", stream)
    assert status == 200, body[:500]
    validate("anthropic", stream, body)
    assert headers["x-dragoman-route"] == "chat_b/after-refusal"
    assert asked(fakes["chat_b"], b0) == ["key-b"]

    r0 = len(fakes["resp"].requests)
    status, headers, body = proxy.call("openai-chat", "gpt-resp", stream)
    assert status == 200, body[:500]
    validate("openai-chat", stream, body)
    assert asked(fakes["resp"], r0) == ["key-resp"]


@pytest.mark.parametrize("client", ["anthropic", "openai-chat", "openai-responses"])
def test_request_bound_error_is_not_retried(world, client):
    proxy, fakes = world
    bad0, b0 = len(fakes["bad"].requests), len(fakes["chat_b"].requests)
    status, _, body = proxy.call(client, "bad-model", False)
    assert status == 400
    assert b"bad param" in body
    if client != "openai-chat":  # a Chat client of a Chat upstream gets the upstream's bytes untouched
        {"anthropic": v_anthropic, "openai-responses": v_responses}[client].validate_error_body(body)
    assert len(fakes["bad"].requests) == bad0 + 1
    assert len(fakes["chat_b"].requests) == b0


def test_exhaustion_returns_last_status_and_retry_after_then_rests(world):
    proxy, fakes = world
    l1, l2 = len(fakes["limited1"].requests), len(fakes["limited2"].requests)
    status, headers, body = proxy.call("openai-responses", "limited-model", True)
    assert status == 429
    assert headers.get("retry-after") == "11"  # the last upstream's
    v_responses.validate_error_body(body)
    assert (len(fakes["limited1"].requests), len(fakes["limited2"].requests)) == (l1 + 1, l2 + 1)
    # both keys now rest (7 s and 11 s): the next request is answered without asking either upstream
    status, headers, body = proxy.call("anthropic", "limited-model", False)
    assert status == 429
    v_anthropic.validate_error_body(body)
    assert 1 <= int(headers["retry-after"]) <= 7
    assert (len(fakes["limited1"].requests), len(fakes["limited2"].requests)) == (l1 + 1, l2 + 1)


@pytest.mark.parametrize("client", ["anthropic", "openai-responses"])
def test_no_retry_after_the_first_byte(world, client):
    proxy, fakes = world
    b0 = len(fakes["chat_b"].requests)
    status, _, body = proxy.call(client, "drop-model", True)
    assert status == 200
    assert last_event_is_error(client, body), body[-400:]
    assert len(fakes["chat_b"].requests) == b0  # never asked: a byte had gone to the client


def test_no_retry_after_the_first_byte_pass_through_is_cut(world):
    """A Chat client of a Chat upstream gets bytes untouched: the drop reaches it as a cut stream, as natively."""
    proxy, fakes = world
    b0 = len(fakes["chat_b"].requests)
    with pytest.raises((http.client.IncompleteRead, ValueError, ConnectionError)):
        proxy.call("openai-chat", "drop-model", True)
    assert len(fakes["chat_b"].requests) == b0


def test_attempts_are_logged_one_line_each(world):
    proxy, _ = world
    proxy.call("anthropic", "claude-opus-4-5", False)
    log = proxy.log()
    assert "attempt 1 anth/claude-opus-4-5 (key 0): status 503, upstream-bound" in log
    assert "attempt 2 chat_b/backup-model (key 0): status 200" in log
    assert "key-anth" not in log and "key-a2" not in log and CLIENT_KEY not in log


def test_two_hundred_concurrent_routed_streams(world):
    proxy, fakes = world
    import random

    rng = random.Random(7)
    models = ["claude-opus-4-5", "refused-x", "claude-haiku-4-5", "drop-x", "bad-x", "limited-x"]
    jobs = [(rng.choice(["anthropic", "openai-chat", "openai-responses"]), rng.choice(models)) for _ in range(200)]
    results: list[tuple[str, str, int, bytes] | None] = [None] * len(jobs)
    errors: list[tuple[str, str, str]] = []

    def run(i: int) -> None:
        client, model = jobs[i]
        try:
            status, _, body = proxy.call(client, model, True, timeout=300)  # a loaded 2-core CI box
        except (http.client.IncompleteRead, ValueError) as e:
            if not (client == "openai-chat" and model.startswith("drop")):  # pass-through: cut, as natively
                errors.append((client, model, repr(e)))
            status, body = 200, None
        except Exception as e:  # noqa: BLE001 - reported below with the job
            errors.append((client, model, repr(e)))
            return
        results[i] = (client, model, status, body)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(330)
    assert not errors, errors[:5]
    for res in results:
        assert res is not None
        client, model, status, body = res
        if model.startswith("bad"):
            assert status == 400
        elif model.startswith("limited"):
            assert status == 429
        elif model.startswith("drop"):
            assert status == 200 and (body is None or last_event_is_error(client, body))
        else:
            assert status == 200, (client, model, body[:300])
            validate(client, True, body)


def test_unknown_upstream_in_a_route_refuses_to_start(tmp_path):
    text = "upstreams:\n  - name: a\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\nroutes:\n  - match: '*'\n    to: [nosuch/model]\n"
    cfg = tmp_path / "routes.yaml"
    cfg.write_text(text)
    proc = subprocess.run(
        [
            mitmdump_bin(),
            "-s",
            str(SCRIPT),
            "--listen-host",
            "127.0.0.1",
            "-p",
            str(free_port()),
            "--set",
            f"confdir={tmp_path / 'confdir'}",
            "--set",
            f"dragoman_config={cfg}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"{cfg} line 7: routes[0] (match '*').to[0]: unknown upstream 'nosuch' (upstreams: a)" in out


def test_reload_keeps_old_routes_when_new_file_is_broken(world):
    proxy, _ = world
    good = proxy.config.read_text()
    try:
        proxy.config.write_text(good + "\n  - match: [broken\n")
        time.sleep(3)
        status, _, _ = proxy.call("anthropic", "claude-opus-4-5", False)
        assert status == 200
        assert "routes file changed but cannot be used" in proxy.log()
    finally:
        proxy.config.write_text(good)


def test_a_request_one_candidate_cannot_carry_goes_to_the_next(world):
    """Chat's n=3 has no Anthropic form: that entry is skipped, the Chat entry answers all three choices."""
    proxy, fakes = world
    b0 = len(fakes["chat_b"].requests)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=60)
    body = {"model": "ncand-x", "n": 3, "messages": [{"role": "user", "content": "hi"}]}
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    assert resp.status == 200, data[:300]
    assert len(fakes["chat_b"].requests) == b0 + 1 and fakes["chat_b"].requests[-1].body["n"] == 3
    # and when no entry can carry it: a 400 in the client's shape, nothing sent
    n0 = len(fakes["anth_ok"].requests)
    body["model"] = "to-anthropic"
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=60)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    assert resp.status == 400, data[:300]
    assert json.loads(data)["error"]["message"]
    assert len(fakes["anth_ok"].requests) == n0


def test_attempts_reach_the_recording_and_the_flow_file(tmp_path):
    """A failover (503, then another protocol answers) as recorded: the exchange and the ``-w`` flow name
    the route that matched, the upstream that answered and both attempts in order (upstream, model, key index, status, class), and
    neither holds a key."""
    from mitmproxy import io as mio

    down = KeyedUpstream("anthropic", always=Rule(503))
    ok = KeyedUpstream("openai-chat")
    flows, records = tmp_path / "flows.mitm", tmp_path / "recordings"
    text = f"""
upstreams:
  - name: down
    protocol: anthropic
    base_url: {down.url}
    keys: [key-down-SECRET]
  - name: ok
    protocol: openai-chat
    base_url: {ok.url}/v1
    keys: [key-ok-SECRET]
routes:
  - match: "*"
    to: [down, ok/backup-model]
"""
    ok_url = ok.url
    proxy = Routed(tmp_path, text, extra=["-w", str(flows), "--set", f"dragoman_record={records}"])
    try:
        status, headers, body = proxy.call("anthropic", "claude-opus-4-5", True)
        assert status == 200, body[:500]
        validate("anthropic", True, body)
    finally:
        proxy.stop()
        down.stop()
        ok.stop()
    want = [("down", "claude-opus-4-5", 0, 503, "upstream"), ("ok", "backup-model", 0, 200, None)]

    def attempts(rows: list[dict]) -> list[tuple]:
        return [(a["upstream"], a["model"], a["key"], a["status"], a["class"]) for a in rows]

    [recording] = [p for p in records.rglob("*.json") if p.name != "session.json"]
    ex = json.loads(recording.read_text())
    assert (ex["route"], ex["upstream"], ex["upstream_model"]) == ("*", "ok", "backup-model")
    assert attempts(ex["attempts"]) == want
    assert ex["upstream_request"]["url"].startswith(ok_url)  # the answering attempt's request
    with open(flows, "rb") as f:
        [flow] = list(mio.FlowReader(f).stream())
    meta = flow.metadata["dragoman"]
    assert (meta["route"], meta["upstream"]) == ("*", "ok") and attempts(meta["attempts"]) == want
    for blob in (recording.read_bytes(), flows.read_bytes(), proxy.log().encode()):
        assert b"key-down-SECRET" not in blob and b"key-ok-SECRET" not in blob and CLIENT_KEY.encode() not in blob
