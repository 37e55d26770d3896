"""The Endpoints addon with taddons/tflow: HEAD /, model lists, count_tokens, the WebSocket refusal, lazy
connections. No network."""

from __future__ import annotations

import json

import pytest
from mitmproxy import http
from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman.mitm.endpoints import METADATA_KEY
from dragoman.mitm.endpoints import Endpoints
from dragoman.mitm.endpoints import models_request
from dragoman.mitm.translate_addon import Translate

CLIENT_KEY = "sk-client-SECRET-1"
OPTION_KEY = "sk-option-SECRET-2"
REVERSE = "reverse:http://127.0.0.1:9999"
ANTHROPIC_LIST = {
    "data": [
        {"type": "model", "id": "claude-a", "display_name": "A", "created_at": "2025-01-02T03:04:05Z"},
        {"type": "model", "id": "claude-b", "display_name": "B", "created_at": "2024-06-01T00:00:00Z"},
    ],
    "has_more": False,
    "first_id": "claude-a",
    "last_id": "claude-b",
}
OPENAI_LIST = {"object": "list", "data": [{"id": "gpt-a", "object": "model", "created": 1700000000, "owned_by": "x"}]}


def make_flow(method: str, url: str, body: object = None, headers: dict | None = None, mode: str = "regular"):
    raw = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = http.Request.make(method, url, raw, headers or {})
    f = tflow.tflow(req=req)
    f.client_conn.proxy_mode = ProxyMode.parse(mode)
    return f


def respond(f: http.HTTPFlow, status: int, body: object, content_type: str = "application/json") -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    f.response = http.Response.make(status, data, {"content-type": content_type})


@pytest.fixture
def addon():
    return Endpoints()


@pytest.fixture
def translate():
    return Translate()


@pytest.fixture
def tctx(addon, translate):
    with taddons.context(addon, translate) as tctx:
        yield tctx


def on(tctx, addon, **opts):
    tctx.configure(addon, **opts)


# -- scope -----------------------------------------------------------------------------------------


def test_off_without_target(tctx, addon):
    f = make_flow("HEAD", "https://api.anthropic.com/")
    addon.request(f)
    assert f.response is None


def test_head_probe_answered_on_official_host(tctx, addon):
    on(tctx, addon, dragoman_target="openai-chat")
    f = make_flow("HEAD", "https://api.anthropic.com/")
    addon.request(f)
    assert f.response is not None and f.response.status_code == 200 and f.response.content == b""
    assert f.metadata[METADATA_KEY] == "head"


def test_head_probe_answered_in_reverse_mode(tctx, addon):
    on(tctx, addon, dragoman_target="openai-chat")
    f = make_flow("HEAD", "http://127.0.0.1:8080/", mode=REVERSE)
    addon.request(f)
    assert f.response is not None and f.response.status_code == 200


