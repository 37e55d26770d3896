"""The safe default of Cors without ``dragoman_cors_origins`` (``Cors.guard``): while Dragoman holds upstream
keys and no client keys are configured, a browser page's request (``Origin``, or a foreign ``Sec-Fetch-Site``)
is refused 403 in the client's protocol shape before anything reaches an upstream. Hooks run in the order of
``addon/dragoman.py`` (``Chain`` of test_cors)."""

from __future__ import annotations

import json
import logging

import pytest
from mitmproxy import http
from mitmproxy.test import taddons

from dragoman.mitm.flowstate import METADATA_KEY as TRANSLATE_KEY
from dragoman.mitm.guards import cors as cors_mod
from dragoman.mitm.guards.client_auth import CLIENT_METADATA_KEY

from .test_cors import ALICE
from .test_cors import APP
from .test_cors import Chain
from .test_cors import cors_headers
from .test_cors import make_flow
from .test_cors import preflight

UPSTREAM_KEY = "sk-upstream-SECRET-9"
EVIL = "https://evil.example"
SHAPES = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai", "/v1/responses": "openai"}
ROUTES = """\
upstreams:
  - name: pool
    protocol: openai-chat
    base_url: http://127.0.0.1:1/v1
    keys: [env:POOL_KEY_A, env:POOL_KEY_B]
routes:
  - match: "*"
    to: pool
"""


@pytest.fixture
def keyed():
    """Dragoman holding an upstream key (``dragoman_api_key``), no client keys, no CORS origins."""
    c = Chain()
    with taddons.context(*c.order) as tctx:
        tctx.configure(
            c.tr,
            listen_host="127.0.0.1",
            dragoman_target="openai-chat",
            dragoman_upstream="http://127.0.0.1:1/v1",
            dragoman_api_key=UPSTREAM_KEY,
        )
        c.tctx = tctx
        yield c


def text_plain_post(path: str, headers: dict, **kw) -> http.HTTPFlow:
    """What ``fetch(url, {method: "POST", body, headers: {"content-type": "text/plain"}})`` sends: no preflight."""
    f = make_flow("POST", path, headers, **kw)
    f.request.headers["content-type"] = "text/plain;charset=UTF-8"
    return f


def assert_refused(f: http.HTTPFlow, origin: str, shape: str = "anthropic") -> None:
    assert f.response is not None and f.response.status_code == 403
    assert f.response.headers["content-type"] == "application/json"
    assert cors_headers(f.response) == {}  # the browser blocks the answer too
    body = json.loads(f.response.content)
    if shape == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "permission_error"
        message = body["error"]["message"]
    else:
        assert set(body) == {"error"} and body["error"]["type"] == "permission_error"
        message = body["error"]["message"]
    assert repr(origin) in message and "--set dragoman_cors_origins=ORIGIN" in message
    assert "dragoman_client_keys" in message and UPSTREAM_KEY not in f.response.text
    assert f.metadata[cors_mod.METADATA_KEY] == "browser-refused"
    # nothing was forwarded: Translate never saw the flow, the request still points at Dragoman, no key added
    assert TRANSLATE_KEY not in f.metadata
    assert f.request.host == "proxy" and f.request.port == 8080
    assert UPSTREAM_KEY not in str(f.request.headers)


@pytest.mark.parametrize("path", list(SHAPES))
def test_a_pages_text_plain_post_is_refused_in_its_protocol_shape(keyed, path, caplog):
    caplog.set_level(logging.WARNING)
    f = keyed.answer(keyed.request(text_plain_post(path, {"origin": EVIL})))
    assert_refused(f, EVIL, SHAPES[path])
    lines = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == cors_mod.__name__]
    assert len(lines) == 1
    line = lines[0].getMessage()
    assert EVIL in line and path in line and UPSTREAM_KEY not in line


@pytest.mark.parametrize("path", ["/v1/messages", "/chat/completions", "/v1/responses", "/v1/models"])
def test_a_preflight_is_refused_without_cors_headers(keyed, path):
    f = keyed.answer(keyed.request(preflight(path, origin=EVIL)))
    shape = "anthropic" if "messages" in path else "openai"
    assert_refused(f, EVIL, shape)


def test_dragomans_local_answers_are_refused_too(keyed):
    count = keyed.request(make_flow("POST", "/v1/messages/count_tokens", {"origin": EVIL}))
    assert_refused(count, EVIL)
    models = keyed.request(make_flow("GET", "/v1/models", {"origin": EVIL, "anthropic-version": "2023-06-01"}))
    assert_refused(models, EVIL)


def test_origin_null_is_a_browser(keyed):
    f = keyed.request(text_plain_post("/v1/messages", {"origin": "null"}))
    assert_refused(f, "null")


@pytest.mark.parametrize("site", ["cross-site", "same-site", "CROSS-SITE"])
def test_a_foreign_sec_fetch_site_without_origin_is_a_browser(keyed, site):
    f = keyed.request(make_flow("GET", "/v1/models", {"sec-fetch-site": site}))
    assert f.response is not None and f.response.status_code == 403
    assert "Sec-Fetch-Site" in json.loads(f.response.content)["error"]["message"]


