"""``scrub``: credentials leave the flow once the request is sent; keys masked in what is left for -w."""

from __future__ import annotations

import pytest
from mitmproxy import http
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman.mitm.guards.scrub import REMOVED_KEY
from dragoman.mitm.guards.scrub import MetadataMask
from dragoman.mitm.guards.scrub import Scrubber
from dragoman.mitm.translate_addon import Translate

KEY = "sk-configured-SECRET-42"


def keyed_flow() -> http.HTTPFlow:
    req = http.Request.make(
        "POST", "https://api.example.com/v1/messages?key=q&beta=1", b"{}", {"x-api-key": KEY, "cookie": "c=1"}
    )
    return tflow.tflow(req=req)


def test_credentials_removed_once_sent():
    s = Scrubber()
    f = keyed_flow()
    s.hold(f)
    assert f.request.headers["x-api-key"] == KEY  # still there for the send
    s.sent(f)
    assert "x-api-key" not in f.request.headers and "cookie" not in f.request.headers
    assert f.request.path == "/v1/messages?beta=1"
    assert f.metadata[REMOVED_KEY] == ["cookie", "key", "x-api-key"]
    assert not s.held


def test_flows_never_held_are_left_alone():
    f = keyed_flow()
    Scrubber().sent(f)
    assert f.request.headers["x-api-key"] == KEY


def test_flows_in_flight_scrubbed_at_shutdown():
    s = Scrubber()
    flows = [keyed_flow() for _ in range(3)]
    for f in flows:
        s.hold(f)
    s.done()
    assert all("x-api-key" not in f.request.headers for f in flows)


def test_metadata_masked_before_the_flow_is_saved():
    translate = Translate()
    with taddons.context(translate) as tctx:
        tctx.configure(translate, dragoman_target="anthropic", dragoman_api_key=KEY)
        f = keyed_flow()
        f.metadata["dragoman_upstream_chunks"] = [b"data: ok\n\n", f"data: bad key {KEY}\n\n".encode()]
        f.metadata["dragoman"] = {"attempts": [{"detail": f"401 invalid {KEY}"}], "n": 1}
        f.metadata["other"] = 5
        untouched = f.metadata["dragoman_upstream_chunks"][0]
        MetadataMask().response(f)
        text = repr(f.metadata)
        assert KEY not in text
        assert "key masked by Dragoman" in text
        assert f.metadata["dragoman_upstream_chunks"][0] is untouched
        assert f.metadata["other"] == 5


# -- FlowScrub: every Dragoman flow, whatever answered it (issue 29, 3) ----------------------------------------

from mitmproxy.proxy import mode_specs  # noqa: E402

from dragoman.mitm.guards.client_auth import ClientAuth  # noqa: E402
from dragoman.mitm.guards.scrub import SCOPE_KEY  # noqa: E402
from dragoman.mitm.guards.scrub import FlowScrub  # noqa: E402

CLIENT_KEY = "sk-dragoman-client-ALICE-77"
OTHER_SECRETS = {
    "authorization": "Bearer sk-openai-own-1234",
    "x-goog-api-key": "goog-own-1234",
    "x-auth-token": "tok-own-1234",
}