@pytest.mark.parametrize(
    "method, url",
    [
        ("HEAD", "https://github.com/"),
        ("GET", "https://api.deepseek.com/v1/models"),
        ("POST", "https://example.com/v1/messages/count_tokens"),
        ("GET", "https://chatgpt.com/backend-api/me"),
        ("GET", "https://api.anthropic.com/api/hello"),
        ("POST", "https://api.anthropic.com/v1/messages"),  # Translate's job
    ],
)
def test_unrelated_flows_untouched(tctx, addon, method, url):
    on(tctx, addon, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
    f = make_flow(method, url, {"model": "m"} if method == "POST" else None, {"x-api-key": CLIENT_KEY})
    before = (f.request.url, dict(f.request.headers), f.request.content)
    addon.request(f)
    assert f.response is None
    assert (f.request.url, dict(f.request.headers), f.request.content) == before


# -- WebSocket -------------------------------------------------------------------------------------

WS_HEADERS = {
    "connection": "Upgrade",
    "upgrade": "websocket",
    "sec-websocket-version": "13",
    "sec-websocket-key": "6MdvBW366LMfj7GSxKnwWQ==",
    "openai-beta": "responses_websockets=2026-02-06",
    "authorization": f"Bearer {CLIENT_KEY}",
}


@pytest.mark.parametrize(
    "url, mode",
    [
        ("https://api.openai.com/v1/responses", "regular"),
        ("https://chatgpt.com/backend-api/codex/responses", "regular"),
        ("http://127.0.0.1:8080/v1/responses", REVERSE),
    ],
)
def test_websocket_upgrade_refused_with_426(tctx, addon, translate, url, mode):
    on(tctx, addon, dragoman_target="anthropic", dragoman_match="~u responses")  # Translate would match GETs too
    f = make_flow("GET", url, headers=WS_HEADERS, mode=mode)
    addon.request(f)
    translate.request(f)  # registered after Endpoints: must leave the answered flow alone
    assert f.response is not None and f.response.status_code == 426
    err = json.loads(f.response.content)["error"]
    assert "WebSocket" in err["message"]
    assert f.response.headers["connection"] == "close"
    assert f.metadata[METADATA_KEY] == "websocket-refused"
    assert f.request.host != "127.0.0.1" or mode == REVERSE  # not rerouted


def test_websocket_elsewhere_untouched(tctx, addon):
    on(tctx, addon, dragoman_target="anthropic")
    f = make_flow("GET", "https://api.openai.com/v1/realtime", headers=WS_HEADERS)
    addon.request(f)
    assert f.response is None


# -- models ----------------------------------------------------------------------------------------


def test_models_request_paths():
    assert models_request("/v1/models") == (True, None)
    assert models_request("/v1/models?limit=20") == (True, None)
    assert models_request("/models/") == (True, None)
    assert models_request("/v1/models/claude-x") == (True, "claude-x")
    assert models_request("/v1/models/a/b") is None
    assert models_request("/v1/modelsx") is None


def test_models_from_model_map_without_upstream(tctx, addon):
    on(tctx, addon, dragoman_target="openai-chat", dragoman_model_map=["claude-*=deepseek-chat", "claude-x=qwen3"])
    f = make_flow("GET", "https://api.anthropic.com/v1/models", headers={"x-api-key": CLIENT_KEY})
    addon.request(f)
    assert f.response is not None and f.response.status_code == 200
    body = json.loads(f.response.content)
    assert [m["id"] for m in body["data"]] == ["deepseek-chat", "claude-x", "qwen3"]
    assert body["data"][0] == {
        "type": "model",
        "id": "deepseek-chat",
        "display_name": "deepseek-chat",
        "created_at": "1970-01-01T00:00:00Z",
    }
    assert body["has_more"] is False and body["first_id"] == "deepseek-chat" and body["last_id"] == "qwen3"


def test_models_openai_shape_on_openai_host(tctx, addon):
    on(tctx, addon, dragoman_target="anthropic", dragoman_model_map=["claude-sonnet-4-5"])
    f = make_flow("GET", "https://api.openai.com/v1/models")
    addon.request(f)
    assert json.loads(f.response.content) == {
        "object": "list",
        "data": [{"id": "claude-sonnet-4-5", "object": "model", "created": 0, "owned_by": "dragoman"}],
    }


def test_models_forwarded_to_upstream_and_converted(tctx, addon):
    on(
        tctx,
        addon,
        dragoman_target="anthropic",
        dragoman_upstream="https://anthropic.example:8443",
        dragoman_api_key=OPTION_KEY,
        dragoman_model_map=["gpt-4o=claude-a"],
    )
    f = make_flow("GET", "https://api.openai.com/v1/models?limit=5", headers={"authorization": f"Bearer {CLIENT_KEY}"})
    addon.request(f)
    assert f.response is None
    r = f.request
    assert r.url == "https://anthropic.example:8443/v1/models?limit=5"
    assert r.headers["x-api-key"] == OPTION_KEY and "authorization" not in r.headers
    assert r.headers["anthropic-version"] == "2023-06-01"
    assert r.headers["accept-encoding"] == "identity"
    respond(f, 200, ANTHROPIC_LIST)
    addon.response(f)
    body = json.loads(f.response.content)
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["claude-a", "claude-b", "gpt-4o"]
    assert body["data"][0] == {"id": "claude-a", "object": "model", "created": 1735787045, "owned_by": "dragoman"}
    assert not addon.pending


def test_models_forwarded_openai_list_to_anthropic_client_keeps_client_key(tctx, addon):
    on(tctx, addon, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:11434/v1")
    f = make_flow(
        "GET", "https://api.anthropic.com/v1/models", headers={"x-api-key": CLIENT_KEY, "anthropic-beta": "b"}
    )
    addon.request(f)
    assert f.request.url == "http://127.0.0.1:11434/v1/models"
    assert f.request.headers["authorization"] == f"Bearer {CLIENT_KEY}"
    assert "x-api-key" not in f.request.headers and "anthropic-beta" not in f.request.headers
    respond(f, 200, OPENAI_LIST)
    addon.response(f)
    body = json.loads(f.response.content)
    assert body["data"] == [
        {"type": "model", "id": "gpt-a", "display_name": "gpt-a", "created_at": "2023-11-14T22:13:20Z"}
    ]


@pytest.mark.parametrize(
    "status, body, ct",
    [(404, {"error": "no"}, "application/json"), (200, b"ok", "text/plain"), (200, {"data": "x"}, "application/json")],
)
def test_models_fallback_to_model_map_when_upstream_list_unusable(tctx, addon, status, body, ct):
    on(tctx, addon, dragoman_target="openai-chat", dragoman_upstream="http://u.example/v1", dragoman_model_map=["m1"])
    f = make_flow("GET", "https://api.anthropic.com/v1/models")
    addon.request(f)
    respond(f, status, body, ct)
    addon.response(f)
    assert f.response.status_code == 200
    assert [m["id"] for m in json.loads(f.response.content)["data"]] == ["m1"]


def test_models_reverse_mode_without_upstream_forwards_to_same_host(tctx, addon):
    on(tctx, addon, dragoman_target="openai-chat")
    f = make_flow("GET", "http://127.0.0.1:8080/v1/models", headers={"anthropic-version": "2023-06-01"}, mode=REVERSE)
    addon.request(f)
    assert f.response is None and f.request.host == "127.0.0.1" and f.request.path == "/v1/models"
    respond(f, 200, OPENAI_LIST)
    addon.response(f)
    assert json.loads(f.response.content)["data"][0]["type"] == "model"


def test_model_retrieve_answered_locally(tctx, addon):
    on(tctx, addon, dragoman_target="openai-chat", dragoman_upstream="http://u.example/v1")
    f = make_flow("GET", "https://api.anthropic.com/v1/models/claude-opus-4-8")
    addon.request(f)
    assert json.loads(f.response.content)["id"] == "claude-opus-4-8"


def test_error_releases_pending(tctx, addon):
    on(tctx, addon, dragoman_target="openai-chat", dragoman_upstream="http://u.example/v1")
    f = make_flow("GET", "https://api.anthropic.com/v1/models")
    addon.request(f)
    assert f.id in addon.pending
    addon.error(f)
    assert not addon.pending


# -- count_tokens ----------------------------------------------------------------------------------

COUNT_BODY = {
    "model": "claude-x",
    "system": [{"type": "text", "text": "You are terse. " * 20}],
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
}


def test_count_tokens_estimated_locally(tctx, addon):
    on(tctx, addon, dragoman_target="openai-responses", dragoman_upstream="http://u.example/v1")
    f = make_flow("POST", "https://api.anthropic.com/v1/messages/count_tokens?beta=true", COUNT_BODY)
    addon.request(f)
    assert f.response is not None and f.response.status_code == 200
    assert f.response.headers["x-dragoman-estimate"] == "true"
    tokens = json.loads(f.response.content)["input_tokens"]
    assert 346 + 60 < tokens < 346 + 200  # the tool prompt, the system text, the tool, the message
    assert f.metadata[METADATA_KEY] == "count_tokens-estimated"


@pytest.mark.parametrize("raw", [b"not json", b"[1]", b""])
def test_count_tokens_bad_body_is_400_in_anthropic_shape(tctx, addon, raw):
    on(tctx, addon, dragoman_target="openai-chat")
    f = make_flow("POST", "https://api.anthropic.com/v1/messages/count_tokens", raw)
    addon.request(f)
    assert f.response.status_code == 400
    body = json.loads(f.response.content)
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"


def test_count_tokens_forwarded_to_anthropic_upstream(tctx, addon):
    on(
        tctx,
        addon,
        dragoman_target="anthropic",
        dragoman_upstream="https://proxy.example/anthropic",
        dragoman_api_key=OPTION_KEY,
        dragoman_model_map=["claude-x=claude-real"],
    )
    f = make_flow(
        "POST",
        "https://api.anthropic.com/v1/messages/count_tokens?beta=true",
        COUNT_BODY,
        {"x-api-key": CLIENT_KEY, "cookie": "s=1"},
    )
    addon.request(f)
    assert f.response is None
    r = f.request
    assert r.url == "https://proxy.example/anthropic/v1/messages/count_tokens?beta=true"
    assert json.loads(r.content)["model"] == "claude-real"
    assert r.headers["x-api-key"] == OPTION_KEY and "cookie" not in r.headers
    assert f.metadata[METADATA_KEY] == "count_tokens-forwarded"


def test_count_tokens_identity_without_upstream_keeps_host(tctx, addon):
    on(tctx, addon, dragoman_target="anthropic")
    f = make_flow("POST", "https://api.anthropic.com/v1/messages/count_tokens", COUNT_BODY, {"x-api-key": CLIENT_KEY})
    raw = f.request.content
    addon.request(f)
    assert f.response is None and f.request.host == "api.anthropic.com" and f.request.content == raw
    assert f.request.headers["x-api-key"] == CLIENT_KEY


# -- connection strategy ---------------------------------------------------------------------------


@pytest.fixture
def strategy_ctx(addon, translate):
    with taddons.context(addon, translate) as tctx:
        if "connection_strategy" not in tctx.options:
            tctx.options.add_option("connection_strategy", str, "eager", "", choices=("eager", "lazy"))
        yield tctx


def test_lazy_connections_when_on(strategy_ctx, addon):
    assert strategy_ctx.options.connection_strategy == "eager"
    strategy_ctx.configure(addon, dragoman_target="openai-chat")
    assert strategy_ctx.options.connection_strategy == "lazy"


def test_connection_strategy_untouched_when_off(strategy_ctx, addon):
    addon.running()
    strategy_ctx.configure(addon, dragoman_upstream="http://u.example")
    assert strategy_ctx.options.connection_strategy == "eager"


def test_explicit_eager_is_respected(strategy_ctx, addon):
    strategy_ctx.options.update(connection_strategy="eager")  # the user's --set, equal to the default
    strategy_ctx.configure(addon, dragoman_target="openai-chat")
    addon.running()
    assert strategy_ctx.options.connection_strategy == "eager"
