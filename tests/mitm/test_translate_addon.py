"""The Translate addon with taddons/tflow: options, request rewriting, responses, the stream callable. No network."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy.proxy import mode_specs
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman import demo as fu
from dragoman.mitm.answer.callables import stream_callable
from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.mitm.translate_addon import join_endpoint
from dragoman.mitm.translate_addon import parse_upstream
from dragoman.mitm.translate_addon import resolve_api_key

CLIENT_KEY = "sk-client-SECRET-1111"
OPTION_KEY = "sk-option-SECRET-2222"
ENV_KEY = "sk-env-SECRET-3333"

PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}

BODIES = {
    "anthropic": {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    "openai-chat": {"model": "gpt-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    "openai-responses": {"model": "gpt-x", "max_output_tokens": 64, "input": "hi"},
}


def make_flow(
    client: str,
    body: bytes | dict | None = None,
    headers: dict | None = None,
    host: str = "client.example",
    stream: bool = False,
):
    if body is None:
        body = dict(BODIES[client])
        if stream:
            body["stream"] = True
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    hdrs = {"host": f"{host}:8080", "content-type": "application/json"}
    if client == "anthropic":
        hdrs.update({"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"})
    else:
        hdrs["authorization"] = f"Bearer {CLIENT_KEY}"
    hdrs.update(headers or {})
    req = http.Request.make("POST", f"http://{host}:8080{PATHS[client]}", raw, hdrs)
    f = tflow.tflow(req=req)
    # reverse mode: any endpoint path is handled (in regular mode only the official hosts are, see hosts.py)
    f.client_conn.proxy_mode = mode_specs.ProxyMode.parse(f"reverse:http://{host}:8080")
    return f


def header_values(msg) -> str:
    return " ".join(f"{k}: {v}" for k, v in msg.headers.items(multi=True))


# -- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "opts, needle",
    [
        ({"dragoman_target": "vertex"}, "dragoman_target"),
        ({"dragoman_upstream": "ftp://api.example"}, "scheme"),
        ({"dragoman_upstream": "api.openai.com/v1"}, "scheme"),
        ({"dragoman_upstream": "https://"}, "no host"),
        ({"dragoman_upstream": "https://h.example/v1?x=1"}, "query"),
        ({"dragoman_upstream": "https://h.example:99999"}, "port"),
        ({"dragoman_upstream": "https://user:pw@h.example"}, "credentials"),
        ({"dragoman_api_key": "env:DRAGOMAN_TEST_SURELY_MISSING"}, "DRAGOMAN_TEST_SURELY_MISSING is not set"),
        ({"dragoman_api_key": "env:"}, "variable name"),
        ({"dragoman_model_map": ["=gpt"]}, "PATTERN=MODEL"),
        ({"dragoman_model_map": [""]}, "empty"),
        ({"dragoman_match": "~q ~~ ("}, "dragoman_match"),
        ({"dragoman_chat_reasoning": "think"}, "dragoman_chat_reasoning"),
        ({"dragoman_chat_max_tokens_field": "limit"}, "dragoman_chat_max_tokens_field"),
    ],
)
def test_bad_options_are_rejected(tctx, addon, opts, needle):
    with pytest.raises(exceptions.OptionsError, match=needle):
        tctx.configure(addon, **opts)


def test_missing_env_key_message_does_not_echo_secrets(tctx, addon, monkeypatch):
    monkeypatch.delenv("DRAGOMAN_TEST_EMPTY", raising=False)
    with pytest.raises(exceptions.OptionsError) as e:
        tctx.configure(addon, dragoman_api_key="env:DRAGOMAN_TEST_EMPTY")
    assert "DRAGOMAN_TEST_EMPTY" in str(e.value)


def test_good_options(tctx, addon, monkeypatch):
    monkeypatch.setenv("DRAGOMAN_TEST_KEY", ENV_KEY)
    tctx.configure(
        addon,
        dragoman_target="openai-chat",
        dragoman_upstream="https://api.openai.com/v1/",
        dragoman_api_key="env:DRAGOMAN_TEST_KEY",
        dragoman_model_map=["claude-*=gpt-4o", "o3"],
        dragoman_match="~d client.example",
    )
    assert addon.target.value == "openai-chat"
    assert addon.upstream == ("https", "api.openai.com", 443, "/v1")
    assert addon.api_key == ENV_KEY
    assert [r.model for r in addon.model_map] == ["gpt-4o", "o3"]
    assert addon.match is not None
    tctx.configure(addon, dragoman_target="", dragoman_upstream="", dragoman_api_key="", dragoman_match="")
    assert addon.target is None and addon.upstream is None and addon.api_key is None and addon.match is None


def test_parse_upstream_defaults():
    assert parse_upstream("http://localhost:11434/v1") == ("http", "localhost", 11434, "/v1")
    assert parse_upstream("http://127.0.0.1") == ("http", "127.0.0.1", 80, "")
    assert parse_upstream("https://api.anthropic.com") == ("https", "api.anthropic.com", 443, "")


def test_join_endpoint():
    assert join_endpoint("", "/v1/messages") == "/v1/messages"
    assert join_endpoint("/v1", "/v1/messages") == "/v1/messages"
    assert join_endpoint("/v1", "/chat/completions") == "/v1/chat/completions"
    assert join_endpoint("/v1/chat/completions", "/chat/completions") == "/v1/chat/completions"
    assert join_endpoint("/proxy", "/responses") == "/proxy/responses"


def test_resolve_api_key():
    assert resolve_api_key("", {}) is None
    assert resolve_api_key(" sk-1 ", {}) == "sk-1"
    assert resolve_api_key("env:K", {"K": "v"}) == "v"
    with pytest.raises(ValueError, match="K is not set"):
        resolve_api_key("env:K", {"K": " "})


def test_deferred_typo_is_warned_once(tctx, addon, caplog):
    caplog.set_level(logging.WARNING)
    tctx.options.deferred["dragoman_tagret"] = "openai-chat"
    tctx.options.deferred["other_thing"] = "x"
    addon.warn_deferred()
    addon.warn_deferred()
    hits = [r for r in caplog.records if "dragoman_tagret" in r.getMessage()]
    assert len(hits) == 1
    assert "dragoman_target" in hits[0].getMessage()
    assert not any("other_thing" in r.getMessage() for r in caplog.records)


# -- request rewriting ----------------------------------------------------------------------------


def test_off_by_default_passes_everything(tctx, addon):
    f = make_flow("anthropic")
    before = f.request.get_state()
    addon.request(f)
    assert f.request.get_state() == before
    assert f.response is None


def test_translated_request_url_headers_body(tctx, addon):
    tctx.configure(
        addon,
        dragoman_target="openai-chat",
        dragoman_upstream="https://api.openai.com/v1",
        dragoman_model_map=["claude-*=gpt-4o"],
    )
    f = make_flow("anthropic", headers={"anthropic-beta": "x", "accept-encoding": "gzip, br", "cookie": "c=1"})
    addon.request(f)
    r = f.request
    assert f.response is None
    assert r.url == "https://api.openai.com/v1/chat/completions"
    assert r.host_header == "api.openai.com"
    assert r.headers["authorization"] == f"Bearer {CLIENT_KEY}"  # moved
    assert "x-api-key" not in r.headers
    assert "anthropic-version" not in r.headers and "anthropic-beta" not in r.headers
    assert r.headers["accept-encoding"] == "identity"
    assert r.headers["cookie"] == "c=1"  # only removed when dragoman_api_key replaces the client's credentials
    body = json.loads(r.content)
    assert body["model"] == "gpt-4o"
    assert body["messages"][-1]["role"] == "user"
    assert int(r.headers["content-length"]) == len(r.raw_content)
    meta = f.metadata[METADATA_KEY]
    assert meta["client"] == "anthropic" and meta["target"] == "openai-chat"
    assert meta["client_model"] == "claude-x" and meta["upstream_model"] == "gpt-4o"
    assert f.id in addon.flows


def test_openai_client_to_anthropic_target_sets_version_and_key(tctx, addon):
    tctx.configure(addon, dragoman_target="anthropic", dragoman_upstream="https://api.anthropic.com")
    f = make_flow("openai-chat")
    addon.request(f)
    r = f.request
    assert r.url == "https://api.anthropic.com/v1/messages"
    assert r.headers["x-api-key"] == CLIENT_KEY
    assert r.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in r.headers
    body = json.loads(r.content)
    assert body["model"] == "gpt-x" and body["max_tokens"] == 64


def test_option_key_replaces_client_secrets(tctx, addon):
    tctx.configure(
        addon, dragoman_target="openai-chat", dragoman_upstream="http://localhost:11434/v1", dragoman_api_key=OPTION_KEY
    )
    f = make_flow("anthropic", headers={"cookie": "session=abc", "authorization": f"Bearer {CLIENT_KEY}"})
    addon.request(f)
    r = f.request
    assert r.url == "http://localhost:11434/v1/chat/completions"
    assert r.headers["authorization"] == f"Bearer {OPTION_KEY}"
    assert "cookie" not in r.headers and "x-api-key" not in r.headers
    assert CLIENT_KEY not in header_values(r)
    assert CLIENT_KEY.encode() not in r.raw_content


def test_no_upstream_keeps_host_and_uses_target_path(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-responses")
    f = make_flow("anthropic", host="reverse.example")
    addon.request(f)
    assert f.request.host == "reverse.example" and f.request.port == 8080
    assert f.request.path == "/v1/responses"


def test_identity_is_byte_for_byte_and_keeps_query(tctx, addon):
    tctx.configure(addon, dragoman_target="anthropic", dragoman_upstream="https://api.anthropic.com")
    raw = b'{ "model" : "claude-x",\n "max_tokens":64, "messages":[{"role":"user","content":"h\\u00e9"}], "zz_unknown": [1, 2.50] }'
    f = make_flow("anthropic", body=raw)
    f.request.path = "/v1/messages?beta=true"
    addon.request(f)
    assert f.request.raw_content == raw
    assert f.request.url == "https://api.anthropic.com/v1/messages?beta=true"
    assert f.request.headers["x-api-key"] == CLIENT_KEY
    assert f.request.headers["anthropic-version"] == "2023-06-01"


def test_identity_without_upstream_leaves_url(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-chat")
    f = make_flow("openai-chat")
    url = f.request.url
    addon.request(f)
    assert f.request.url == url


def test_identity_model_map_changes_only_the_model(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_model_map=["gpt-x=gpt-y"])
    f = make_flow(
        "openai-chat", body={"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}], "weird": {"a": 1}}
    )
    addon.request(f)
    assert json.loads(f.request.content) == {
        "model": "gpt-y",
        "messages": [{"role": "user", "content": "hi"}],
        "weird": {"a": 1},
    }


@pytest.mark.parametrize(
    "mutate",
    [
        lambda f: setattr(f.request, "method", "GET"),
        lambda f: setattr(f.request, "path", "/v1/models"),
        lambda f: setattr(f, "is_replay", "request"),
        lambda f: setattr(f, "response", http.Response.make(200, b"{}")),
    ],
    ids=["get", "other-path", "replay", "has-response"],
)
def test_guards(tctx, addon, mutate):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="https://api.openai.com/v1")
    f = make_flow("anthropic")
    mutate(f)
    before = f.request.get_state()
    addon.request(f)
    assert f.request.get_state() == before
    assert f.id not in addon.flows


def test_match_filter(tctx, addon):
    tctx.configure(
        addon,
        dragoman_target="openai-chat",
        dragoman_upstream="https://api.openai.com/v1",
        dragoman_match="~d only.example",
    )
    f = make_flow("anthropic", host="client.example")
    addon.request(f)
    assert f.request.host == "client.example"
    g = make_flow("anthropic", host="only.example")
    addon.request(g)
    assert g.request.host == "api.openai.com"


# -- 400 in the client's shape ----------------------------------------------------------------------


@pytest.mark.parametrize("client", ["anthropic", "openai-chat", "openai-responses"])
@pytest.mark.parametrize(
    "body", [b"{not json", b"[1, 2]", b'{"model": 5}'], ids=["bad-json", "not-object", "bad-types"]
)
def test_invalid_client_body_gets_400_in_client_shape(tctx, addon, client, body):
    target = "openai-chat" if client == "anthropic" else "anthropic"
    tctx.configure(addon, dragoman_target=target, dragoman_upstream="https://upstream.example")
    f = make_flow(client, body=body)
    addon.request(f)
    assert f.response is not None, "nothing may be forwarded"
    assert f.response.status_code == 400
    assert f.response.headers["content-type"] == "application/json"
    err = json.loads(f.response.content)
    if client == "anthropic":
        assert err["type"] == "error"
        assert err["error"]["type"] == "invalid_request_error"
        assert err["error"]["message"]
    else:
        assert err["error"]["message"]
        assert err["error"]["type"] == "invalid_request_error"
    assert f.request.host == "client.example"
    assert f.id not in addon.flows


# -- streaming ------------------------------------------------------------------------------------


def sse_response(status: int = 200, ct: str = "text/event-stream", extra: dict | None = None) -> http.Response:
    hdrs = {"content-type": ct, "content-length": "1234"}
    hdrs.update(extra or {})
    return http.Response.make(status, b"", hdrs)


def start_stream(tctx, addon, client="anthropic", target="openai-chat", **opts):
    tctx.configure(addon, dragoman_target=target, dragoman_upstream="http://127.0.0.1:1/v1", **opts)
    f = make_flow(client, stream=True)
    addon.request(f)
    f.response = sse_response()
    addon.responseheaders(f)
    return f


def feed_all(fn, pieces: list[bytes]) -> bytes:
    out = bytearray()
    for p in pieces:
        r = fn(p)
        assert r != b"", "the stream callable must never return b'' for a data chunk"
        if isinstance(r, list):
            assert r == []
        else:
            assert isinstance(r, bytes) and r
            out += r
    return bytes(out)


def test_stream_callable_translates_and_never_returns_empty_bytes(tctx, addon):
    f = start_stream(tctx, addon)
    fn = f.response.stream
    assert callable(fn)
    h = f.response.headers
    assert "content-length" not in h
    assert h["transfer-encoding"] == "chunked"
    assert h["content-type"] == "text/event-stream; charset=utf-8"
    upstream = b"".join(fu.chat_reply("text", "gpt-x", True, True).events)
    pieces = [upstream[i : i + 1] for i in range(len(upstream))]
    out = feed_all(fn, pieces)
    end = fn(b"")
    out += end if isinstance(end, bytes) else b"".join(end)
    again = fn(b"")  # HTTP/2 upstreams signal the end twice
    assert again == [] or again == b""
    text = out.decode()
    assert "event: message_start" in text and "event: message_stop" in text
    deltas = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ") and "text_delta" in line]
    assert "".join(d["delta"]["text"] for d in deltas) == fu.TEXT
    addon.response(f)
    assert f.id not in addon.flows


def test_stream_garbage_becomes_one_error_event(tctx, addon):
    f = start_stream(tctx, addon)
    fn = f.response.stream
    out = feed_all(fn, [b"data: {not json\n\n", b"data: more\n\n"])
    end = fn(b"")
    out += end if isinstance(end, bytes) else b""
    assert out.count(b"event: error") == 1


def test_stream_callable_survives_translator_crash(tctx, addon, monkeypatch):
    f = start_stream(tctx, addon)
    state = addon.flows.get(f.id)

    class Boom:
        def feed(self, data):
            raise RuntimeError("boom")

        def close(self):
            raise RuntimeError("boom")

        def fail(self, err):
            return b"event: error\ndata: {}\n\n"

    state.translator = Boom()
    fn = stream_callable(f.id, state)
    assert fn(b"data: x\n\n") == b"event: error\ndata: {}\n\n"
    assert fn(b"") == b"event: error\ndata: {}\n\n"


def test_identity_stream_passes_bytes_and_headers(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
    f = make_flow("openai-chat", stream=True)
    addon.request(f)
    f.response = sse_response()
    before = f.response.headers.copy()
    addon.responseheaders(f)
    after = f.response.headers.copy()
    # the upstream's headers are untouched; a proxy in front (nginx) is only told not to buffer the stream
    assert after.pop("x-accel-buffering") == "no"
    assert after == before
    fn = f.response.stream
    assert fn(b"data: 1\n\n") == b"data: 1\n\n"
    assert fn(b"") == []


def test_gzip_stream_is_decompressed(tctx, addon):
    import gzip

    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
    f = make_flow("anthropic", stream=True)
    addon.request(f)
    f.response = sse_response(extra={"content-encoding": "gzip"})
    addon.responseheaders(f)
    assert "content-encoding" not in f.response.headers
    data = gzip.compress(b"".join(fu.chat_reply("text", "gpt-x", True, False).events))
    out = feed_all(f.response.stream, [data[i : i + 7] for i in range(0, len(data), 7)])
    end = f.response.stream(b"")
    out += end if isinstance(end, bytes) else b""
    assert b"message_stop" in out


def test_non_sse_or_error_status_is_not_streamed(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
    for resp in (sse_response(ct="application/json"), sse_response(status=500)):
        f = make_flow("anthropic", stream=True)
        addon.request(f)
        f.response = resp
        addon.responseheaders(f)
        assert f.response.stream is False


# -- whole responses and errors ---------------------------------------------------------------------


def finish(tctx, addon, client, target, status, body, headers=None, stream=False):
    tctx.configure(addon, dragoman_target=target, dragoman_upstream="http://127.0.0.1:1/v1")
    f = make_flow(client, stream=stream)
    addon.request(f)
    f.response = http.Response.make(
        status, json.dumps(body).encode(), {"content-type": "application/json", **(headers or {})}
    )
    addon.responseheaders(f)
    addon.response(f)
    assert f.id not in addon.flows
    return f


def test_json_response_translated(tctx, addon):
    body = fu.chat_reply("text", "gpt-x", False, False).json_body
    f = finish(tctx, addon, "anthropic", "openai-chat", 200, body)
    out = json.loads(f.response.content)
    assert out["type"] == "message"
    assert out["content"][0]["text"] == fu.TEXT
    assert f.response.headers["content-type"] == "application/json"


def test_stream_requested_but_json_answered_gives_json(tctx, addon):
    body = fu.chat_reply("text", "gpt-x", False, False).json_body
    f = finish(tctx, addon, "anthropic", "openai-chat", 200, body, stream=True)
    assert json.loads(f.response.content)["content"][0]["text"] == fu.TEXT


@pytest.mark.parametrize(
    "client, target, reply",
    [
        ("anthropic", "openai-chat", fu.chat_reply("error429", "m", False, False)),
        ("openai-chat", "anthropic", fu.anthropic_reply("error429", "m", False)),
        ("openai-responses", "anthropic", fu.anthropic_reply("error429", "m", False)),
    ],
)
def test_upstream_error_keeps_status_message_retry_after(tctx, addon, client, target, reply):
    f = finish(tctx, addon, client, target, reply.status, reply.json_body, reply.headers)
    assert f.response.status_code == 429
    assert f.response.headers["retry-after"] == "7"
    err = json.loads(f.response.content)
    assert err["error"]["message"] == fu.ERROR_429_MESSAGE
    if client == "anthropic":
        assert err["type"] == "error" and err["error"]["type"] == "rate_limit_error"


def test_error_in_200_body_becomes_error(tctx, addon):
    f = finish(
        tctx, addon, "anthropic", "openai-chat", 200, {"error": {"message": "quota gone", "type": "insufficient_quota"}}
    )
    assert f.response.status_code >= 400
    err = json.loads(f.response.content)
    assert err["type"] == "error" and err["error"]["message"] == "quota gone"


def test_untranslatable_response_becomes_502(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
    f = make_flow("anthropic")
    addon.request(f)
    f.response = http.Response.make(200, b"<html>hi</html>", {"content-type": "application/json"})
    addon.response(f)
    assert f.response.status_code == 502
    assert json.loads(f.response.content)["type"] == "error"


def test_identity_error_body_untouched(tctx, addon):
    body = fu.anthropic_reply("error429", "m", False).json_body
    f = finish(tctx, addon, "anthropic", "anthropic", 429, body)
    assert json.loads(f.response.content) == body


def test_error_hook_releases_state(tctx, addon, caplog):
    caplog.set_level(logging.WARNING)
    f = start_stream(tctx, addon)
    f.response.stream(b"data: " + json.dumps({"choices": []}).encode()[:5])
    from mitmproxy import flow as mflow

    f.error = mflow.Error("peer closed")
    addon.error(f)
    assert f.id not in addon.flows
    assert any("mid-stream" in r.getMessage() and f.id in r.getMessage() for r in caplog.records)


def test_dropped_fields_logged_once_by_name(tctx, addon, caplog):
    caplog.set_level(logging.INFO)
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
    body = dict(BODIES["anthropic"])
    body["metadata"] = {"user_id": "u-VALUE-SECRET"}
    body["top_k"] = 5
    f = make_flow("anthropic", body=body)
    addon.request(f)
    f.response = http.Response.make(
        200,
        json.dumps(fu.chat_reply("text", "gpt-x", False, False).json_body).encode(),
        {"content-type": "application/json"},
    )
    addon.response(f)
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    info = [r for r in caplog.records if r.levelno == logging.INFO and "anthropic -> openai-chat" in r.getMessage()]
    assert len(info) == 1 and f.id in info[0].getMessage()
    assert len(dropped) <= 1
    if dropped:
        assert dropped[0].levelno == logging.WARNING and f.id in dropped[0].getMessage()
    assert not any("u-VALUE-SECRET" in r.getMessage() for r in caplog.records)


# -- secrets never logged ---------------------------------------------------------------------------


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))
        if record.exc_info:
            self.lines.append(logging.Formatter().formatException(record.exc_info))


def test_no_api_key_in_logs_at_any_level(addon, monkeypatch):
    monkeypatch.setenv("DRAGOMAN_TEST_KEY", ENV_KEY)
    cap = Capture()
    root = logging.getLogger()
    old = root.level
    root.addHandler(cap)
    root.setLevel(logging.DEBUG)
    try:
        with taddons.context(addon) as tctx:
            for key in (OPTION_KEY, "env:DRAGOMAN_TEST_KEY", ""):
                tctx.configure(
                    addon,
                    dragoman_target="openai-chat",
                    dragoman_upstream="http://127.0.0.1:1/v1",
                    dragoman_api_key=key,
                )
                for client in ("anthropic", "openai-chat", "openai-responses"):
                    # good request, bad request, streamed answer, error answer, connection error
                    f = make_flow(client, stream=True)
                    addon.request(f)
                    f.response = sse_response()
                    addon.responseheaders(f)
                    if callable(f.response.stream):
                        f.response.stream(b"data: {broken\n\n")
                        f.response.stream(b"")
                    addon.response(f)
                    g = make_flow(client, body=b"{bad")
                    addon.request(g)
                    h = make_flow(client)
                    addon.request(h)
                    h.response = http.Response.make(
                        401, b'{"error": {"message": "bad key"}}', {"content-type": "application/json"}
                    )
                    addon.response(h)
            with pytest.raises(exceptions.OptionsError):
                tctx.configure(addon, dragoman_api_key="env:DRAGOMAN_TEST_SURELY_MISSING")
    finally:
        root.removeHandler(cap)
        root.setLevel(old)
    text = "\n".join(cap.lines)
    assert cap.lines, "expected some log output"
    for secret in (CLIENT_KEY, OPTION_KEY, ENV_KEY):
        assert secret not in text


@pytest.mark.parametrize(
    "stream, tls, http2, relayed",
    [
        (True, False, False, False),  # a plain-HTTP/1.1 stream: mitmproxy forwards it, the addon can finish it
        # a whole answer to a plain-HTTP/1.1 client: no failover possible, so no loopback hop (issue 31); a
        # refused or dropped upstream is answered in JSON from the ``error`` hook (``faults``)
        (False, False, False, False),
        (True, True, False, True),  # TLS client: only the relay can end its stream with an error event
        (True, False, True, True),  # HTTP/2 client: the same
        # TLS / HTTP/2 client, whole answer: the relay's attempts run in the request hook (no loopback hop), a
        # drop is answered in JSON there ("in-hook")
        (False, True, False, "in-hook"),
        (False, False, True, "in-hook"),
    ],
    ids=["plain-stream", "plain-json", "tls-stream", "h2-stream", "tls-json", "h2-json"],
)
def test_which_flows_go_through_the_relay(tctx, addon, stream, tls, http2, relayed):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="http://upstream.example:9/v1")
    addon.relay.port = 4321  # as if running (nothing is sent in this test)
    f = make_flow("anthropic", stream=stream)
    f.client_conn.tls = tls
    if http2:
        f.request.http_version = "HTTP/2.0"
    pending = addon.request(f)
    assert f.response is None
    state = addon.flows.get(f.id)
    assert state is not None
    assert (pending is not None) == (relayed == "in-hook")
    if relayed == "in-hook":
        assert state.relay_token is None and not addon.relay.jobs
        assert "x-api-key" not in f.request.headers  # the job holds each attempt's key
        pending.close()  # not awaited here: it would dial upstream.example
    elif relayed:
        assert (f.request.host, f.request.port) == ("127.0.0.1", 4321) and state.relay_token is not None
        addon.relay.forget(state.relay_token)
    else:
        assert (f.request.host, f.request.port) == ("upstream.example", 9) and state.relay_token is None


def _routed_whole_flow(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="http://upstream.example:9/v1")
    addon.relay.port = 4321  # as if running
    f = make_flow("anthropic", stream=False)
    f.client_conn.tls = True  # a TLS client's whole answer: the attempts run in the request hook
    pending = addon.request(f)
    assert pending is not None and f.response is None
    return f, pending


def test_a_whole_answer_run_in_the_hook_becomes_the_response_and_is_translated(tctx, addon, monkeypatch):
    from dragoman.mitm.relay.relay import Failure

    chat = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "from the hook"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    seen = []

    async def whole_answer(job):
        seen.append(job.flow_id)
        return Failure(
            200, [("content-type", "application/json"), ("x-request-id", "req-9")], json.dumps(chat).encode()
        )

    monkeypatch.setattr(addon.relay, "whole_answer", whole_answer)
    f, pending = _routed_whole_flow(tctx, addon)
    asyncio.run(pending)
    assert seen == [f.id]
    assert f.response is not None and f.response.status_code == 200
    assert f.response.headers["content-length"] == str(len(f.response.raw_content))
    addon.responseheaders(f)
    addon.response(f)
    body = json.loads(f.response.content)
    assert body["type"] == "message" and body["content"][0]["text"] == "from the hook"


def test_a_failure_while_running_the_attempts_is_a_502_in_the_client_protocol(tctx, addon, monkeypatch):
    async def whole_answer(job):
        raise RuntimeError("a bug")

    monkeypatch.setattr(addon.relay, "whole_answer", whole_answer)
    f, pending = _routed_whole_flow(tctx, addon)
    asyncio.run(pending)
    assert f.response is not None and f.response.status_code == 502
    addon.responseheaders(f)
    addon.response(f)
    body = json.loads(f.response.content)
    assert body["type"] == "error" and "failed to run the upstream attempts" in body["error"]["message"]