def answered_flow(status: int, mode: str = "reverse:http://127.0.0.1:1") -> http.HTTPFlow:
    headers = {"x-api-key": CLIENT_KEY, "cookie": "s=1", **OTHER_SECRETS}
    body = f'{{"model": "m", "note": "{CLIENT_KEY} and {KEY}"}}'.encode()
    req = http.Request.make("POST", f"http://127.0.0.1:1/v1/messages?key={CLIENT_KEY}&beta=1", body, headers)
    f = tflow.tflow(req=req)
    f.client_conn.proxy_mode = mode_specs.ProxyMode.parse(mode)
    f.response = http.Response.make(status, b'{"type":"error"}', {"content-type": "application/json"})
    return f


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 431, 200, 502])
def test_a_flow_dragoman_answered_is_scrubbed_at_its_end(status):
    auth, translate, scrubber = ClientAuth(), Translate(), FlowScrub()
    with taddons.context(auth, translate, scrubber) as tctx:
        tctx.configure(auth, dragoman_client_keys=[f"alice={CLIENT_KEY}"])
        tctx.configure(translate, dragoman_target="anthropic", dragoman_api_key=KEY, listen_host="127.0.0.1")
        f = answered_flow(status)
        scrubber.mark.requestheaders(f)
        assert f.metadata[SCOPE_KEY] is True
        scrubber.response(f)
        saved = repr(f.get_state())
        for secret in (CLIENT_KEY, KEY, *(v.removeprefix("Bearer ") for v in OTHER_SECRETS.values())):
            assert secret not in saved, secret
        assert f.request.query.get("beta") == "1"
        assert {"x-api-key", "cookie", "authorization", "x-goog-api-key", "x-auth-token", "key"} <= set(
            f.metadata[REMOVED_KEY]
        )


def test_an_error_ends_the_flow_scrubbed_too():
    auth, translate, scrubber = ClientAuth(), Translate(), FlowScrub()
    with taddons.context(auth, translate, scrubber) as tctx:
        tctx.configure(translate, dragoman_target="anthropic", dragoman_api_key=KEY, listen_host="127.0.0.1")
        f = answered_flow(200)
        f.response = None
        f.error = flow_error()
        scrubber.mark.requestheaders(f)
        scrubber.error(f)
        assert "x-api-key" not in f.request.headers and KEY not in repr(f.get_state())


def flow_error():
    from mitmproxy.flow import Error

    return Error("connection killed")


def test_flows_of_other_hosts_keep_their_headers():
    """An app's own traffic to another host through the same explicit proxy is not Dragoman's to scrub."""
    auth, translate, scrubber = ClientAuth(), Translate(), FlowScrub()
    with taddons.context(auth, translate, scrubber) as tctx:
        tctx.configure(translate, dragoman_target="anthropic", dragoman_api_key=KEY, listen_host="127.0.0.1")
        req = http.Request.make("POST", "https://example.com/login", b"{}", {"authorization": "Bearer theirs-123"})
        f = tflow.tflow(req=req, resp=True)
        f.client_conn.proxy_mode = mode_specs.ProxyMode.parse("regular")
        scrubber.mark.requestheaders(f)
        scrubber.mark.request(f)
        scrubber.response(f)
        assert SCOPE_KEY not in f.metadata and f.request.headers["authorization"] == "Bearer theirs-123"


# -- the key search over metadata builds nothing when no key is there (issue 31) ----------------------------------


def test_metadata_without_a_key_is_left_as_the_same_objects():
    from dragoman.mitm.guards.scrub import _mask_metadata
    from dragoman.mitm.keymask import KeyMask

    f = keyed_flow()
    inner = {"lossy": [{"path": "system[0].cache_control", "kind": "dropped"}], "t": ("a", b"b", 3, None)}
    f.metadata["dragoman"] = inner
    _mask_metadata(f, KeyMask([KEY]))
    assert f.metadata["dragoman"] is inner


@pytest.mark.parametrize(
    "value",
    [
        ("x", f"k={KEY}"),
        {"deep": [{"deeper": (b"x", f"{KEY}".encode())}]},
        bytearray(b"no"),  # not searched as text, and not a key: untouched
    ],
    ids=["tuple-str", "nested-bytes", "bytearray"],
)
def test_metadata_keys_found_in_tuples_and_nested_bytes(value):
    from dragoman.mitm.guards.scrub import _mask_metadata
    from dragoman.mitm.keymask import KeyMask

    f = keyed_flow()
    f.metadata["v"] = value
    _mask_metadata(f, KeyMask([KEY]))
    assert KEY not in repr(f.metadata["v"])
    assert type(f.metadata["v"]) is type(value)
