"""ClientAuth with taddons/tflow: who may spend the keys, and the refusal to expose keys to the network."""

from __future__ import annotations

import hmac
import json
import logging

import pytest
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy.proxy import mode_specs
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.mitm.guards.client_auth import CLIENT_METADATA_KEY
from dragoman.mitm.guards.client_auth import ClientAuth
from dragoman.mitm.translate_addon import Translate
from dragoman.routing import clients as client_rules

ALICE, BOB = "sk-alice-SECRET-1", "sk-bob-SECRET-2"
UPSTREAM_KEY = "sk-upstream-SECRET-9"
PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}
BODIES = {
    "anthropic": {"model": "claude-haiku-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    "openai-chat": {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hi"}]},
    "openai-responses": {"model": "claude-haiku-4-5", "input": "hi"},
}


def flow(client: str, key: str | None, header: str = "auto", model: str = "claude-haiku-4-5", path: str | None = None):
    body = dict(BODIES[client], model=model)
    headers = {"host": "proxy:8080", "content-type": "application/json"}
    if key is not None:
        use = header if header != "auto" else ("x-api-key" if client == "anthropic" else "authorization")
        headers[use] = key if use == "x-api-key" else f"Bearer {key}"
    req = http.Request.make("POST", f"http://proxy:8080{path or PATHS[client]}", json.dumps(body).encode(), headers)
    f = tflow.tflow(req=req)
    f.client_conn.proxy_mode = mode_specs.ProxyMode.parse("reverse:http://proxy:8080")
    return f


@pytest.fixture
def addons():
    auth, tr = ClientAuth(), Translate()
    with taddons.context(auth, tr) as tctx:
        tctx.configure(
            tr,
            listen_host="127.0.0.1",
            dragoman_target="openai-chat",
            dragoman_upstream="http://127.0.0.1:1/v1",
            dragoman_api_key=UPSTREAM_KEY,
        )
        yield tctx, auth, tr


def configure_clients(tctx, auth, monkeypatch, specs):
    monkeypatch.setenv("BOB_KEY", BOB)
    tctx.configure(auth, dragoman_client_keys=specs)


def run(auth, tr, f):
    auth.request(f)
    if f.response is None:
        tr.request(f)
    return f


def check_error_shape(client: str, f, status: int):
    assert f.response is not None and f.response.status_code == status
    body = json.loads(f.response.content)
    if client == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] in ("authentication_error", "permission_error")
    else:
        assert body["error"]["message"] and "type" in body["error"]
    assert ALICE not in f.response.text and BOB not in f.response.text


@pytest.mark.parametrize("client", list(PATHS))
@pytest.mark.parametrize(("key", "status"), [(None, 401), ("sk-wrong", 401), (BOB, 403)])
def test_refused_in_the_clients_shape_and_nothing_forwarded(addons, monkeypatch, client, key, status):
    tctx, auth, tr = addons
    monkeypatch.setenv("BOB_KEY", BOB)
    tctx.configure(auth, dragoman_client_keys=[f"alice={ALICE}", "bob=env:BOB_KEY"])
    # bob may only use gpt-* models: a 403 for claude-haiku
    auth.option_clients = tuple(
        c if c.name != "bob" else type(c)(c.name, c.key, ("gpt-*",), ()) for c in auth.option_clients
    )
    f = run(auth, tr, flow(client, key))
    check_error_shape(client, f, status)
    assert METADATA_KEY not in f.metadata  # Translate never saw it: nothing was rewritten or forwarded
    assert "x-api-key" not in f.request.headers and "authorization" not in f.request.headers


@pytest.mark.parametrize("client", list(PATHS))
@pytest.mark.parametrize("header", ["x-api-key", "authorization"])
def test_a_right_key_in_either_header_works_and_never_travels(addons, monkeypatch, client, header):
    tctx, auth, tr = addons
    configure_clients(tctx, auth, monkeypatch, [f"alice={ALICE}", "bob=env:BOB_KEY"])
    f = run(auth, tr, flow(client, BOB, header))
    assert f.response is None
    assert f.metadata[CLIENT_METADATA_KEY] == "bob"
    assert f.metadata[METADATA_KEY]["client_name"] == "bob"
    sent = str(f.request.headers) + f.request.get_text(strict=False)
    assert BOB not in sent and ALICE not in sent
    assert f.request.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_models_and_count_tokens_are_guarded_too(addons, monkeypatch):
    tctx, auth, tr = addons
    configure_clients(tctx, auth, monkeypatch, [f"alice={ALICE}"])
    for path in ("/v1/models", "/v1/messages/count_tokens", "/v1/responses/resp_123"):
        f = flow("anthropic", None, path=path)
        auth.request(f)
        assert f.response is not None and f.response.status_code == 401, path


def test_no_client_keys_means_no_check(addons):
    tctx, auth, tr = addons
    f = run(auth, tr, flow("anthropic", None))
    assert f.response is None and METADATA_KEY in f.metadata


