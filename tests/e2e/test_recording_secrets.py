"""Recordings redact credentials wherever they appear (issue 23, 2(b)), through a real mitmdump recording
an Anthropic client on a Chat upstream (the fake): credential query parameters (``?key=``, ``?token=``), a
credential header (``x-auth-token``), credential-named JSON body fields at any depth (``api_key``,
``clientSecret`` in a tool call's input, ``db_password``), and the same values echoed back by the upstream,
in its stream. No canary reaches the recording or the log; ordinary fields stay."""

from __future__ import annotations

import json

import pytest

from dragoman.demo import FakeUpstream
from dragoman.demo.answer import Answer
from dragoman.demo.render import render
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from e2e.test_record_replay import Mitm
from e2e.test_record_replay import post

pytestmark = pytest.mark.e2e

Q_KEY = "qkey-CANARY-1a2b3c4d"
Q_TOKEN = "qtok-CANARY-5e6f7a8b"
H_TOKEN = "htok-CANARY-9c0d1e2f"
B_KEY = "bkey-CANARY-3a4b5c6d"
B_SECRET = "bsec-CANARY-7e8f9a0b"
B_PASSWORD = "bpwd-CANARY-1c2d3e4f"
CANARIES = (Q_KEY, Q_TOKEN, H_TOKEN, B_KEY, B_SECRET, B_PASSWORD)

BODY = {
    "model": "claude-test",
    "max_tokens": 256,
    "stream": True,
    "api_key": B_KEY,
    "metadata": {"user_id": "user-A"},
    "tools": [{"name": "login", "input_schema": {"type": "object", "properties": {"password": {"type": "string"}}}}],
    "messages": [
        {"role": "user", "content": "log in"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "login", "input": {"clientSecret": B_SECRET}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
    ],
    "context": {"db": {"db_password": B_PASSWORD}},
}


def echo(req: Request) -> Reply:
    """The upstream quotes back the body's key and password in its streamed text."""
    return render(req, Answer(text=("you sent ", f"{B_KEY} and {B_PASSWORD}", ".")))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    work = tmp_path_factory.mktemp("recsec")
    with FakeUpstream(scenario="echo", scenarios={"echo": echo}) as up:
        m = Mitm(
            work,
            "record",
            [
                "--mode",
                f"reverse:{up.url}",
                "--set",
                "dragoman_target=openai-chat",
                "--set",
                f"dragoman_upstream={up.url}/v1",
                "--set",
                f"dragoman_record={work / 'rec'}",
                "--set",
                "dragoman_record_session=s",
            ],
        )
        try:
            live = post(
                m.port,
                f"/v1/messages?key={Q_KEY}&token={Q_TOKEN}&beta=true",
                BODY,
                **{"x-api-key": "sk-ant-client-key-0000", "x-auth-token": H_TOKEN, "x-fake-scenario": "echo"},
            )
        finally:
            log = m.stop()
    assert live[0] == 200, log[-3000:]
    files = sorted((work / "rec" / "s").glob("*.json"))
    assert len(files) == 1, (files, log[-3000:])
    return files[0].read_text(), live[1], log


def test_no_canary_in_the_recording_or_the_log(recorded):
    text, client_got, log = recorded
    assert B_KEY.encode() in client_got  # the upstream really echoed it (what the client gets is not ours to mask)
    for c in CANARIES:
        assert c not in text, c
        assert c not in log, c
    assert "CANARY" not in text


def test_ordinary_fields_survive(recorded):
    ex = json.loads(recorded[0])
    req = ex["client_request"]
    assert "beta=true" in req["url"]
    body = req["body"]["json"]
    assert body["max_tokens"] == 256 and body["metadata"] == {"user_id": "user-A"}
    assert body["tools"] == BODY["tools"]  # a schema's "password" property is not a credential
    assert body["api_key"] == "[REDACTED]"
    assert body["messages"][1]["content"][0]["input"] == {"clientSecret": "[REDACTED]"}
    assert body["context"]["db"]["db_password"] == "[REDACTED]"
    up = ex["upstream_response"]
    assert "you sent" in up["body"]["text"] and len(up["chunks"]) >= 4