@pytest.mark.parametrize("headers", [{}, {"sec-fetch-site": "none"}, {"sec-fetch-site": "same-origin"}])
def test_without_origin_the_request_is_forwarded_with_dragomans_key(keyed, headers):
    f = keyed.request(make_flow("POST", "/v1/messages", headers))
    assert f.response is None and TRANSLATE_KEY in f.metadata
    assert f.request.path == "/v1/chat/completions" and f.request.port == 1
    assert f.request.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert cors_mod.METADATA_KEY not in f.metadata


def test_without_a_key_of_its_own_nothing_changes():
    chain = Chain()  # no dragoman_api_key: the client's own key moves upstream
    with taddons.context(*chain.order) as tctx:
        tctx.configure(chain.tr, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
        check_unkeyed(chain)


def check_unkeyed(chain: Chain) -> None:
    f = chain.request(text_plain_post("/v1/messages", {"origin": EVIL, "x-api-key": "sk-client"}))
    assert f.response is None and TRANSLATE_KEY in f.metadata
    assert f.request.headers["authorization"] == "Bearer sk-client"
    pre = chain.request(preflight(origin=EVIL))
    assert pre.response is None and pre.request.method == "OPTIONS"  # passes through to the upstream


def test_a_key_pool_in_the_routes_file_counts(tmp_path, monkeypatch):
    monkeypatch.setenv("POOL_KEY_A", "sk-pool-a")
    monkeypatch.setenv("POOL_KEY_B", "sk-pool-b")
    routes = tmp_path / "routes.yaml"
    routes.write_text(ROUTES)
    c = Chain()
    with taddons.context(*c.order) as tctx:
        tctx.configure(c.tr, listen_host="127.0.0.1", dragoman_config=str(routes))
        f = c.request(text_plain_post("/v1/chat/completions", {"origin": EVIL}))
        assert f.response is not None and f.response.status_code == 403
        assert json.loads(f.response.content)["error"]["type"] == "permission_error"
        assert TRANSLATE_KEY not in f.metadata
        plain = c.request(make_flow("POST", "/v1/chat/completions"))
        # no Origin: past Cors and ClientAuth into Translate (whose relay is not running in this unit test)
        assert cors_mod.METADATA_KEY not in plain.metadata
        assert plain.response.status_code == 500 and "relay is not running" in plain.response.text


def test_with_client_keys_the_client_key_rules_apply(keyed):
    keyed.tctx.configure(keyed.auth, dragoman_client_keys=[f"alice={ALICE}"])
    anonymous = keyed.request(text_plain_post("/v1/messages", {"origin": EVIL}))
    assert anonymous.response.status_code == 401  # ClientAuth's answer, not the browser refusal
    assert json.loads(anonymous.response.content)["error"]["type"] == "authentication_error"
    assert cors_mod.METADATA_KEY not in anonymous.metadata
    alice = keyed.request(text_plain_post("/v1/messages", {"origin": APP, "x-api-key": ALICE}))
    assert alice.response is None and alice.metadata[CLIENT_METADATA_KEY] == "alice"
    assert alice.request.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_with_cors_origins_the_cors_rules_apply(keyed):
    keyed.tctx.configure(keyed.cors, dragoman_cors_origins=[APP])
    allowed = keyed.request(text_plain_post("/v1/messages", {"origin": APP}))
    assert allowed.response is None and TRANSLATE_KEY in allowed.metadata and "origin" not in allowed.request.headers
    assert keyed.request(preflight(origin=APP)).response.status_code == 204
    other = keyed.request(text_plain_post("/v1/messages", {"origin": EVIL}))
    assert other.response.status_code == 403 and other.metadata[cors_mod.METADATA_KEY] == "refused"
    # the option back to empty: the default holds again
    keyed.tctx.configure(keyed.cors, dragoman_cors_origins=[])
    again = keyed.request(text_plain_post("/v1/messages", {"origin": APP}))
    assert again.metadata[cors_mod.METADATA_KEY] == "browser-refused"


def test_interception_of_an_official_host_is_guarded_other_hosts_are_not(keyed):
    official = keyed.request(text_plain_post("/v1/messages", {"origin": EVIL}, host="api.anthropic.com", reverse=False))
    assert official.response is not None and official.response.status_code == 403
    assert official.metadata[cors_mod.METADATA_KEY] == "browser-refused"
    other = keyed.request(text_plain_post("/v1/messages", {"origin": EVIL}, host="api.example.com", reverse=False))
    assert other.response is None and other.request.headers["origin"] == EVIL
    # reverse mode, a path that is none of Dragoman's endpoints: passes through as before
    files = keyed.request(make_flow("POST", "/v1/files", {"origin": EVIL}))
    assert files.response is None


def test_replayed_flows_are_left_alone(keyed):
    f = text_plain_post("/v1/messages", {"origin": EVIL})
    f.is_replay = "request"
    keyed.cors.request(f)
    assert f.response is None
