"""The configured key goes only where it is meant to: the configured upstream, or, where none is set, the host
the interception rule names — never a host a client picks while writing ``Host: api.anthropic.com``.

An attacker host on 127.0.0.1 (plain HTTP, and TLS with a certificate mitmproxy trusts) records every byte it
receives; a hostile client reaches it through a real mitmdump in every way a proxy offers (absolute-form
URL, CONNECT tunnel plain and TLS, reverse mode with odd paths, a routes file). The canary key must never
be among those bytes; a request whose connection goes to the attacker is passed on untouched.
"""

from __future__ import annotations

import json
import secrets

import pytest

from dragoman.demo import FakeUpstream

from .hostile import Attacker
from .hostile import Mitmdump
from .hostile import attacker_cert
from .hostile import http_request
from .hostile import send_direct
from .hostile import send_tunnel
from .hostile import send_tunnel_h2
from .hostile import status_of

pytestmark = pytest.mark.e2e

CANARY = "sk-ant-canary-" + secrets.token_hex(12)
CLIENT_KEY = "sk-client-own-key"
MESSAGES = {"model": "claude-x", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
CHAT = {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "gpt-x", "input": "hi"}

#: (name, method, path, Host header, body): every endpoint Dragoman translates, answers or forwards
CALLS = [
    ("messages", "POST", "/v1/messages", "api.anthropic.com", MESSAGES),
    ("messages-stream", "POST", "/v1/messages", "api.anthropic.com", {**MESSAGES, "stream": True}),
    ("chat", "POST", "/v1/chat/completions", "api.openai.com", CHAT),
    ("chat-stream", "POST", "/v1/chat/completions", "api.openai.com", {**CHAT, "stream": True}),
    ("responses", "POST", "/v1/responses", "api.openai.com", RESPONSES),
    ("codex", "POST", "/backend-api/codex/responses", "chatgpt.com", {**RESPONSES, "stream": True}),
    ("count_tokens", "POST", "/v1/messages/count_tokens", "api.anthropic.com", MESSAGES),
    ("models", "GET", "/v1/models", "api.anthropic.com", None),
    ("models-openai", "GET", "/v1/models", "api.openai.com", None),
]
IDS = [c[0] for c in CALLS]


def raw(method: str, target: str, host: str, body: object) -> bytes:
    headers = {"host": host, "x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}
    data = json.dumps(body).encode() if body is not None else b""
    if body is not None:
        headers["content-type"] = "application/json"
    return http_request(method, target, headers, data)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("keydest")
    cert = attacker_cert(workdir)
    plain, tls = Attacker(), Attacker(cert)
    legit = FakeUpstream().start()
    routes = workdir / "routes.yaml"
    routes.write_text(
        f"upstreams:\n  - name: legit\n    protocol: anthropic\n    base_url: {legit.url}\n    keys: [{CANARY}]\n"
        "routes:\n  - match: '*'\n    to: [legit]\n"
    )
    trust = f"ssl_verify_upstream_trusted_ca={cert[0]}"
    procs = {
        # the explicit proxy, no dragoman_upstream: the key belongs to the official hosts only
        "regular": Mitmdump(
            workdir, "--set", "dragoman_target=anthropic", "--set", f"dragoman_api_key={CANARY}", "--set", trust
        ),
        # the explicit proxy with a user filter naming a host, no dragoman_upstream: the key is for that host
        "match": Mitmdump(
            workdir,
            "--set",
            "dragoman_target=anthropic",
            "--set",
            f"dragoman_api_key={CANARY}",
            "--set",
            "dragoman_match=~d api.example.com",
            "--set",
            trust,
        ),
        # the explicit proxy with a routes file
        "routes": Mitmdump(workdir, "--set", f"dragoman_config={routes}", "--set", trust),
        # reverse mode in front of the attacker, the key configured for another upstream
        "reverse-upstream": Mitmdump(
            workdir,
            "--mode",
            f"reverse:{plain.url}",
            "--set",
            "dragoman_target=anthropic",
            "--set",
            f"dragoman_upstream={legit.url}",
            "--set",
            f"dragoman_api_key={CANARY}",
        ),
        # reverse mode without dragoman_upstream: the key belongs to the reverse target
        "reverse": Mitmdump(
            workdir,
            "--mode",
            f"reverse:{legit.url}",
            "--set",
            "dragoman_target=anthropic",
            "--set",
            f"dragoman_api_key={CANARY}",
            "--set",
            trust,
        ),
    }
    yield {"plain": plain, "tls": tls, "legit": legit, **procs}
    for p in procs.values():
        p.stop()
    plain.stop()
    tls.stop()
    legit.stop()


def check_untouched(world, attacker: Attacker, mark: int, proxy: Mitmdump, path: str) -> None:
    got = attacker.since(mark)
    assert CANARY.encode() not in got, (
        f"the attacker received the configured key:\n{got[:2000]!r}\n{proxy.log()[-1500:]}"
    )
    # the request went where its connection goes, as the client sent it: not translated, not re-keyed
    assert f" {path} HTTP/1.1".encode() in got, f"{got[:2000]!r}\n{proxy.log()[-1500:]}"
    assert CLIENT_KEY.encode() in got


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_absolute_form_to_another_host(world, call):
    _, method, path, host, body = call
    attacker, proxy = world["plain"], world["regular"]
    mark = attacker.mark()
    send_direct(proxy.port, raw(method, f"{attacker.url}{path}", host, body))
    check_untouched(world, attacker, mark, proxy, path)


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_plain_tunnel_to_another_host(world, call):
    _, method, path, host, body = call
    attacker, proxy = world["plain"], world["regular"]
    mark = attacker.mark()
    send_tunnel(proxy.port, attacker.authority, raw(method, path, host, body))
    check_untouched(world, attacker, mark, proxy, path)


@pytest.mark.parametrize("sni", ["localhost", None], ids=["sni-localhost", "no-sni"])
@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_tls_tunnel_to_another_host(world, call, sni):
    _, method, path, host, body = call
    attacker, proxy = world["tls"], world["regular"]
    mark = attacker.mark()
    send_tunnel(proxy.port, attacker.authority, raw(method, path, host, body), tls=True, sni=sni)
    check_untouched(world, attacker, mark, proxy, path)


@pytest.mark.parametrize("call", [c for c in CALLS if c[1] == "POST"], ids=[c[0] for c in CALLS if c[1] == "POST"])
def test_http2_tunnel_to_another_host(world, call):
    """HTTP/2 inside a TLS tunnel, ``:authority`` naming the API host."""
    _, method, path, host, body = call
    attacker, proxy = world["tls"], world["regular"]
    mark = attacker.mark()
    headers = [(":method", method), (":scheme", "https"), (":authority", host), (":path", path)]
    headers += [("x-api-key", CLIENT_KEY), ("anthropic-version", "2023-06-01"), ("content-type", "application/json")]
    send_tunnel_h2(proxy.port, attacker.authority, "localhost", headers, json.dumps(body).encode())
    check_untouched(world, attacker, mark, proxy, path)


def test_tls_tunnel_naming_the_api_host_in_sni_never_reaches_the_attacker(world):
    """SNI api.anthropic.com towards the attacker: mitmproxy checks the attacker's certificate against that
    name, so nothing is sent at all."""
    attacker, proxy = world["tls"], world["regular"]
    mark = attacker.mark()
    send_tunnel(
        proxy.port,
        attacker.authority,
        raw("POST", "/v1/messages", "api.anthropic.com", MESSAGES),
        True,
        "api.anthropic.com",
    )
    assert CANARY.encode() not in attacker.since(mark)


@pytest.mark.parametrize("how", ["absolute", "tunnel", "tls-tunnel"])
def test_routes_file_flows_to_another_host_are_not_translated(world, how):
    attacker = world["tls"] if how == "tls-tunnel" else world["plain"]
    proxy, legit = world["routes"], world["legit"]
    before = len(legit.requests)
    mark = attacker.mark()
    if how == "absolute":
        send_direct(proxy.port, raw("POST", f"{attacker.url}/v1/messages", "api.anthropic.com", MESSAGES))
    else:
        send_tunnel(
            proxy.port,
            attacker.authority,
            raw("POST", "/v1/messages", "api.anthropic.com", MESSAGES),
            tls=how == "tls-tunnel",
            sni="localhost",
        )
    check_untouched(world, attacker, mark, proxy, "/v1/messages")
    assert len(legit.requests) == before  # nothing translated towards the configured upstream either


ODD_PATHS = [
    "/v1/messages",
    "/v1/messages/",
    "//v1/messages",
    "/v1//messages",
    "/x/../v1/messages",
    "/v1/messages/../../v1/messages",
    "/%2e%2e/v1/messages",
    "/v1%2fmessages",
    "/v1/messages%00",
    "/v1/messages%2f..%2f..%2fother",
    "/prefix/v1/messages",
    "/v1/messages?key=x&beta=true",
    "/v1/messages/count_tokens",
    "/v1/messages/count_tokens/../../../v1/models",
    "/v1/models",
    "/v1/models/claude-x",
    "/v1/chat/completions",
    "/v1/responses",
]


@pytest.mark.parametrize("path", ODD_PATHS)
def test_reverse_mode_odd_paths_never_send_the_key_to_the_reverse_target(world, path):
    """``dragoman_upstream`` is set: the key is for it alone, even when the reverse target is another host."""
    attacker, proxy, legit = world["plain"], world["reverse-upstream"], world["legit"]
    mark = attacker.mark()
    method = "GET" if "/models" in path and "count_tokens" not in path else "POST"
    send_direct(proxy.port, raw(method, path, "api.anthropic.com", None if method == "GET" else MESSAGES))
    got = attacker.since(mark)
    assert CANARY.encode() not in got, f"{got[:2000]!r}\n{proxy.log()[-1500:]}"
    for r in legit.requests:
        assert CLIENT_KEY not in json.dumps(r.headers)


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens", "/v1/models"])
def test_reverse_mode_absolute_form_to_another_host(world, path):
    """No dragoman_upstream: the key is for the reverse target only, whatever URL the request line names."""
    attacker, proxy = world["plain"], world["reverse"]
    mark = attacker.mark()
    method = "GET" if path == "/v1/models" else "POST"
    send_direct(
        proxy.port, raw(method, f"{attacker.url}{path}", attacker.authority, None if method == "GET" else MESSAGES)
    )
    assert CANARY.encode() not in attacker.since(mark), proxy.log()[-1500:]


def test_reverse_mode_without_upstream_gives_the_key_to_the_reverse_target(world):
    proxy, legit = world["reverse"], world["legit"]
    before = len(legit.requests)
    answer = send_direct(proxy.port, raw("POST", "/v1/messages", "api.anthropic.com", MESSAGES))
    assert status_of(answer) == 200, answer[:500]
    seen = legit.requests[before:]
    assert [r.headers.get("x-api-key") for r in seen] == [CANARY]


@pytest.mark.parametrize("how", ["absolute", "tunnel", "tls-tunnel"])
def test_user_filter_naming_a_host_is_not_fooled_by_the_host_header(world, how):
    """``dragoman_match=~d api.example.com`` (``~d`` reads the Host header too): a flow that connects to the
    attacker while writing ``Host: api.example.com`` is not the filter's."""
    attacker = world["tls"] if how == "tls-tunnel" else world["plain"]
    proxy = world["match"]
    mark = attacker.mark()
    request = raw(
        "POST", "/v1/messages" if how != "absolute" else f"{attacker.url}/v1/messages", "api.example.com", MESSAGES
    )
    if how == "absolute":
        send_direct(proxy.port, request)
    else:
        send_tunnel(proxy.port, attacker.authority, request, tls=how == "tls-tunnel", sni="localhost")
    check_untouched(world, attacker, mark, proxy, "/v1/messages")
