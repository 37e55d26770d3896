"""``outbound``: where a translated request goes and which credentials it carries."""

from __future__ import annotations

import pytest
from mitmproxy import http

from dragoman.mitm import outbound
from dragoman.protocols import Protocol

KEY = "sk-configured-SECRET"
CLIENT = {
    "x-api-key": "client-anthropic",
    "authorization": "Bearer client-openai",
    "api-key": "client-azure",
    "x-goog-api-key": "client-google",
    "proxy-authorization": "Basic client-proxy",
    "cookie": "session=client-cookie",
}
QUERY = "key=q1&API_KEY=q2&access_token=q3&token=q4&apikey=q5&beta=true&x=1"


def request(query: str = QUERY) -> http.Request:
    return http.Request.make("POST", f"https://api.example.com/v1/messages?{query}", b"{}", CLIENT)


@pytest.mark.parametrize("target", list(Protocol))
def test_configured_key_strips_every_client_credential(target):
    req = request()
    outbound.rewrite_auth(req, target, KEY)
    text = str(list(req.headers.items(multi=True))) + req.path
    for value in [*CLIENT.values(), "q1", "q2", "q3", "q4", "q5"]:
        assert value.removeprefix("Bearer ").removeprefix("Basic ") not in text, value
    assert req.query.get("beta") == "true" and req.query.get("x") == "1"
    if target is Protocol.ANTHROPIC_MESSAGES:
        assert req.headers["x-api-key"] == KEY
    elif target is Protocol.GEMINI:
        assert req.headers["x-goog-api-key"] == KEY
        assert "authorization" not in req.headers
    else:
        assert req.headers["authorization"] == f"Bearer {KEY}"


def test_client_key_moved_when_none_is_configured():
    req = request()
    outbound.rewrite_auth(req, Protocol.OPENAI_CHAT, None)
    assert req.headers["authorization"] == "Bearer client-anthropic"  # x-api-key first
    assert "x-api-key" not in req.headers
    assert req.path.endswith(QUERY)  # the client's own choice: left alone


def test_query_without_credentials_is_left_byte_for_byte():
    req = request("beta=true&x=a%20b")
    assert sorted(outbound.strip_credentials(req)) == sorted(n for n in CLIENT if outbound.is_credential_header(n))
    assert set(outbound.CREDENTIAL_HEADERS) & set(CLIENT) <= set(outbound.strip_credentials(request()))
    assert req.path == "/v1/messages?beta=true&x=a%20b"


def test_clean_query():
    assert outbound.clean_query("beta=true") == ("beta=true", [])
    assert outbound.clean_query("key=1&Token=2&beta=true") == ("beta=true", ["key", "Token"])
    assert outbound.clean_query("key=1") == ("", ["key"])


def test_relayed_headers_drop_other_providers_credentials_only_with_a_configured_key():
    items = list(CLIENT.items())
    keyed = dict(outbound.relayed_headers(items, Protocol.ANTHROPIC_MESSAGES, KEY, configured=True))
    assert keyed["x-api-key"] == KEY
    assert not {"api-key", "x-goog-api-key", "authorization", "cookie", "proxy-authorization"} & keyed.keys()
    own = dict(outbound.relayed_headers(items, Protocol.ANTHROPIC_MESSAGES, "client-anthropic"))
    assert own["x-api-key"] == "client-anthropic"
    assert own["api-key"] == "client-azure"  # the client's own request: its other headers pass


def test_thousands_of_headers_are_handled_in_one_pass():
    """Issue 29, 4: ``Headers.keys()`` looks every name up again (2,500 headers took 7 s in mitmdump); the
    credential pass reads the raw fields once: same answer for a head that large."""
    headers = {f"x-pad-{i:05d}": "v" for i in range(2500)}
    req = http.Request.make("POST", "https://api.example.com/v1/messages", b"{}", {**headers, **CLIENT})
    req.headers["anthropic-beta"] = "x"
    outbound.rewrite_auth(req, Protocol.OPENAI_CHAT, KEY)
    assert req.headers["authorization"] == f"Bearer {KEY}" and "anthropic-beta" not in req.headers
    assert (
        "x-api-key" not in req.headers and "cookie" not in req.headers and len(req.headers.fields) == 2502
    )  # + content-length, authorization


# -- point_at: the Host header and the authority fixed once, as mitmproxy's setters do (issue 31) ------------------


@pytest.mark.parametrize("host_header", [True, False])
@pytest.mark.parametrize("authority", [b"", b"client.example:8080"])
def test_point_at_matches_mitmproxys_setters(host_header, authority):
    def make() -> http.Request:
        req = http.Request.make("POST", "http://client.example:8080/v1/messages", b"{}", {"content-type": "a/b"})
        if not host_header:
            req.headers.pop("host", None)
        else:
            req.headers["Host"] = "client.example:8080"
        req.data.authority = authority
        return req

    mine, theirs = make(), make()
    outbound.point_at(mine, "https", "up.example", 443)
    theirs.scheme, theirs.host, theirs.port = "https", "up.example", 443
    assert (mine.scheme, mine.host, mine.port, mine.authority) == (
        theirs.scheme,
        theirs.host,
        theirs.port,
        theirs.authority,
    )
    assert mine.headers.fields == theirs.headers.fields
    assert mine.url == theirs.url == "https://up.example/v1/messages"


def test_rewrite_auth_makes_the_extra_edits_in_the_same_pass():
    req = request("")
    req.headers["content-encoding"] = "gzip"
    req.headers["anthropic-beta"] = "x"
    outbound.rewrite_auth(req, Protocol.OPENAI_CHAT, KEY, {b"content-encoding"}, [(b"accept-encoding", "identity")])
    names = [k.decode().lower() for k, _ in req.headers.fields]
    assert "content-encoding" not in names and "anthropic-beta" not in names
    assert req.headers["accept-encoding"] == "identity"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert not any(n in names for n in ("x-api-key", "api-key", "x-goog-api-key", "cookie", "proxy-authorization"))


def test_client_key_from_headers_or_any_mapping_with_get():
    hdrs = http.Headers([(b"Authorization", b"Bearer sk-client-1")])
    assert outbound.client_key(hdrs) == "sk-client-1"
    # a WebSocket turn keeps its connection's headers as a list, looked up through a mapping with ``get``
    assert outbound.client_key({"authorization": "Bearer sk-client-2"}) == "sk-client-2"
    assert outbound.client_key({"x-api-key": "sk-client-3", "authorization": "Bearer other"}) == "sk-client-3"
    assert outbound.client_key({}, "a=1&key=sk-q") == "sk-q"
