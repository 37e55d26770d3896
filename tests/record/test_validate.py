"""``playable``: hostile recordings refused (impossible status, bad base64, malformed chunk lists) or made
safe (bad headers dropped, delays clamped)."""

from __future__ import annotations

import pytest

from dragoman.record.model import Body
from dragoman.record.model import Exchange
from dragoman.record.model import HttpRequest
from dragoman.record.model import HttpResponse
from dragoman.record.validate import MAX_DELAY_S
from dragoman.record.validate import playable


def ex(**resp) -> Exchange:
    base = {"status": 200, "body": Body(text="abcdef"), "chunks": [(0, 0.0), (3, 0.5)]}
    return Exchange(client_request=HttpRequest(), upstream_response=HttpResponse(**{**base, **resp}))


def test_a_good_exchange_is_unchanged():
    good = ex(headers=[("content-type", "text/event-stream")])
    assert playable(good) == (good, [])
    assert playable(Exchange(client_request=HttpRequest())) == (Exchange(client_request=HttpRequest()), [])


@pytest.mark.parametrize(
    ("resp", "why"),
    [
        ({"status": 99999}, "not a final HTTP status"),
        ({"status": 101}, "not a final HTTP status"),
        ({"status": -1}, "not a final HTTP status"),
        ({"body": Body(b64="!!notbase64"), "chunks": None}, "not valid base64"),
        ({"chunks": [(1, 0.0)]}, "offset 1"),
        ({"chunks": [(0, 0.0), (4, 0.1), (2, 0.2)]}, "offset 2"),
        ({"chunks": [(0, 0.0), (99, 0.1)]}, "offset 99"),
        ({"chunks": [(0, float("nan"))]}, "not a finite number"),
    ],
)
def test_refused(resp, why):
    with pytest.raises(ValueError, match=why):
        playable(ex(**resp))


def test_bad_headers_dropped_and_delays_clamped():
    hostile = ex(
        headers=[("x-a\r\nx-b", "1"), ("x-c", "v\r\nx-d: 1"), ("x-e", "\u2603"), ("x-f", "ok")],
        reason="OK\r\nx: y",
        headers_delay=1e12,
        chunks=[(0, 5.0), (2, 1.0), (4, 1e9)],
    )
    safe, notes = playable(hostile)
    up = safe.upstream_response
    assert up.headers == [("x-f", "ok")] and up.reason == ""
    assert up.headers_delay == MAX_DELAY_S
    assert up.chunks == [(0, 5.0), (2, 5.0), (4, 5.0 + MAX_DELAY_S)]
    assert len(notes) == 4
    assert hostile.upstream_response.headers_delay == 1e12  # the input is not modified
