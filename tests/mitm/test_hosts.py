"""Official-host matching: which flows Dragoman handles by default in each proxy mode."""

from __future__ import annotations

import pytest
from mitmproxy import http
from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman.mitm import hosts
from dragoman.mitm.translate_addon import default_match
from dragoman.protocols import Protocol


def flow(method: str, url: str, mode: str = "regular", headers: dict | None = None) -> http.HTTPFlow:
    req = http.Request.make(method, url, b"{}", headers or {})
    f = tflow.tflow(req=req)
    f.client_conn.proxy_mode = ProxyMode.parse(mode)
    return f


@pytest.mark.parametrize(
    "url, protocol",
    [
        ("https://api.anthropic.com/v1/messages", Protocol.ANTHROPIC_MESSAGES),
        ("https://api.anthropic.com/v1/messages?beta=true", Protocol.ANTHROPIC_MESSAGES),
        ("https://api.openai.com/v1/chat/completions", Protocol.OPENAI_CHAT),
        ("https://api.openai.com/v1/responses", Protocol.OPENAI_RESPONSES),
        ("https://chatgpt.com/backend-api/codex/responses", Protocol.OPENAI_RESPONSES),
        ("https://API.Anthropic.com./v1/messages", Protocol.ANTHROPIC_MESSAGES),
    ],
)
def test_official_endpoints_match_in_regular_mode(url, protocol):
    f = flow("POST", url)
    assert default_match(f)
    ep = hosts.official_endpoint(f)
    assert ep is not None and ep.protocol is protocol


@pytest.mark.parametrize(
    "method, url",
    [
        ("POST", "https://api.deepseek.com/v1/chat/completions"),  # another provider through the same proxy
        ("POST", "http://127.0.0.1:11434/v1/chat/completions"),
        ("POST", "https://api.anthropic.com/v1/messages/count_tokens"),
        ("POST", "https://api.openai.com/v1/embeddings"),
        ("POST", "https://chatgpt.com/backend-api/conversation"),
        ("POST", "https://chatgpt.com/responses"),
        ("GET", "https://api.anthropic.com/v1/messages"),
        ("POST", "https://example.com/v1/messages"),
    ],
)
def test_everything_else_is_not_matched_in_regular_mode(method, url):
    assert not default_match(flow(method, url))


@pytest.mark.parametrize("mode", ["transparent", "wireguard", "upstream:http://10.0.0.1:3128", "socks5"])
def test_other_intercepting_modes_use_the_official_hosts(mode):
    assert default_match(flow("POST", "https://api.openai.com/v1/responses", mode))
    assert not default_match(flow("POST", "https://api.deepseek.com/v1/chat/completions", mode))


def tls_flow(url: str, mode: str, sni: str | None) -> http.HTTPFlow:
    f = flow("POST", url, mode)
    f.client_conn.tls = True
    f.client_conn.sni = sni
    return f


def test_transparent_mode_never_trusts_the_host_header_over_the_ip():
    """Plain HTTP to an IP: nothing but the Host header names the API host, and that is not enough."""
    f = flow("POST", "http://162.159.140.245/v1/messages", "transparent")
    f.request.headers["host"] = "api.anthropic.com"
    assert hosts.destination_host(f) == "162.159.140.245"
    assert not default_match(f)


def test_transparent_tls_to_an_ip_is_named_by_the_sni():
    f = tls_flow("https://162.159.140.245/v1/messages", "transparent", "api.anthropic.com")
    f.request.headers["host"] = "api.anthropic.com"
    assert hosts.destination_host(f) == "api.anthropic.com"
    assert default_match(f)


def test_sni_is_not_trusted_when_upstream_certificates_are_not_checked():
    f = tls_flow("https://162.159.140.245/v1/messages", "transparent", "api.anthropic.com")
    with taddons.context() as tctx:
        tctx.options.ssl_insecure = True
        try:
            assert hosts.destination_host(f) == "162.159.140.245"
            assert not default_match(f)
        finally:
            tctx.options.ssl_insecure = False  # ctx.options outlives the context


