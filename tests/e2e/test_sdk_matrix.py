"""Official SDK clients -> real mitmdump with the addon -> fake upstream in another protocol.

The matrix is (client SDK, upstream protocol) x scenario x (create | stream). A direction whose codec
has not landed yet is skipped with the reason.
"""

from __future__ import annotations

import importlib

import pytest

from dragoman import demo as fu

pytestmark = pytest.mark.e2e

PROTOCOL_PACKAGES = {
    "anthropic": "dragoman.protocols.anthropic_messages",
    "openai-chat": "dragoman.protocols.openai_chat",
    "openai-responses": "dragoman.protocols.openai_responses",
}

DIRECTIONS = [
    ("anthropic", "openai-chat"),
    ("openai-chat", "anthropic"),
    ("openai-responses", "anthropic"),
    ("openai-responses", "openai-chat"),
    ("anthropic", "openai-responses"),
    ("openai-chat", "openai-responses"),
]
IDENTITY = [("anthropic", "anthropic"), ("openai-chat", "openai-chat"), ("openai-responses", "openai-responses")]

EXPECTED_TOOLS = [("get_weather", {"city": "Paris", "unit": "c"}), ("get_time", {"tz": "Asia/Tokyo"})]
UPSTREAM_PATHS = {
    "anthropic": "/v1/messages",
    "openai-chat": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
}
OK_STOP = {"anthropic": "end_turn", "openai-chat": "stop", "openai-responses": "completed"}
TOOL_STOP = {"anthropic": "tool_use", "openai-chat": "tool_calls", "openai-responses": "completed"}
LENGTH_STOP = {"anthropic": "max_tokens", "openai-chat": "length", "openai-responses": "incomplete"}


def codec_ready(protocol: str) -> bool:
    try:
        return getattr(importlib.import_module(PROTOCOL_PACKAGES[protocol]), "CODEC", None) is not None
    except ImportError:
        return False


def direction_id(d: tuple[str, str]) -> str:
    return f"{d[0]}-client-to-{d[1]}"


@pytest.fixture(params=DIRECTIONS, ids=direction_id)
def direction(request):
    client, target = request.param
    missing = [p for p in {client, target} if not codec_ready(p)]
    if missing:
        pytest.skip(f"codec not landed yet: {', '.join(missing)}")
    return client, target


def check_upstream_request(seen, sdk: str, target: str) -> None:
    assert seen is not None, "the request never reached the upstream"
    assert seen.path.split("?")[0] == UPSTREAM_PATHS[target]
    if target == "anthropic":
        assert seen.headers.get("x-api-key") == "test-client-key"
        assert seen.headers.get("anthropic-version")
        assert "authorization" not in seen.headers
    else:
        assert seen.headers.get("authorization") == "Bearer test-client-key"
        assert "x-api-key" not in seen.headers
    assert seen.headers.get("accept-encoding") == "identity"


@pytest.mark.parametrize("mode", ["create", "stream"])
def test_text(direction, mode, proxies, fake, run_client):
    client, target = direction
    res, seen = run_client(proxies(target), fake, client, mode, "text")
    assert res["ok"], res
    assert res["text"] == fu.TEXT
    assert res["stop"] == OK_STOP[client]
    assert res["tool_calls"] == []
    check_upstream_request(seen, client, target)
    assert seen.body.get("stream", False) is (mode == "stream")


@pytest.mark.parametrize("mode", ["create", "stream"])
def test_thinking(direction, mode, proxies, fake, run_client):
    client, target = direction
    res, _ = run_client(proxies(target), fake, client, mode, "thinking")
    assert res["ok"], res
    assert res["text"] == fu.TEXT
    assert res["thinking"] == fu.THINKING


@pytest.mark.parametrize("mode", ["create", "stream"])
def test_two_parallel_tool_calls(direction, mode, proxies, fake, run_client):
    client, target = direction
    res, seen = run_client(proxies(target), fake, client, mode, "tools")
    assert res["ok"], res
    got = [(c["name"], c["arguments"]) for c in res["tool_calls"]]
    assert got == EXPECTED_TOOLS
    ids = [c["id"] for c in res["tool_calls"]]
    assert all(ids) and len(set(ids)) == 2
    assert res["stop"] == TOOL_STOP[client]
    assert seen.body.get("tools"), "the tool definitions must reach the upstream"


@pytest.mark.parametrize("mode", ["create", "stream"])
def test_length_stop(direction, mode, proxies, fake, run_client):
    client, target = direction
    res, _ = run_client(proxies(target), fake, client, mode, "length")
    assert res["ok"], res
    assert res["text"] == fu.TEXT
    assert res["stop"] == LENGTH_STOP[client]
    if client == "openai-responses":
        assert res["incomplete_reason"] == "max_output_tokens"


@pytest.mark.parametrize("mode", ["create", "stream"])
def test_custom_tool_call(direction, mode, proxies, fake, run_client):
    """A freeform (custom) tool: a Responses client gets a ``custom_tool_call`` with the raw input back,
    whatever the upstream; other clients see the function Dragoman offered for it (one ``input`` string)."""
    client, target = direction
    res, seen = run_client(proxies(target), fake, client, mode, "custom")
    assert res["ok"], res
    if client == "openai-responses":
        assert res["custom_calls"] == [{"id": fu.CUSTOM_CALL[0], "name": "apply_patch", "input": fu.PATCH}]
        assert res["tool_calls"] == []
        if target != "openai-responses":
            # offered upstream as a function with one string parameter
            tools = seen.body["tools"]
            names = [t.get("name") or t.get("function", {}).get("name") for t in tools]
            assert names == ["apply_patch"]
    else:
        assert [(c["name"], c["arguments"]) for c in res["tool_calls"]] == [("apply_patch", {"input": fu.PATCH})]


@pytest.mark.parametrize("mode", ["create", "stream"])
def test_rate_limit_429(direction, mode, proxies, fake, run_client):
    client, target = direction
    res, _ = run_client(proxies(target), fake, client, mode, "error429")
    assert not res["ok"], res
    assert res["error_type"] == "RateLimitError"
    assert res["status"] == 429
    assert fu.ERROR_429_MESSAGE in res["message"]


def test_midstream_error(direction, proxies, fake, run_client):
    client, target = direction
    res, _ = run_client(proxies(target), fake, client, "stream", "midstream_error")
    assert not res["ok"], res
    assert fu.MIDSTREAM_ERROR_MESSAGE in res["message"], res


def test_stall_first_delta_arrives_before_the_stall_ends(direction, proxies, fake, run_client):
    client, target = direction
    res, _ = run_client(proxies(target), fake, client, "stream", "stall")
    assert res["ok"], res
    assert res["text"] == fu.TEXT
    assert res["first_delta_s"] is not None
    assert res["first_delta_s"] < 1.0, res
    assert res["total_s"] >= 1.8, res


def test_upstream_drop_is_not_a_clean_success(direction, proxies, fake, run_client):
    client, target = direction
    res, _ = run_client(proxies(target), fake, client, "stream", "drop")
    assert not res["ok"], res


@pytest.mark.parametrize("pair", IDENTITY, ids=direction_id)
@pytest.mark.parametrize("mode", ["create", "stream"])
def test_identity_passthrough(pair, mode, proxies, fake, run_client):
    client, target = pair
    if not codec_ready(client):
        pytest.skip(f"codec not landed yet: {client}")
    res, seen = run_client(proxies(target), fake, client, mode, "tools")
    assert res["ok"], res
    assert [(c["name"], c["arguments"]) for c in res["tool_calls"]] == EXPECTED_TOOLS
    check_upstream_request(seen, client, target)
