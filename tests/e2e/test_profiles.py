"""Provider profiles end to end: a real mitmdump (``dragoman_target=openai-chat``, ``dragoman_profile=...``) in front
of fake providers that answer 400 exactly where DeepSeek V4, DeepSeek R1 and Gemini 3 document one
(tests/provider_upstream.py), with the official Anthropic and OpenAI (Responses) SDKs running a two-turn tool
loop through it (tests/e2e/sdk_tool_loop.py): once from scratch, once after a model switch (the history's tool
round came from another model and carries no reasoning state).

Without the profiles each of these loops ends in the provider's 400 at turn 2 (checked below with the
``generic`` profile); with them every loop ends with the answer, and the upstream got back exactly the
reasoning state it issued (Gemini's signature, DeepSeek's reasoning text) or the documented placeholder.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from provider_upstream import ANSWER
from provider_upstream import SKIP_SIGNATURE
from provider_upstream import THOUGHT_1
from provider_upstream import THOUGHT_2
from provider_upstream import ProviderUpstream

from .conftest import Proxy
from .conftest import client_python

pytestmark = pytest.mark.e2e

LOOP = Path(__file__).parent / "sdk_tool_loop.py"
SDKS = ("anthropic", "openai-responses")


@pytest.fixture(scope="module")
def loop_python() -> str:
    py = client_python()
    r = subprocess.run([py, "-c", "import anthropic, openai"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"the SDK client interpreter {py} lacks the anthropic/openai SDKs; set DRAGOMAN_CLIENT_PYTHON")
    return py


@pytest.fixture(scope="module")
def providers(tmp_path_factory):
    """``providers(kind, profile)`` -> (fake provider, mitmdump in front of it with that profile)."""
    started: dict[tuple[str, str], tuple[ProviderUpstream, Proxy]] = {}
    workdir = tmp_path_factory.mktemp("profiles")

    def get(kind: str, profile: str) -> tuple[ProviderUpstream, Proxy]:
        if (kind, profile) not in started:
            fake = ProviderUpstream(kind)
            proxy = Proxy("openai-chat", fake.server, workdir, ["--set", f"dragoman_profile={profile}"])
            started[(kind, profile)] = (fake, proxy)
        return started[(kind, profile)]

    yield get
    for fake, proxy in started.values():
        proxy.stop()
        fake.stop()


def run_loop(py: str, proxy: Proxy, sdk: str, stream: bool, switch: bool, model: str) -> dict:
    base = proxy.base_url("anthropic" if sdk == "anthropic" else "openai")
    sc = {"sdk": sdk, "base_url": base, "stream": stream, "switch": switch, "model": model}
    r = subprocess.run([py, str(LOOP), json.dumps(sc)], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip(), r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def assistant_messages(body: dict) -> list[dict]:
    return [m for m in body["messages"] if m["role"] == "assistant"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("sdk", SDKS)
def test_gemini_tool_loop_round_trips_the_thought_signature(providers, loop_python, sdk, stream):
    fake, proxy = providers("gemini", "gemini")
    before = len(fake.requests)
    result = run_loop(loop_python, proxy, sdk, stream, False, "gemini-3-pro")
    assert result["ok"], (result, proxy.log()[-4000:])
    first, second = result["turns"]
    assert first["calls"] and first["calls"][0]["name"] == "get_weather"
    assert THOUGHT_1 in first["thinking"]  # the thought summary reached the client as thinking
    assert second["text"] == ANSWER and THOUGHT_2 in second["thinking"]
    assert first["usage"] == {"input": 339, "output": 83}
    asked, answered = fake.requests[before:]
    cfg = asked["extra_body"]["google"]["thinking_config"]
    assert cfg["include_thoughts"] is True and cfg["thinking_budget"] > 0 and "reasoning_effort" not in asked
    assert "$schema" not in json.dumps(asked["tools"])
    [call] = assistant_messages(answered)[0]["tool_calls"]
    assert call["extra_content"]["google"]["thought_signature"] in fake.signatures  # exactly as Gemini issued it


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("sdk", SDKS)
def test_deepseek_tool_loop_returns_the_reasoning_content(providers, loop_python, sdk, stream):
    fake, proxy = providers("deepseek", "deepseek")
    before = len(fake.requests)
    result = run_loop(loop_python, proxy, sdk, stream, False, "deepseek-v4-pro")
    assert result["ok"], (result, proxy.log()[-4000:])
    first, second = result["turns"]
    assert first["calls"] and THOUGHT_1 in first["thinking"]
    assert second["text"] == ANSWER
    asked, answered = fake.requests[before:]
    assert asked["thinking"] == {"type": "enabled"} and asked["reasoning_effort"] in ("low", "high", "max")
    [assistant] = assistant_messages(answered)
    assert assistant["reasoning_content"] == THOUGHT_1 and assistant["tool_calls"]


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("kind", ["gemini", "deepseek"])
def test_after_a_model_switch_the_placeholder_lets_the_request_through(providers, loop_python, kind, sdk):
    fake, proxy = providers(kind, kind)
    before = len(fake.requests)
    result = run_loop(loop_python, proxy, sdk, True, True, "m")
    assert result["ok"], (result, proxy.log()[-4000:])
    [answer] = result["turns"]
    assert answer["text"] == ANSWER
    [sent] = fake.requests[before:]
    [assistant] = assistant_messages(sent)
    if kind == "gemini":
        assert assistant["tool_calls"][0]["extra_content"]["google"]["thought_signature"] == SKIP_SIGNATURE
    else:
        assert assistant["reasoning_content"] == ""
    wanted = "thought_signature" if kind == "gemini" else "reasoning_content"
    assert f"the history has no {wanted} for this upstream" in proxy.log()


@pytest.mark.parametrize("kind", ["gemini", "deepseek"])
def test_without_the_profile_the_provider_refuses_turn_two(providers, loop_python, kind):
    """The same loop with the ``generic`` profile: the provider's documented 400 (what users met before)."""
    fake, proxy = providers(kind, "generic")
    result = run_loop(loop_python, proxy, "anthropic", True, True, "m")
    assert not result["ok"]
    assert "400" in result["error"]


@pytest.mark.parametrize("sdk", SDKS)
def test_deepseek_r1_never_gets_reasoning_back(providers, loop_python, sdk):
    fake, proxy = providers("deepseek-r1", "deepseek-r1")
    before = len(fake.requests)
    result = run_loop(loop_python, proxy, sdk, True, False, "deepseek-reasoner")
    assert result["ok"], (result, proxy.log()[-4000:])
    first, second = result["turns"]
    assert THOUGHT_1 in first["thinking"] and second["text"] == ANSWER
    sent = fake.requests[before:]
    assert len(sent) == 2
    assert not any("reasoning_content" in m for body in sent for m in body["messages"])
    assert not any(k in sent[0] for k in ("thinking", "reasoning_effort", "extra_body"))


def test_the_profile_is_logged_once_at_start(providers):
    _, proxy = providers("gemini", "gemini")
    assert proxy.log().count("upstream default: provider profile gemini (set)") == 1
