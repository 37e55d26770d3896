"""``direct``: in transparent mode a connection headed to this machine itself is never an API flow."""

from __future__ import annotations

import json
import logging

import pytest
from mitmproxy import http
from mitmproxy.proxy import mode_specs
from mitmproxy.proxy import server_hooks
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman.mitm import hosts
from dragoman.mitm.guards import direct
from dragoman.mitm.guards.client_auth import guarded
from dragoman.mitm.guards.direct import DirectGuard
from dragoman.mitm.translate_addon import Translate

REMOTE = "203.0.113.7"  # TEST-NET-3: never an address of this machine
BODY = json.dumps({"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}).encode()


def transparent_flow(dest: tuple[str, int], sni: str = "api.anthropic.com", path: str = "/v1/messages", host=None):
    headers = {"host": host or sni, "content-type": "application/json", "x-api-key": "sk-client-1234567"}
    authority = f"[{dest[0]}]" if ":" in dest[0] else dest[0]
    req = http.Request.make("POST", f"https://{authority}:{dest[1]}{path}", BODY, headers)
    f = tflow.tflow(req=req)
    f.client_conn.proxy_mode = mode_specs.ProxyMode.parse("transparent")
    f.client_conn.sni = sni
    f.client_conn.tls = True
    # mitmproxy reports the original destination as both the server address and the client's socket address
    f.client_conn.sockname = dest
    f.server_conn.address = dest
    return f


def test_local_addresses():
    assert direct.is_local_address("127.0.0.1") and direct.is_local_address("::1")
    assert direct.is_local_address("127.8.9.10")
    assert not direct.is_local_address(REMOTE)


@pytest.mark.parametrize("dest", [("127.0.0.1", 8080), ("127.0.0.1", 443), ("::ffff:127.0.0.1", 8080)])
def test_a_connection_to_this_machine_is_no_api_flow(dest):
    guard = DirectGuard()
    with taddons.context(guard):
        f = transparent_flow(dest)
        assert hosts.destination_host(f) == "api.anthropic.com"  # what it was taken for before issue 29
        guard.requestheaders(f)
        assert f.metadata[hosts.DIRECT_KEY] == f"127.0.0.1:{dest[1]}"
        assert hosts.destination_host(f) == f.request.host  # the address, not the SNI
        assert not hosts.in_scope(f) and not hosts.default_match(f) and not guarded(f)
        guard.request(f)
        assert f.response is not None and f.response.status_code == 421
        error = json.loads(f.response.content)
        assert error["type"] == "error" and error["error"]["type"] == "permission_error"
        assert "straight to the proxy's own address" in error["error"]["message"]


def test_a_redirected_connection_is_left_alone():
    guard = DirectGuard()
    with taddons.context(guard):
        f = transparent_flow((REMOTE, 443))
        guard.requestheaders(f)
        guard.request(f)
        assert hosts.DIRECT_KEY not in f.metadata and f.response is None
        assert hosts.destination_host(f) == "api.anthropic.com" and hosts.default_match(f)


@pytest.mark.parametrize("mode", ["regular", "reverse:https://api.anthropic.com", "wireguard", "local"])
def test_other_modes_are_not_checked(mode):
    guard = DirectGuard()
    with taddons.context(guard):
        f = transparent_flow(("127.0.0.1", 8080))
        f.client_conn.proxy_mode = mode_specs.ProxyMode.parse(mode)
        guard.requestheaders(f)
        guard.request(f)
        assert hosts.DIRECT_KEY not in f.metadata and f.response is None


def test_a_direct_request_naming_no_api_passes(caplog):
    """Another service of this machine behind the gateway rule (an unrelated name and path) is not answered."""
    guard = DirectGuard()
    with taddons.context(guard):
        f = transparent_flow(("127.0.0.1", 443), sni="intranet.example", path="/status")
        guard.requestheaders(f)
        guard.request(f)
        assert f.metadata[hosts.DIRECT_KEY] and f.response is None


def test_the_answer_follows_the_clients_protocol_and_the_log_says_why(caplog):
    caplog.set_level(logging.WARNING)
    guard = DirectGuard()
    with taddons.context(guard):
        f = transparent_flow(("127.0.0.1", 8080), sni="api.openai.com", path="/v1/chat/completions")
        guard.requestheaders(f)
        guard.request(f)
        assert f.response is not None and f.response.status_code == 421
        error = json.loads(f.response.content)["error"]
        assert error["type"] == "permission_error" and "message" in error and "param" in error  # OpenAI's shape
    assert "straight to the proxy's own address 127.0.0.1:8080" in caplog.text
    assert "nothing was sent upstream" in caplog.text


def test_translate_never_takes_a_direct_flow(caplog):
    guard, tr = DirectGuard(), Translate()
    with taddons.context(guard, tr) as tctx:
        tctx.configure(tr, listen_host="127.0.0.1", dragoman_target="openai-chat", dragoman_api_key="sk-up-123456789")
        f = transparent_flow(("127.0.0.1", 443))
        guard.requestheaders(f)
        assert not tr.matches(f)


def _connect(dest: tuple[str, int]) -> server_hooks.ServerConnectionHookData:
    f = transparent_flow(dest)
    f.server_conn.error = None
    return server_hooks.ServerConnectionHookData(client=f.client_conn, server=f.server_conn)


def test_the_proxy_never_dials_its_own_port():
    """mitmproxy checks loopback and its listen host only: every address of this machine is refused."""
    guard = DirectGuard()
    with taddons.context(guard) as tctx:
        tctx.options.mode = ["transparent@8080"]
        own = _connect(("127.0.0.2", 8080))
        guard.server_connect(own)
        assert own.server.error and "this proxy's own port" in own.server.error
        for dest in (("127.0.0.2", 443), (REMOTE, 8080)):
            other = _connect(dest)
            guard.server_connect(other)
            assert not other.server.error, dest
