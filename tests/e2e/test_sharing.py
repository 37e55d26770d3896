"""Sharing one Dragoman, as a team runs it: client keys from the routes file, the usage ledger, and no client
key in logs, recordings or flow files (debug verbosity). Real mitmdump, local fakes that answer by key."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from keyed_upstream import KeyedUpstream

from .test_routes import Routed

pytestmark = pytest.mark.e2e

ALICE, BOB = "sk-team-alice-0001", "sk-team-bob-0002"


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("sharing")
    anth, chat = KeyedUpstream("anthropic"), KeyedUpstream("openai-chat")
    text = f"""
upstreams:
  - name: anth_ok
    protocol: anthropic
    base_url: {anth.url}
    keys: [upstream-anth-key]
  - name: chat_ok
    protocol: openai-chat
    base_url: {chat.url}/v1
    keys: [upstream-chat-key]
routes:
  - match: "claude-*"
    to: [anth_ok]
  - match: "gpt-*"
    to: [chat_ok]
clients:
  - name: alice
    key: env:TEAM_ALICE
  - name: bob
    key: env:TEAM_BOB
    models: ["claude-*"]
"""
    ledger = workdir / "usage.sqlite3"
    flows = workdir / "flows.mitm"
    records = workdir / "recordings"
    proxy = Routed(
        workdir,
        text,
        {"TEAM_ALICE": ALICE, "TEAM_BOB": BOB},
        extra=["--set", f"dragoman_ledger={ledger}", "-w", str(flows), "--set", f"dragoman_record={records}"],
        verbosity="debug",
    )
    yield proxy, anth, chat, ledger, flows, records
    proxy.stop()
    anth.stop()
    chat.stop()


def usage_json(ledger) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "dragoman", "usage", "--ledger", str(ledger), "--json", "--by", "client"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)["rows"]


def test_client_keys_ledger_and_no_key_anywhere(team):
    proxy, anth, chat, ledger, flows, records = team
    calls = [
        # (key, client protocol, model, stream) -> usage the fakes report (corpus answers)
        (ALICE, "anthropic", "claude-sonnet-4-5", True),  # 12 in, 30 out
        (ALICE, "anthropic", "claude-sonnet-4-5", False),  # 12 in, 29 out
        (ALICE, "openai-chat", "gpt-4.1", True),  # Chat to Chat, bytes untouched: 16 in, 300 out
        (BOB, "openai-responses", "claude-sonnet-4-5", True),  # 12 in, 30 out
        (BOB, "openai-chat", "claude-sonnet-4-5", False),  # 12 in, 29 out
    ]
    for key, client, model, stream in calls:
        status, _, body = proxy.call(client, model, stream, key=key)
        assert status == 200, body[:300]
    # refused: no key, a wrong key, bob outside his models; nothing reaches an upstream
    before = len(anth.requests) + len(chat.requests)
    assert proxy.call("anthropic", "claude-sonnet-4-5", False, key="")[0] == 401
    assert proxy.call("openai-chat", "gpt-4.1", False, key="sk-wrong")[0] == 401
    assert proxy.call("openai-chat", "gpt-4.1", False, key=BOB)[0] == 403
    assert len(anth.requests) + len(chat.requests) == before
    for r in anth.requests + chat.requests:
        assert r.key in ("upstream-anth-key", "upstream-chat-key")

    proxy.stop()  # flushes the ledger, the flow file and the log
    rows = {r["client"]: r for r in usage_json(ledger)}
    assert set(rows) == {"alice", "bob"}
    assert (rows["alice"]["requests"], rows["alice"]["input_tokens"], rows["alice"]["output_tokens"]) == (3, 40, 359)
    assert (rows["bob"]["requests"], rows["bob"]["input_tokens"], rows["bob"]["output_tokens"]) == (2, 24, 59)
    assert rows["alice"]["errors"] == rows["bob"]["errors"] == 0

    blobs = {"log": proxy.log_path.read_bytes(), "flows": flows.read_bytes()}
    for path in records.rglob("*"):
        if path.is_file():
            blobs[str(path)] = path.read_bytes()
    assert len(blobs) > 2  # recordings were written
    for name, blob in blobs.items():
        for secret in (ALICE, BOB, b"sk-wrong"):
            secret = secret if isinstance(secret, bytes) else secret.encode()
            assert secret not in blob, name
    assert b"client alice" in blobs["log"]


def test_refuses_to_expose_upstream_keys_without_client_keys(tmp_path):
    from .conftest import SCRIPT
    from .conftest import free_port
    from .conftest import mitmdump_bin

    base = [
        mitmdump_bin(),
        "-s",
        str(SCRIPT),
        "-p",
        str(free_port()),
        "--set",
        f"confdir={tmp_path / 'c'}",
        "--mode",
        "reverse:http://127.0.0.1:9",
        "--set",
        "dragoman_target=openai-chat",
        "--set",
        "dragoman_api_key=sk-upstream-secret-77",
    ]
    proc = subprocess.run(base, capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "listen beyond loopback" in out and "--listen-host 127.0.0.1" in out
    assert "sk-upstream-secret-77" not in out
    # the opt-out starts (and is stopped here once it listens)
    port = free_port()
    argv = [*base[:4], str(port), *base[5:], "--set", "dragoman_allow_remote=true"]
    live = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        from .conftest import wait_port

        wait_port(port, live)
    finally:
        live.terminate()
        live.wait(timeout=10)


@pytest.mark.parametrize("listen", ["every interface", "0.0.0.0", "127.0.0.1"])
def test_transparent_mode_refused_beyond_loopback_started_on_it(tmp_path, listen):
    """Issue 29, 1: a host can connect straight to a transparent proxy's port, so holding upstream keys without
    client keys it starts on loopback only (the machine-local recipe), through a real mitmdump."""
    from .conftest import SCRIPT
    from .conftest import free_port
    from .conftest import mitmdump_bin
    from .conftest import wait_port

    port = free_port()
    mode = f"transparent@{port}" if listen == "every interface" else f"transparent@{listen}:{port}"
    argv = [mitmdump_bin(), "-s", str(SCRIPT), "--set", f"confdir={tmp_path / 'c'}", "--mode", mode]
    argv += ["--set", "dragoman_target=openai-chat", "--set", "dragoman_api_key=sk-upstream-secret-78"]
    if listen != "127.0.0.1":
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, out
        assert "listen beyond loopback" in out and f"{mode} on " in out and "--listen-host 127.0.0.1" in out
        assert "sk-upstream-secret-78" not in out
        return
    live = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_port(port, live)
    finally:
        live.terminate()
        live.wait(timeout=10)