def test_comparison_is_constant_time_over_every_key(monkeypatch):
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(client_rules.hmac, "compare_digest", spy)
    keys = client_rules.parse_client_keys([f"alice={ALICE}", f"bob={BOB}", "carol=sk-carol"], {})
    assert client_rules.identify(ALICE, keys).name == "alice"
    assert len(calls) == 3  # no early exit on the first match
    calls.clear()
    assert client_rules.identify("nope", keys) is None and len(calls) == 3


def test_bad_client_key_option_names_the_entry_not_the_key():
    auth = ClientAuth()
    with taddons.context(auth) as tctx:
        with pytest.raises(exceptions.OptionsError) as e:
            tctx.configure(auth, dragoman_client_keys=["alice=env:NOPE_NOT_SET"])
        assert "entry 1 (alice): environment variable NOPE_NOT_SET" in str(e.value)
        with pytest.raises(exceptions.OptionsError, match="must be NAME=KEY"):
            tctx.configure(auth, dragoman_client_keys=["just-a-key"])


def test_refuses_to_start_when_keys_are_exposed_beyond_loopback(monkeypatch):
    auth, tr = ClientAuth(), Translate()
    with taddons.context(auth, tr) as tctx:
        with pytest.raises(exceptions.OptionsError) as e:
            tctx.configure(tr, listen_host="0.0.0.0", dragoman_target="openai-chat", dragoman_api_key=UPSTREAM_KEY)
        message = str(e.value)
        assert "--listen-host 127.0.0.1" in message and "dragoman_client_keys" in message
        assert "dragoman_allow_remote" in message and UPSTREAM_KEY not in message
    for fix in (
        {"listen_host": "127.0.0.1"},
        {"dragoman_allow_remote": True},
        {"dragoman_client_keys": [f"a={ALICE}"]},
    ):
        auth, tr = ClientAuth(), Translate()
        with taddons.context(auth, tr) as tctx:
            tctx.configure(auth, **{k: v for k, v in fix.items() if k.startswith("dragoman_")})
            tctx.configure(
                tr,
                listen_host=fix.get("listen_host", "0.0.0.0"),
                dragoman_target="openai-chat",
                dragoman_api_key=UPSTREAM_KEY,
            )
            assert tr.routing.config is not None


def test_no_upstream_key_means_no_refusal():
    auth, tr = ClientAuth(), Translate()
    with taddons.context(auth, tr) as tctx:
        tctx.configure(tr, listen_host="0.0.0.0", dragoman_target="openai-chat")
        assert tr.routing.config is not None


def test_client_key_never_logged(addons, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    tctx, auth, tr = addons
    configure_clients(tctx, auth, monkeypatch, [f"alice={ALICE}"])
    run(auth, tr, flow("anthropic", ALICE))
    run(auth, tr, flow("anthropic", "sk-wrong-key-XYZ"))
    text = caplog.text
    assert ALICE not in text and "sk-wrong-key-XYZ" not in text
    assert "client alice" in text


@pytest.mark.parametrize(
    "mode, listen_host, refused",
    [
        (["transparent"], "", True),  # every interface: a host can connect straight to the port
        (["transparent"], "0.0.0.0", True),
        (["transparent@0.0.0.0:8080"], "", True),
        (["transparent"], "127.0.0.1", False),  # the machine-local recipe
        (["transparent@127.0.0.1:8080", "transparent@::1:8080"], "", False),
        (["wireguard"], "", False),  # peers hold the WireGuard key
        (["local"], "", False),  # no port at all
    ],
)
def test_transparent_mode_is_refused_beyond_loopback(mode, listen_host, refused):
    """Issue 29, 1: transparent mode is as reachable as the explicit proxy; WireGuard and local mode are not."""
    auth, tr = ClientAuth(), Translate()
    with taddons.context(auth, tr) as tctx:
        tctx.options.mode = mode
        settings = dict(listen_host=listen_host, dragoman_target="openai-chat", dragoman_api_key=UPSTREAM_KEY)
        if refused:
            with pytest.raises(exceptions.OptionsError, match="listen beyond loopback") as e:
                tctx.configure(tr, **settings)
            assert mode[0] in str(e.value) and UPSTREAM_KEY not in str(e.value)
        else:
            tctx.configure(tr, **settings)
            assert tr.routing.config is not None


def test_the_gateway_recipe_starts_with_client_keys_or_the_opt_out():
    for fix in ({"dragoman_client_keys": [f"devices={ALICE}"]}, {"dragoman_allow_remote": True}):
        auth, tr = ClientAuth(), Translate()
        with taddons.context(auth, tr) as tctx:
            tctx.options.mode = ["transparent"]
            tctx.configure(auth, **fix)
            tctx.configure(tr, listen_host="", dragoman_target="openai-chat", dragoman_api_key=UPSTREAM_KEY)
            assert tr.routing.config is not None
