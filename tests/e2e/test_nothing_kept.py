"""Issue 29 (items 2-4, 6) through a real mitmdump: after a run that includes upstream errors quoting the key
(whole, through the relay, and streamed), requests Dragoman answers itself (400 invalid JSON, 400 wrong type,
401 unknown client key, 413, 431) and a request of 2,500 headers, neither the recording (``dragoman_record``)
nor the flow file (``-w``) holds any configured key, client key or client credential; heads beyond the relay's
limit are answered 431 in the client's shape; ``usage --json`` without a ledger answers an empty report.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from dragoman.demo import FakeUpstream

from .hostile import Mitmdump
from .hostile import http_request
from .hostile import send_direct
from .hostile import status_of
from .test_secrets_kept_out import answer
from .test_secrets_kept_out import chat
from .test_secrets_kept_out import messages

pytestmark = pytest.mark.e2e

UPSTREAM_KEY = "sk-upstream-kept-nowhere-" + secrets.token_hex(10)
ALICE = "sk-dragoman-alice-" + secrets.token_hex(10)
STRANGER = "sk-stranger-" + secrets.token_hex(10)
OWN = "sk-ant-clients-own-" + secrets.token_hex(10)  # a client's own key, where no client keys are configured
OTHER = {
    "api-key": "azure-client-" + secrets.token_hex(8),
    "x-goog-api-key": "goog-client-" + secrets.token_hex(8),
    "cookie": "session=cookie-client-" + secrets.token_hex(8),
}
QUERY_SECRETS = {"key": "q-key-" + secrets.token_hex(8), "access_token": "q-token-" + secrets.token_hex(8)}
QUERY = "&".join(f"{k}={v}" for k, v in QUERY_SECRETS.items()) + "&beta=true"


def every_secret() -> list[str]:
    return [UPSTREAM_KEY, ALICE, STRANGER, OWN, *(v.split("=", 1)[-1] for v in OTHER.values()), *QUERY_SECRETS.values()]


def call(proxy: Mitmdump, path: str, body: bytes, key: str, extra: dict[str, str] | None = None) -> bytes:
    headers = {"host": "localhost", "x-api-key": key, "anthropic-version": "2023-06-01", **OTHER}
    headers["content-type"] = "application/json"
    return send_direct(proxy.port, http_request("POST", f"{path}?{QUERY}", {**headers, **(extra or {})}, body))


def body_of(answer: bytes) -> dict:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])


def pad(count: int, size: int) -> dict[str, str]:
    return {f"x-pad-{i:05d}": "v" * size for i in range(count)}


#: (name, path, body, extra headers, expected status)
def requests_for(key: str) -> list[tuple[str, str, bytes, dict[str, str], int]]:
    m = json.dumps(messages("claude-x", False)).encode()
    return [
        ("ok whole (relay)", "/v1/messages", m, {}, 200),
        ("ok chat translated", "/v1/chat/completions", json.dumps(chat("gpt-x", False)).encode(), {}, 200),
        (
            "400 whole quoting the key, chat",
            "/v1/chat/completions",
            json.dumps(chat("echo-error", False)).encode(),
            {},
            400,
        ),
        (
            "stream error quoting the key",
            "/v1/messages",
            json.dumps(messages("echo-stream-error", True)).encode(),
            {},
            200,
        ),
        ("400 invalid JSON (Dragoman)", "/v1/messages", b'{"model": ', {}, 400),
        (
            "400 wrong type (Dragoman)",
            "/v1/messages",
            json.dumps({**messages("claude-x", False), "max_tokens": "x"}).encode(),
            {},
            400,
        ),
        ("413 declared body (Dragoman)", "/v1/messages", b"x" * 70_000, {}, 413),
        ("2,500 headers pass", "/v1/messages", m, pad(2500, 20), 200),
        ("431 head over the limit", "/v1/messages", m, pad(200, 6000), 431),
        (
            "431 head, OpenAI shape",
            "/v1/chat/completions",
            json.dumps(chat("gpt-x", False)).encode(),
            pad(200, 6000),
            431,
        ),
        # last: the upstream's 401 rests the key (the fake says it is invalid)
        (
            "401 whole quoting the key (relay)",
            "/v1/messages",
            json.dumps(messages("echo-auth", False)).encode(),
            {},
            401,
        ),
    ]


def run(workdir: Path, name: str, client_keys: bool) -> dict:
    upstream = FakeUpstream(answer=answer).start()
    flows, records = workdir / f"{name}.mitm", workdir / f"{name}-recordings"
    args = ["--mode", f"reverse:{upstream.url}", "--set", "dragoman_target=anthropic"]
    args += ["--set", f"dragoman_upstream={upstream.url}", "--set", f"dragoman_api_key={UPSTREAM_KEY}"]
    args += ["--set", "dragoman_max_body=64k", "-w", str(flows), "--set", f"dragoman_record={records}"]
    args += ["--set", "dragoman_record_session=s"]
    if client_keys:
        args += ["--set", f"dragoman_client_keys=alice={ALICE}"]
    proxy = Mitmdump(workdir, *args)
    key = ALICE if client_keys else OWN
    answers = {}
    try:
        for case, path, body, extra, _ in requests_for(key):
            answers[case] = call(proxy, path, body, key, extra)
        if client_keys:
            answers["401 unknown client key (Dragoman)"] = call(proxy, "/v1/messages", b"{}", STRANGER)
    finally:
        proxy.stop()
        upstream.stop()
    files = sorted((records / "s").glob("*.json")) if (records / "s").exists() else []
    return {
        "answers": answers,
        "flows": flows.read_bytes(),
        "recordings": {p.name: p.read_text() for p in files},
        "upstream": upstream.requests,
        "log": proxy.log(),
        "key": key,
    }


@pytest.fixture(scope="module", params=["no client keys", "client keys"])
def ran(request, tmp_path_factory):
    with_keys = request.param == "client keys"
    return run(tmp_path_factory.mktemp("kept"), "keys" if with_keys else "own", with_keys)


def test_every_answer(ran):
    expected = {case: status for case, _, _, _, status in requests_for(ran["key"])}
    if "401 unknown client key (Dragoman)" in ran["answers"]:
        expected["401 unknown client key (Dragoman)"] = 401
    got = {case: status_of(a) for case, a in ran["answers"].items()}
    assert got == expected, f"{got}\n{ran['log'][-3000:]}"


def test_431_names_the_limit_in_the_clients_shape(ran):
    anthropic = body_of(ran["answers"]["431 head over the limit"])
    assert anthropic["type"] == "error" and anthropic["error"]["type"] == "invalid_request_error"
    assert "is larger than Dragoman's limit of 1048576 bytes" in anthropic["error"]["message"]
    openai = body_of(ran["answers"]["431 head, OpenAI shape"])["error"]
    assert openai["type"] == "invalid_request_error" and "1048576 bytes" in openai["message"]


def test_thousands_of_headers_reach_the_upstream(ran):
    padded = [r for r in ran["upstream"] if "x-pad-02499" in r.headers]
    assert len(padded) == 1 and padded[0].headers.get("x-api-key") == UPSTREAM_KEY


def test_the_recording_holds_no_key_and_no_client_credential(ran):
    recs = ran["recordings"]
    assert len(recs) >= 8, sorted(recs)
    text = "\n".join(recs.values())
    for secret in every_secret():
        assert secret not in text, secret
    # the upstream's whole 401 that quoted the key is recorded, with the key masked
    quoted = [json.loads(t) for t in recs.values() if "invalid x-api-key" in t]
    assert quoted and all(r["upstream_response"]["status"] == 401 for r in quoted)


def test_the_flow_file_holds_no_key_and_no_client_credential(ran):
    data = ran["flows"]
    assert data.count(b"/v1/messages") >= 8 and b"x-pad-02499" in data  # the flows are there
    for secret in every_secret():
        assert secret.encode() not in data, secret


def test_usage_without_a_ledger(tmp_path):
    missing = tmp_path / "none" / "usage.sqlite3"
    base = [sys.executable, "-m", "dragoman", "usage", "--ledger", str(missing)]
    proc = subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["rows"] == [] and doc["total"]["requests"] == 0 and doc["ledger_exists"] is False
    proc = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("no usage recorded yet") and proc.stdout.count("\n") == 1
