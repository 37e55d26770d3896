"""Profiles in the addon (taddons/tflow, no network): the option is validated, a set profile overrides the one the
upstream's host would give, the choice is logged once at start, a placeholder once per flow."""

from __future__ import annotations

import json
import logging

import pytest
from mitmproxy import exceptions

from .test_translate_addon import make_flow

HISTORY = {
    "model": "claude-x",
    "max_tokens": 64,
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "w", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
    ],
}


def sent(addon, tctx, **opts) -> dict:
    tctx.configure(addon, dragoman_target="openai-chat", **opts)
    f = make_flow("anthropic", HISTORY)
    addon.request(f)
    assert f.response is None
    return json.loads(f.request.content)


def test_bad_profile_is_rejected(tctx, addon):
    with pytest.raises(exceptions.OptionsError, match="dragoman_profile"):
        tctx.configure(addon, dragoman_profile="deepsek")


def test_detected_from_the_upstream_host_and_logged_once(tctx, addon, caplog):
    caplog.set_level(logging.INFO)
    body = sent(addon, tctx, dragoman_upstream="https://api.deepseek.com/v1")
    assert body["thinking"] == {"type": "enabled"} and body["messages"][1]["reasoning_content"] == ""
    tctx.configure(addon, dragoman_model_map=["gpt-x"])  # a reconfigure with the same profile logs nothing new
    lines = [r.getMessage() for r in caplog.records if "provider profile" in r.getMessage()]
    assert lines == ["upstream default: provider profile deepseek (detected from api.deepseek.com)"]
    assert any("the history has no reasoning_content for this upstream" in r.getMessage() for r in caplog.records)


def test_a_set_profile_overrides_the_host(tctx, addon):
    body = sent(addon, tctx, dragoman_upstream="https://api.deepseek.com/v1", dragoman_profile="openai")
    assert "thinking" not in body and body["reasoning_effort"] == "low"
    assert "reasoning_content" not in body["messages"][1] and "max_completion_tokens" in body


def test_a_set_profile_on_a_local_upstream_is_the_detected_one(tctx, addon):
    local = sent(addon, tctx, dragoman_upstream="http://127.0.0.1:8000/v1", dragoman_profile="deepseek")
    tctx.configure(addon, dragoman_profile="auto")
    detected = sent(addon, tctx, dragoman_upstream="https://api.deepseek.com/v1")
    assert local == detected


def test_without_upstream_url_the_client_host_decides(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-chat")
    f = make_flow("anthropic", HISTORY, host="generativelanguage.googleapis.com")
    addon.request(f)
    body = json.loads(f.request.content)
    assert body["extra_body"]["google"]["thinking_config"]["include_thoughts"] is True


def test_profile_option_with_a_routes_file_is_refused(tctx, addon, tmp_path):
    routes = tmp_path / "routes.yaml"
    routes.write_text(
        "upstreams:\n  - name: x\n    protocol: openai-chat\n    base_url: http://h\nroutes:\n  - match: '*'\n    to: x\n"
    )
    with pytest.raises(exceptions.OptionsError, match="use profile: on the upstream"):
        tctx.configure(addon, dragoman_config=str(routes), dragoman_profile="gemini")
