"""Cors with taddons/tflow: the option, preflights, refusals, and the CORS headers of every kind of answer.
The hooks run in the order of ``addon/dragoman.py`` (Cors, ClientAuth, Endpoints, Translate, Cors.after)."""

from __future__ import annotations

import json

import pytest
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy.proxy import mode_specs
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman import demo as fu
from dragoman.mitm.endpoints import Endpoints
from dragoman.mitm.flowstate import METADATA_KEY as TRANSLATE_KEY
from dragoman.mitm.guards import cors as cors_mod
from dragoman.mitm.guards.client_auth import ClientAuth
from dragoman.mitm.guards.cors import Cors
from dragoman.mitm.translate_addon import Translate

APP = "http://localhost:3000"
ALICE = "sk-alice-SECRET-1"
BODIES = {
    "/v1/messages": {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/chat/completions": {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "gpt-x", "input": "hi"},
}
ENDPOINT_PATHS = [
    "/v1/messages",
    "/messages",
    "/v1/messages/count_tokens",
    "/v1/chat/completions",
    "/chat/completions",
    "/v1/responses",
    "/responses",
    "/v1/models",
    "/models",
]


class Chain:
    """The addons of ``addon/dragoman.py`` that matter here, called hook by hook in its order."""

    def __init__(self) -> None:
        self.cors, self.auth, self.endpoints, self.tr = Cors(), ClientAuth(), Endpoints(), Translate()
        self.order = [self.cors, self.auth, self.endpoints, self.tr, self.cors.after]

    def hook(self, name: str, f: http.HTTPFlow) -> None:
        for addon in self.order:
            fn = getattr(addon, name, None)
            if fn is None or (name == "request" and f.response is not None and addon is not self.cors):
                continue
            fn(f)

    def request(self, f: http.HTTPFlow) -> http.HTTPFlow:
        self.hook("request", f)
        return f

    def answer(self, f: http.HTTPFlow, resp: http.Response | None = None) -> http.HTTPFlow:
        """The upstream's ``resp`` (responseheaders, then response), or the local answer (response only)."""
        if resp is not None:
            f.response = resp
            self.hook("responseheaders", f)
        self.hook("response", f)
        return f


@pytest.fixture
def chain():
    c = Chain()
    with taddons.context(*c.order) as tctx:
        tctx.configure(c.tr, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
        c.tctx = tctx
        yield c


def with_origins(chain: Chain, *origins: str) -> Chain:
    chain.tctx.configure(chain.cors, dragoman_cors_origins=list(origins))
    return chain


def make_flow(method: str, path: str, headers: dict | None = None, host: str = "proxy", reverse: bool = True):
    body = json.dumps(BODIES.get(path, BODIES["/v1/messages"])).encode() if method == "POST" else b""
    hdrs = {"host": f"{host}:8080", **(headers or {})}
    if method == "POST":
        hdrs["content-type"] = "application/json"
    f = tflow.tflow(req=http.Request.make(method, f"http://{host}:8080{path}", body, hdrs))
    if reverse:
        f.client_conn.proxy_mode = mode_specs.ProxyMode.parse(f"reverse:http://{host}:8080")
    return f


def preflight(path: str = "/v1/messages", origin: str = APP, requested: str | None = "authorization, content-type"):
    headers = {"origin": origin, "access-control-request-method": "POST"}
    if requested is not None:
        headers["access-control-request-headers"] = requested
    return make_flow("OPTIONS", path, headers)


def cors_headers(resp: http.Response) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in resp.headers.items(multi=True):
        if k.lower().startswith("access-control-"):
            out.setdefault(k.lower(), []).append(v)
    return out


def vary(resp: http.Response) -> set[str]:
    return {v.strip().lower() for line in resp.headers.get_all("vary") for v in line.split(",")}


# -- the option ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [["localhost:3000"], ["http://localhost:3000/app"], ["http://"], ["http://a:99999"], ["null"], ["http://a,ftp:/b"]],
)
def test_a_value_that_is_no_origin_is_refused(chain, value):
    with pytest.raises(exceptions.OptionsError, match="dragoman_cors_origins"):
        with_origins(chain, *value)


def test_origins_are_normalized_and_may_be_comma_separated(chain):
    with_origins(chain, "HTTP://LocalHost:3000/, https://app.example.com:443", "http://[::1]:8000")
    assert chain.cors.spec == cors_mod.CorsSpec(
        False, frozenset({"http://localhost:3000", "https://app.example.com", "http://[::1]:8000"})
    )
    with_origins(chain, "*")
    assert chain.cors.spec.any_origin
    with_origins(chain)
    assert not chain.cors.spec.on


# -- preflights ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ENDPOINT_PATHS)
def test_preflight_is_answered_204_before_client_auth(chain, path):
    with_origins(chain, APP, "https://other.example")
    chain.tctx.configure(chain.auth, dragoman_client_keys=[f"alice={ALICE}"])
    f = chain.request(preflight(path, requested="authorization, content-type, anthropic-version, x-stainless-os"))
    assert f.response.status_code == 204 and f.response.content == b""
    assert "content-length" not in f.response.headers
    assert cors_headers(f.response) == {
        "access-control-allow-origin": [APP],
        "access-control-allow-methods": ["GET, POST, DELETE, OPTIONS"],
        "access-control-allow-headers": ["authorization, content-type, anthropic-version, x-stainless-os"],
        "access-control-max-age": ["600"],
    }
    assert {"origin", "access-control-request-headers"} <= vary(f.response)
    assert TRANSLATE_KEY not in f.metadata and f.metadata[cors_mod.METADATA_KEY] == "preflight"


def test_preflight_without_requested_headers_gets_the_default_list(chain):
    with_origins(chain, APP)
    f = chain.request(preflight(requested=None))
    allowed = {h.strip() for h in f.response.headers["access-control-allow-headers"].split(",")}
    assert {
        "authorization",
        "x-api-key",
        "anthropic-version",
        "anthropic-beta",
        "content-type",
        "openai-beta",
    } <= allowed
    garbage = chain.request(preflight(requested="x-a\r\nx-b: 1"))
    assert garbage.response.headers["access-control-allow-headers"] == cors_mod.DEFAULT_ALLOW_HEADERS


def test_any_origin_answers_star(chain):
    with_origins(chain, "*")
    f = chain.request(preflight(origin="https://whatever.example:8443"))
    assert f.response.status_code == 204 and f.response.headers["access-control-allow-origin"] == "*"


def test_a_default_port_in_the_request_origin_matches(chain):
    with_origins(chain, "https://app.example.com")
    f = chain.request(preflight(origin="https://app.example.com:443"))
    assert f.response.status_code == 204
    assert f.response.headers["access-control-allow-origin"] == "https://app.example.com:443"  # echoed as sent


def test_preflight_from_another_origin_is_refused_without_allow_headers(chain):
    with_origins(chain, APP)
    f = chain.request(preflight(origin="http://localhost:3001"))
    assert f.response.status_code == 403
    assert cors_headers(f.response) == {}
    assert f.metadata[cors_mod.METADATA_KEY] == "preflight-refused"


def test_without_the_option_options_is_not_intercepted(chain):
    f = chain.request(preflight())
    assert f.response is None and f.request.method == "OPTIONS"
    post = chain.request(make_flow("POST", "/v1/messages", {"origin": APP, "x-api-key": "sk-x"}))
    assert post.response is None and post.request.headers["origin"] == APP  # translated, Origin left alone
    chain.answer(post, http.Response.make(200, json.dumps(fu.chat_reply("text", "gpt-x", False, False).json_body)))
    assert cors_headers(post.response) == {} and post.response.status_code == 200


# -- requests and their answers --------------------------------------------------------------------


def test_request_from_another_origin_is_refused_in_its_protocol_shape(chain):
    with_origins(chain, APP)
    f = chain.request(make_flow("POST", "/v1/messages", {"origin": "https://evil.example", "x-api-key": "sk-x"}))
    assert f.response.status_code == 403 and cors_headers(f.response) == {}
    body = json.loads(f.response.content)
    assert body["type"] == "error" and body["error"]["type"] == "permission_error"
    assert TRANSLATE_KEY not in f.metadata  # nothing was forwarded
    chain.answer(f)
    assert cors_headers(f.response) == {}


def test_translated_answer_carries_the_headers_and_the_upstream_never_sees_origin(chain):
    with_origins(chain, APP)
    f = chain.request(make_flow("POST", "/v1/messages", {"origin": APP, "x-api-key": "sk-x"}))
    assert f.response is None and TRANSLATE_KEY in f.metadata
    assert "origin" not in f.request.headers and f.request.path == "/v1/chat/completions"
    upstream = http.Response.make(
        200,
        json.dumps(fu.chat_reply("text", "gpt-x", False, False).json_body),
        {"content-type": "application/json", "access-control-allow-origin": "*", "vary": "Accept-Encoding"},
    )
    chain.answer(f, upstream)
    assert json.loads(f.response.content)["content"][0]["text"] == fu.TEXT
    headers = cors_headers(f.response)
    assert headers["access-control-allow-origin"] == [APP]  # the upstream's own "*" replaced, one value
    assert "retry-after" in headers["access-control-expose-headers"][0]
    assert vary(f.response) == {"accept-encoding", "origin"}


def test_streamed_answer_has_the_headers_before_the_body_and_the_stream_is_intact(chain):
    with_origins(chain, APP)
    body = dict(BODIES["/v1/messages"], stream=True)
    f = make_flow("POST", "/v1/messages", {"origin": APP, "x-api-key": "sk-x"})
    f.request.content = json.dumps(body).encode()
    chain.request(f)
    f.response = http.Response.make(200, b"", {"content-type": "text/event-stream"})
    chain.hook("responseheaders", f)
    # the head the client gets is final here: the stream callable is installed and nothing was sent yet
    assert callable(f.response.stream)
    assert f.response.headers["access-control-allow-origin"] == APP and "origin" in vary(f.response)
    out = b""
    for event in fu.chat_reply("text", "gpt-x", True, True).events:
        r = f.response.stream(event)
        out += r if isinstance(r, bytes) else b"".join(r)
    end = f.response.stream(b"")
    out += end if isinstance(end, bytes) else b"".join(end)
    chain.hook("response", f)
    text = out.decode()
    assert text.startswith("event: message_start") and "event: message_stop" in text
    deltas = [json.loads(x[6:]) for x in text.splitlines() if x.startswith("data: ") and "text_delta" in x]
    assert "".join(d["delta"]["text"] for d in deltas) == fu.TEXT
    assert cors_headers(f.response)["access-control-allow-origin"] == [APP]


@pytest.mark.parametrize("key", [None, "sk-unknown"])
def test_client_auth_401_carries_the_headers(chain, key):
    with_origins(chain, APP)
    chain.tctx.configure(chain.auth, dragoman_client_keys=[f"alice={ALICE}"])
    headers = {"origin": APP, **({"x-api-key": key} if key else {})}
    f = chain.answer(chain.request(make_flow("POST", "/v1/messages", headers)))
    assert f.response.status_code == 401
    assert json.loads(f.response.content)["error"]["type"] == "authentication_error"
    assert f.response.headers["access-control-allow-origin"] == APP
    assert "origin" in vary(f.response)


def test_dragomans_own_answers_carry_the_headers(chain):
    with_origins(chain, "*")
    bad = make_flow("POST", "/v1/chat/completions", {"origin": APP, "authorization": "Bearer sk-x"})
    bad.request.content = b"{not json"
    chain.answer(chain.request(bad))
    assert bad.response.status_code == 400 and bad.response.headers["access-control-allow-origin"] == "*"
    assert "vary" not in bad.response.headers  # "*" does not depend on the origin
    count = make_flow("POST", "/v1/messages/count_tokens", {"origin": APP, "x-api-key": "sk-x"})
    chain.answer(chain.request(count))
    assert json.loads(count.response.content)["input_tokens"] > 0
    assert count.response.headers["access-control-allow-origin"] == "*"
    models = chain.answer(chain.request(make_flow("GET", "/v1/models/gpt-x", {"origin": APP})))
    assert models.response.status_code == 200 and models.response.headers["access-control-allow-origin"] == "*"


def test_unrelated_hosts_and_paths_are_untouched(chain):
    with_origins(chain, "*")
    # regular (explicit proxy) mode: only the official hosts are Dragoman's
    other = chain.request(
        make_flow(
            "OPTIONS",
            "/v1/messages",
            {"origin": APP, "access-control-request-method": "POST"},
            host="api.example.com",
            reverse=False,
        )
    )
    assert other.response is None
    # reverse mode, a path that is none of the endpoints
    files = chain.request(make_flow("POST", "/v1/files", {"origin": APP}))
    assert files.response is None and files.request.headers["origin"] == APP
    chain.answer(files, http.Response.make(200, b"{}", {"access-control-allow-origin": "https://x.example"}))
    assert files.response.headers["access-control-allow-origin"] == "https://x.example"
    # the official host in regular mode is Dragoman's
    official = chain.request(
        make_flow(
            "OPTIONS",
            "/v1/messages",
            {"origin": APP, "access-control-request-method": "POST"},
            host="api.anthropic.com",
            reverse=False,
        )
    )
    assert official.response.status_code == 204


def test_no_origin_no_change(chain):
    with_origins(chain, APP)
    f = chain.request(make_flow("POST", "/v1/messages", {"x-api-key": "sk-x"}))
    assert f.response is None and cors_mod.ORIGIN_KEY not in f.metadata
    options = chain.request(make_flow("OPTIONS", "/v1/messages"))  # not a preflight: no Origin
    assert options.response is None


def test_direct_error_answer_lines():
    f = tflow.tflow()
    assert cors_mod.answer_header_lines(f) == []
    f.metadata[cors_mod.ORIGIN_KEY] = APP
    assert dict(cors_mod.answer_header_lines(f)) == {
        "access-control-allow-origin": APP,
        "access-control-expose-headers": cors_mod.EXPOSE_HEADERS,
        "vary": "Origin",
    }