@pytest.mark.parametrize("mode", ["regular", "upstream:http://proxy.example:8080", "transparent", "wireguard"])
@pytest.mark.parametrize(
    "url, path",
    [
        ("http://attacker.example/v1/messages", "/v1/messages"),
        ("https://attacker.example/v1/chat/completions", "/v1/chat/completions"),
        ("http://127.0.0.1:8081/v1/messages/count_tokens", "/v1/messages/count_tokens"),
        ("https://10.0.0.9/v1/models", "/v1/models"),
    ],
)
def test_host_header_naming_an_api_host_does_not_make_another_destination_ours(mode, url, path):
    f = flow("POST", url, mode)
    f.request.headers["host"] = "api.anthropic.com"
    assert hosts.destination_host(f) == f.request.host.lower()
    assert not hosts.host_header_agrees(f)
    assert not default_match(f)
    assert not hosts.in_scope(f)
    assert hosts.official_endpoint(f) is None


def test_tls_sni_naming_another_host_than_an_ip_destination():
    f = tls_flow("https://127.0.0.1:8443/v1/messages", "regular", "attacker.example")
    f.request.headers["host"] = "api.anthropic.com"
    assert hosts.destination_host(f) == "attacker.example"
    assert not default_match(f)


def test_reverse_mode_ignores_the_sni_the_client_sent_to_the_proxy():
    f = tls_flow("http://127.0.0.1:8080/v1/messages", "reverse:http://127.0.0.1:9000", "api.anthropic.com")
    assert hosts.destination_host(f) == "127.0.0.1"
    assert default_match(f)  # every endpoint path is ours in reverse mode


def test_api_host_destination_with_a_different_host_header_is_still_ours():
    """mitmproxy sends the request where the connection goes (the official host): the key stays there."""
    f = flow("POST", "https://api.anthropic.com/v1/messages")
    f.request.headers["host"] = "attacker.example"
    assert hosts.destination_host(f) == "api.anthropic.com"
    assert default_match(f)
    assert not hosts.host_header_agrees(f)


@pytest.mark.parametrize(
    "path",
    ["/v1/messages", "/v1/chat/completions", "/v1/responses", "/api/v1/chat/completions", "/messages?beta=true"],
)
def test_reverse_mode_matches_any_endpoint_path(path):
    f = flow("POST", f"http://127.0.0.1:8080{path}", "reverse:https://api.deepseek.com")
    assert hosts.is_reverse(f)
    assert default_match(f)


def test_reverse_mode_other_paths_and_methods_not_matched():
    assert not default_match(flow("POST", "http://127.0.0.1:8080/v1/embeddings", "reverse:http://x.example"))
    assert not default_match(flow("GET", "http://127.0.0.1:8080/v1/messages", "reverse:http://x.example"))


def test_scope_of_the_other_calls():
    assert hosts.in_scope(flow("GET", "https://api.anthropic.com/v1/models"))
    assert hosts.in_scope(flow("HEAD", "https://api.openai.com/"))
    assert hosts.in_scope(flow("GET", "https://chatgpt.com/backend-api/codex/models"))
    assert not hosts.in_scope(flow("GET", "https://chatgpt.com/backend-api/me"))
    assert not hosts.in_scope(flow("GET", "https://chatgpt.com/"))
    assert not hosts.in_scope(flow("GET", "https://github.com/"))
    assert hosts.in_scope(flow("GET", "http://127.0.0.1:8080/v1/models", "reverse:http://x.example"))


@pytest.mark.parametrize(
    "url, headers, shape",
    [
        ("https://api.anthropic.com/v1/models", {}, Protocol.ANTHROPIC_MESSAGES),
        ("https://api.openai.com/v1/models", {"anthropic-version": "2023-06-01"}, Protocol.OPENAI_CHAT),
        ("http://127.0.0.1:8080/v1/models", {"anthropic-version": "2023-06-01"}, Protocol.ANTHROPIC_MESSAGES),
        ("http://127.0.0.1:8080/v1/models", {"x-api-key": "k"}, Protocol.ANTHROPIC_MESSAGES),
        ("http://127.0.0.1:8080/v1/models", {"authorization": "Bearer k"}, Protocol.OPENAI_CHAT),
    ],
)
def test_client_shape(url, headers, shape):
    assert hosts.client_shape(flow("GET", url, "reverse:http://x.example", headers)) is shape


def test_transparent_mode_without_host_header_uses_sni():
    f = tls_flow("https://162.159.140.245/v1/messages", "transparent", "api.anthropic.com")
    f.request.headers.pop("host", None)
    assert default_match(f)
    assert hosts.host_header_agrees(f)


def test_bare_path():
    assert hosts.bare_path("/") == "/"
    assert hosts.bare_path("/?x=1") == "/"
    assert hosts.bare_path("/v1/models/?limit=5") == "/v1/models"
