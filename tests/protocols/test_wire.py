"""Shared wire helpers: JSON parsing with the right error class, validation-error summaries, and the
best-effort ErrorInfo of any upstream error body."""

from __future__ import annotations

import orjson
import pytest
from pydantic import ValidationError

from dragoman.errors import ClientRequestError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import ErrorKind
from dragoman.protocols._wire import WireModel
from dragoman.protocols._wire import describe_validation_error
from dragoman.protocols._wire import generic_error
from dragoman.protocols._wire import parse_client_json
from dragoman.protocols._wire import parse_upstream_json


class Point(WireModel):
    x: int
    y: int
    z: int
    w: int


def test_wire_models_keep_unknown_fields():
    p = Point.model_validate({"x": 1, "y": 2, "z": 3, "w": 4, "new_api_field": [1]})
    assert p.model_dump()["new_api_field"] == [1]


def test_describe_validation_error_names_paths_not_values():
    with pytest.raises(ValidationError) as e:
        Point.model_validate({"x": "secret-value", "y": "s2", "z": "s3", "w": "s4"})
    text = describe_validation_error(e.value)
    assert text.startswith("x: Input should be a valid integer")
    assert "y: " in text and "z: " in text
    assert "w: " not in text  # three shown, the rest counted
    assert text.endswith("and 1 more")
    assert "secret" not in text


def test_describe_validation_error_of_the_root():
    with pytest.raises(ValidationError) as e:
        Point.model_validate([1, 2])
    assert describe_validation_error(e.value).startswith("(root): ")


@pytest.mark.parametrize(
    "parse, error",
    [(parse_client_json, ClientRequestError), (parse_upstream_json, UpstreamProtocolError)],
)
def test_parse_json_objects(parse, error):
    assert parse(b'{"a": [1]}') == {"a": [1]}
    with pytest.raises(error, match="not valid JSON"):
        parse(b'{"a": ')
    with pytest.raises(error, match="must be a JSON object"):
        parse(b'"text"')


def test_generic_error_of_each_protocols_json_shape():
    anthropic = generic_error(
        529,
        orjson.dumps(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": "req_1"}
        ),
    )
    assert (anthropic.kind, anthropic.message, anthropic.code, anthropic.request_id) == (
        ErrorKind.OVERLOADED,
        "Overloaded",
        "overloaded_error",
        "req_1",
    )
    openai = generic_error(
        400,
        orjson.dumps(
            {"error": {"message": "bad model", "type": "invalid_request_error", "param": "model", "code": None}}
        ),
    )
    assert (openai.kind, openai.message, openai.code, openai.param, openai.status) == (
        ErrorKind.INVALID_REQUEST,
        "bad model",
        "invalid_request_error",
        "model",
        400,
    )


@pytest.mark.parametrize(
    "body, message",
    [
        ({"detail": "Not Found"}, "Not Found"),
        ({"message": "no route"}, "no route"),
        ({"error": "plain string error"}, "plain string error"),
        ({"error": {"message": {"nested": 1}}}, '{"nested":1}'),
        ({"error": {"code": 12}}, "upstream returned HTTP 404"),
    ],
)
def test_generic_error_of_other_json(body, message):
    info = generic_error(404, orjson.dumps(body))
    assert info.message == message
    assert info.kind is ErrorKind.NOT_FOUND


def test_generic_error_numeric_code_becomes_a_string():
    assert generic_error(500, b'{"error": {"message": "x", "code": 12}}').code == "12"


def test_generic_error_of_an_html_page_uses_its_title():
    page = b"<html><head><title>\n 502  Bad\n Gateway </title></head><body><h1>nginx</h1></body></html>"
    info = generic_error(502, page)
    assert info.message == "502 Bad Gateway"
    assert info.kind is ErrorKind.UPSTREAM_PROTOCOL


def test_generic_error_of_html_without_title_is_its_text_bounded():
    info = generic_error(500, b"<p>broken   <b>badly</b></p>" + b"x" * 1000)
    assert info.message.startswith("broken badly x")
    assert len(info.message) == 300


def test_generic_error_of_nothing_and_headers():
    info = generic_error(429, b"", {"Retry-After": "30", "X-Request-Id": "abc"})
    assert info.message == "upstream returned HTTP 429"
    assert (info.kind, info.retry_after, info.request_id) == (ErrorKind.RATE_LIMIT, "30", "abc")
    assert generic_error(401, b"", {"request-id": "r2"}).request_id == "r2"
