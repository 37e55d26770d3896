"""``Exchange`` and its parts: body forms, chunk boundaries, readable JSON that round-trips."""

from __future__ import annotations

import base64
import json

from dragoman.record.model import SCHEMA_VERSION
from dragoman.record.model import Body
from dragoman.record.model import Exchange
from dragoman.record.model import HttpRequest
from dragoman.record.model import HttpResponse


def test_body_forms():
    assert Body.of(b'{"a": 1}', parse_json=True).json_ == {"a": 1}
    assert Body.of(b'{"a": 1}').text == '{"a": 1}'
    assert Body.of(b"not json", parse_json=True).text == "not json"
    assert Body.of(None).text == ""
    raw = b"\xff\xfe binary"
    b = Body.of(raw)
    assert b.b64 == base64.b64encode(raw).decode() and b.raw() == raw
    assert Body.of("héllo".encode()).raw() == "héllo".encode()
    assert Body(json={"x": [1]}).raw() == b'{"x":[1]}'
    assert Body(json={"x": 1}).parsed() == {"x": 1}
    assert Body(text='{"y": 2}').parsed() == {"y": 2}
    assert Body(text="data: x").parsed() is None
    assert Body().raw() == b""


def test_chunk_bytes_keep_the_original_boundaries_including_mid_utf8():
    data = "é€".encode()  # 2 + 3 bytes
    r = HttpResponse(status=200, body=Body.of(data[:1] + data[1:]), chunks=[(0, 0.0), (1, 0.25), (3, 0.5)])
    # a chunk boundary inside a multi-byte character survives the text storage
    assert r.chunk_bytes() == [(data[:1], 0.0), (data[1:3], 0.25), (data[3:], 0.5)]
    assert HttpResponse(status=200, body=Body.of(b"xy")).chunk_bytes() == [(b"xy", 0.0)]
    assert HttpResponse(status=204).chunk_bytes() == []


def test_header_lookup_is_case_insensitive():
    r = HttpRequest(headers=[("Content-Type", "a/b")])
    assert r.header("content-type") == "a/b" and r.header("x") is None
    assert HttpResponse(status=200, headers=[("X-A", "1")]).header("x-a") == "1"
    assert HttpResponse(status=200).header("x-a") is None


def test_json_is_readable_and_round_trips():
    ex = Exchange(
        client_protocol="anthropic",
        client_request=HttpRequest(
            url="http://h/v1/messages", headers=[("a", "1"), ("b", 'q"2')], body=Body(json={"k": 1})
        ),
        upstream_response=HttpResponse(status=200, body=Body.of(b"data: 1\n\n"), chunks=[(0, 0.0), (3, 0.012345)]),
    )
    text = ex.to_json()
    assert json.loads(text)["schema_version"] == SCHEMA_VERSION
    assert '["a", "1"]' in text and '["b", "q\\"2"]' in text  # one line per header
    assert "[3, 0.012345]" in text  # one line per chunk
    assert '"json": {' in text  # alias, not json_
    assert Exchange.from_json(text) == ex
    assert "upstream_request" not in json.loads(text)  # None fields are left out
