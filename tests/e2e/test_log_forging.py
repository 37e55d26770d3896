"""Logs cannot be forged (issue 23, item 5): client-supplied text with newlines and control characters (a
model name, an unknown body field's name) goes through a real mitmdump at termlog_verbosity=debug, and no line
of its log starts with the forged text; the escaped form is there instead."""

from __future__ import annotations

import json

import pytest

from dragoman.demo import FakeUpstream
from e2e.test_record_replay import Mitm
from e2e.test_record_replay import post

pytestmark = pytest.mark.e2e

FORGED = "[forged] admin logged in"
MODELS = [
    f"claude-x\n{FORGED} (LF)",
    f"claude-y\r\n{FORGED} (CRLF)",
    f"claude-z\r{FORGED} (CR)",
    f"claude-u\u2028{FORGED} (LS)",
    f"claude-v\x1b[2K\r{FORGED} (ESC)",
]


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    work = tmp_path_factory.mktemp("logforge")
    with FakeUpstream() as up:
        m = Mitm(
            work,
            "forge",
            [
                "--mode",
                f"reverse:{up.url}",
                "--set",
                "dragoman_target=openai-chat",
                "--set",
                f"dragoman_upstream={up.url}/v1",
            ],
        )
        try:
            statuses = []
            for model in MODELS:
                body = {
                    "model": model,
                    "max_tokens": 64,
                    "stream": True,
                    "messages": [{"role": "user", "content": "hi"}],
                    f"x_unknown\n{FORGED} (field)": 1,
                }
                statuses.append(post(m.port, "/v1/messages", body)[0])
                bad = {"model": model, "messages": "not a list"}  # rejected by Dragoman itself
                statuses.append(post(m.port, "/v1/messages", bad)[0])
                chat = {"model": model, "messages": [{"role": "user", "content": "hi"}], "n": 2}
                statuses.append(post(m.port, "/v1/chat/completions", json.loads(json.dumps(chat)))[0])
        finally:
            text = m.stop()
    return text, statuses


def test_no_log_line_starts_with_forged_text(log):
    text, statuses = log
    assert 200 in statuses and 400 in statuses, statuses
    forged = [ln for ln in text.splitlines() if ln.lstrip().startswith("[forged]")]
    assert forged == [], forged[:5]
    assert "claude-x\\n[forged]" in text  # logged, escaped
    assert "\x1b" not in text and "\u2028" not in text
