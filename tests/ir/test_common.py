from __future__ import annotations

import pytest

from dragoman.ir.common import Dropped
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import Usage
from dragoman.ir.common import kind_from_status


def test_usage_merged_other_wins_when_set():
    a = Usage(input_tokens=10, output_tokens=1, cache_read_tokens=3)
    b = Usage(output_tokens=7, reasoning_tokens=2, cache_creation_tokens=4)
    assert a.merged(b) == Usage(
        input_tokens=10, output_tokens=7, cache_read_tokens=3, cache_creation_tokens=4, reasoning_tokens=2
    )
    assert a.merged(None) is a
    assert a.merged(Usage()) == a


@pytest.mark.parametrize(
    "status,kind",
    [
        (400, ErrorKind.INVALID_REQUEST),
        (422, ErrorKind.INVALID_REQUEST),
        (401, ErrorKind.AUTHENTICATION),
        (403, ErrorKind.PERMISSION),
        (404, ErrorKind.NOT_FOUND),
        (413, ErrorKind.REQUEST_TOO_LARGE),
        (429, ErrorKind.RATE_LIMIT),
        (503, ErrorKind.OVERLOADED),
        (529, ErrorKind.OVERLOADED),
        (504, ErrorKind.TIMEOUT),
        (502, ErrorKind.UPSTREAM_PROTOCOL),
        (500, ErrorKind.API_ERROR),
        (418, ErrorKind.API_ERROR),
    ],
)
def test_kind_from_status(status, kind):
    assert kind_from_status(status) is kind


def test_error_http_status():
    assert ErrorInfo(ErrorKind.RATE_LIMIT, "m").http_status == 429
    assert ErrorInfo(ErrorKind.RATE_LIMIT, "m", status=400).http_status == 400
    for k in ErrorKind:  # every kind has a default status
        assert 400 <= ErrorInfo(k, "m").http_status < 600


def test_dropped_dedupes_names():
    d = Dropped()
    d.add("temperature")
    d.add("temperature")
    d.add("top_k")
    assert d.fields == ["temperature", "top_k"]
