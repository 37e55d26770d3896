"""``Body`` keeps a JSON body nested deeper than the serializer goes as text, so the exchange is recorded."""

from __future__ import annotations

import json

from dragoman.record.model import JSON_DEPTH_LIMIT
from dragoman.record.model import Body


def nested(depth: int) -> bytes:
    return ('{"a":' * depth + "1" + "}" * depth).encode()


def test_shallow_json_is_parsed():
    body = Body.of(nested(10), parse_json=True)
    assert body.json_ is not None and body.parsed() == json.loads(nested(10))


def test_deep_json_is_kept_as_text_and_serializes():
    for depth in (JSON_DEPTH_LIMIT + 1, 600, 5000):
        body = Body.of(nested(depth), parse_json=True)
        assert body.json_ is None and body.text == nested(depth).decode()
        assert body.parsed() is None
        assert nested(depth).decode() in json.loads(body.model_dump_json(by_alias=True, exclude_none=True))["text"]
