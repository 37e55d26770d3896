"""``mitm.headers``: one-scan reads and edits give what mitmproxy's own ``Headers`` accessors give (issue 31)."""

from __future__ import annotations

import pytest
from mitmproxy import http

from dragoman.mitm.relay import headers as hdr

FIELDS = [
    (b"Host", b"127.0.0.1:8080"),
    (b"Content-Type", b"application/json"),
    (b"X-Api-Key", b"sk-client"),
    (b"accept", b"a/b"),
    (b"Accept", b"c/d"),
    (b"x-utf8", "v\u00e9".encode()),
    (b"content-length", b"12"),
]


def headers() -> http.Headers:
    return http.Headers(list(FIELDS))


@pytest.mark.parametrize("name", ["host", "content-type", "x-api-key", "accept", "x-utf8", "content-length", "absent"])
def test_get_and_has_agree_with_mitmproxy(name):
    h = headers()
    assert hdr.get(h, name.encode()) == h.get(name)
    assert hdr.get(h, name.encode(), "dflt") == h.get(name, "dflt")
    assert hdr.has(h, name.encode()) is (name in h)


def test_edit_drops_and_sets_as_pop_and_setitem_would():
    mine, theirs = headers(), headers()
    hdr.edit(mine, drop={b"x-api-key", b"accept"}, put=[(b"content-length", "99"), (b"authorization", "Bearer k")])
    theirs.pop("x-api-key")
    theirs.pop("accept")
    theirs["content-length"] = "99"
    theirs["authorization"] = "Bearer k"
    assert mine.fields == theirs.fields


def test_edit_put_replaces_every_repeat_at_the_first_place_and_keeps_the_name_case():
    h = headers()
    hdr.edit(h, put=[(b"accept", "x/y")])
    assert [f for f in h.fields if f[0].lower() == b"accept"] == [(b"accept", b"x/y")]
    assert h.fields.index((b"accept", b"x/y")) == 3
    hdr.edit(h, put=[(b"host", "example.com")])
    assert h.fields[0] == (b"Host", b"example.com")


def test_edit_put_wins_over_drop_and_nothing_changes_when_nothing_is_asked():
    h = headers()
    before = h.fields
    hdr.edit(h)
    assert h.fields is before
    hdr.edit(h, drop={b"content-length"}, put=[(b"content-length", "1")])
    assert h.get_all("content-length") == ["1"]


def test_replace_sets_only_a_present_header():
    h = headers()
    hdr.replace(h, b"host", "up.example:443")
    assert h["host"] == "up.example:443"
    hdr.replace(h, b"origin", "https://page.example")
    assert "origin" not in h


@pytest.mark.parametrize(
    "extra",
    [[], [(b"transfer-encoding", b"chunked")], [(b"content-encoding", b"gzip")]],
    ids=["plain", "chunked", "gzip"],
)
def test_set_body_and_body_agree_with_mitmproxy_content(extra):
    mine = http.Response.make(200, b"old", http.Headers([(b"content-type", b"application/json"), *extra]))
    theirs = http.Response.make(200, b"old", http.Headers([(b"content-type", b"application/json"), *extra]))
    hdr.set_body(mine, b'{"new": true}')
    theirs.content = b'{"new": true}'
    assert mine.raw_content == theirs.raw_content
    assert mine.headers.fields == theirs.headers.fields
    assert hdr.body(mine) == theirs.get_content(strict=False) == b'{"new": true}'


def test_body_of_an_empty_or_undecodable_message():
    resp = http.Response.make(200, b"", {"content-type": "application/json"})
    assert hdr.body(resp) == b""
    resp.headers["content-encoding"] = "gzip"
    resp.raw_content = b"not gzip"
    assert hdr.body(resp) == resp.get_content(strict=False) == b"not gzip"


def test_reads_follow_every_change_of_the_headers():
    """``get``/``has`` read an index kept on the ``Headers`` for its current ``fields`` tuple: every change
    (mitmproxy's own setters, ``edit``, ``replace``, ``fields`` assigned, a copy changed) is seen at once."""
    h = headers()
    assert hdr.get(h, b"x-api-key") == "sk-client" and not hdr.has(h, b"authorization")
    h["authorization"] = "Bearer a"
    assert hdr.get(h, b"authorization") == "Bearer a"
    h.pop("x-api-key")
    assert not hdr.has(h, b"x-api-key") and hdr.get(h, b"x-api-key", "gone") == "gone"
    h.add("Accept", "e/f")
    assert hdr.get(h, b"accept") == h.get("accept") == "a/b, c/d, e/f"
    hdr.edit(h, drop={b"accept"}, put=[(b"content-length", "7")])
    assert not hdr.has(h, b"accept") and hdr.get(h, b"content-length") == "7"
    hdr.replace(h, b"host", "example.com")
    assert hdr.get(h, b"host") == "example.com"
    h.fields = ((b"X-New", b"1"),)
    assert hdr.get(h, b"x-new") == "1" and not hdr.has(h, b"host")
    c = h.copy()
    c["x-new"] = "2"
    assert (hdr.get(c, b"x-new"), hdr.get(h, b"x-new")) == ("2", "1")
    h.clear()
    assert not hdr.has(h, b"x-new")
