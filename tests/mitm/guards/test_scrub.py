"""``scrub``: credentials leave the flow once the request is sent; keys masked in what is left for -w."""

from __future__ import annotations

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
