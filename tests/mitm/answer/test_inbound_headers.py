"""A stream's response headers (``dragoman.mitm.answer.inbound.stream_headers``, ``Translate.responseheaders``): the
headers the addon sets (request id, route, lossy count) and a stream's framing are set in one pass, with the
headers the two separate edits gave, in the same order (issue 31: before a stream's first byte)."""

from __future__ import annotations

import pytest
from mitmproxy import http

from dragoman.mitm.answer import inbound
from dragoman.mitm.relay import headers as hdr

from ..test_translate_addon import make_flow
from ..test_translate_addon import sse_response

UPSTREAM = [
    (b"Date", b"Sat, 28 Nov 2026 01:00:00 GMT"),
    (b"Content-Type", b"text/event-stream"),
    (b"Content-Length", b"1234"),
    (b"x-request-id", b"req_1"),
    (b"Cache-Control", b"private"),
    (b"X-Dragoman-Route", b"older/hop"),
    (b"Content-Encoding", b"gzip"),
    (b"Server", b"fake"),
    (b"cache-control", b"max-age=5"),
]
PUTS = [(b"request-id", "req_1"), (b"x-dragoman-route", "main/gpt-x"), (b"x-dragoman-lossy", "3")]


def response(http_version: bytes = b"HTTP/1.1") -> http.Response:
    return http.Response(http_version, 200, b"OK", http.Headers(list(UPSTREAM)), b"", None, 0, 0)


def two_passes(resp: http.Response, translated: bool, content_type: str, chunked: bool) -> None:
    """What ``responseheaders`` did before: the addon's headers, then the framing (its own pass)."""
    hdr.edit(resp.headers, put=PUTS)
    if not translated:
        resp.headers["x-accel-buffering"] = "no"  # mitmproxy's own setter, as it was
        return
    put = [(b"content-type", content_type), (b"cache-control", "no-cache"), (b"x-accel-buffering", "no")]
    if chunked:
        put.append((b"transfer-encoding", "chunked"))
    drop = {b"content-length", b"content-encoding", b"content-type", b"cache-control", b"x-accel-buffering"}
    hdr.edit(resp.headers, drop | ({b"transfer-encoding"} if chunked else set()), put)


@pytest.mark.parametrize(
    ("translated", "content_type", "chunked"),
    [(True, inbound.SSE_CT, True), (True, inbound.SSE_CT, False), (True, inbound.JSON_CT, True), (False, "", False)],
)
def test_one_pass_gives_the_headers_of_the_two_passes(translated, content_type, chunked):
    one, two = response(), response()
    inbound.stream_headers(one, translated, content_type or inbound.SSE_CT, chunked, puts=PUTS)
    two_passes(two, translated, content_type or inbound.SSE_CT, chunked)
    assert one.headers.fields == two.headers.fields
    if translated:
        assert one.headers["content-type"] == content_type and "content-encoding" not in one.headers
    assert one.headers["x-dragoman-route"] == "main/gpt-x" and one.headers["x-accel-buffering"] == "no"


def started(tctx, addon, status: int = 200, **extra: str) -> tuple[http.HTTPFlow, tuple]:
    """A streamed request through ``request``, its answer's headers through ``responseheaders``; the answer's
    headers as the upstream sent them."""
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
    f = make_flow("anthropic", stream=True)
    addon.request(f)
    f.response = sse_response(status=status, extra=extra)
    before = f.response.headers.fields
    addon.responseheaders(f)
    return f, before


def test_a_translated_stream_sets_its_request_id_with_its_framing(tctx, addon):
    f, before = started(tctx, addon, **{"x-request-id": "req_7", "server": "fake"})
    assert callable(f.response.stream)
    lossy = str(addon.flows.get(f.id).ctx.dropped.count)
    expected = http.Headers(list(before))
    hdr.edit(expected, put=[(b"request-id", "req_7"), (b"x-dragoman-lossy", lossy)])
    inbound.stream_headers(http.Response(b"HTTP/1.1", 200, b"OK", expected, b"", None, 0, 0), chunked=True)
    assert f.response.headers.fields == expected.fields
    assert [k for k, _ in f.response.headers.fields][-6:] == [
        b"server",
        b"request-id",
        b"x-dragoman-lossy",
        b"cache-control",
        b"x-accel-buffering",
        b"transfer-encoding",
    ]


@pytest.mark.parametrize(
    ("status", "extra"),
    [
        # an encoding without an incremental decoder: translated whole in ``response``
        (200, {"x-request-id": "req_8", "content-encoding": "br"}),
        (429, {"x-request-id": "req_9"}),  # an error: answered whole
    ],
)
def test_an_answer_left_whole_gets_the_addons_headers_only(tctx, addon, status, extra):
    f, before = started(tctx, addon, status, **extra)
    assert not callable(f.response.stream)
    lossy = str(addon.flows.get(f.id).ctx.dropped.count)
    assert f.response.headers.fields == (
        *before,
        (b"request-id", extra["x-request-id"].encode()),
        (b"x-dragoman-lossy", lossy.encode()),
    )
