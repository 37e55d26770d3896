"""Redaction: secret headers, named fields and query parameters; secret values scrubbed everywhere."""

from __future__ import annotations

from dragoman.record.redact import REDACTED
from dragoman.record.redact import Redactor

KEY = "sk-ant-SECRET-0123456789"


def test_secret_headers_are_redacted_and_their_values_remembered():
    r = Redactor()
    out = r.headers(
        [
            ("Authorization", f"Bearer {KEY}"),
            ("x-api-key", KEY),
            ("Cookie", "sid=cookievalue123"),
            ("set-cookie", "a=b"),
            ("content-type", "x"),
        ]
    )
    assert out == [
        ("Authorization", REDACTED),
        ("x-api-key", REDACTED),
        ("Cookie", REDACTED),
        ("set-cookie", REDACTED),
        ("content-type", "x"),
    ]
    assert KEY in r.secrets and "cookievalue123" in r.secrets
    assert "Bearer" not in r.secrets and "a=b" not in r.secrets  # too short to scrub elsewhere


def test_user_named_headers_fields_and_paths():
    r = Redactor(["X-Org-Token", "password", "metadata.user_id", " "])
    assert r.headers([("x-org-token", "tok-abcdefgh")]) == [("x-org-token", REDACTED)]
    body = {"password": "p", "nested": [{"Password": "q"}], "metadata": {"user_id": "u", "other": 1}}
    out = r.json(body)
    assert out == {
        "password": REDACTED,
        "nested": [{"Password": REDACTED}],
        "metadata": {"user_id": REDACTED, "other": 1},
    }
    assert body["password"] == "p"  # the input is not modified
    assert Redactor().json(body) is body
    assert Redactor(["a.b"]).json({"a": 1}) == {"a": 1}


def test_query_parameters():
    r = Redactor(["token"])
    assert (
        r.url("https://h/v1/x?key=abcdefghij&alt=sse&token=t")
        == f"https://h/v1/x?key={REDACTED}&alt=sse&token={REDACTED}"
    )
    assert "abcdefghij" in r.secrets
    assert r.url("https://h/v1/x?alt=sse") == "https://h/v1/x?alt=sse"
    assert r.url("https://h/v1/x") == "https://h/v1/x"


def test_values_are_scrubbed_from_bodies_with_the_same_length_and_from_the_text():
    r = Redactor()
    r.headers([("x-api-key", KEY)])
    data = f"data: echo {KEY}\n\n".encode()
    masked = r.body_bytes(data)
    assert KEY.encode() not in masked and len(masked) == len(data)
    assert r.body_bytes(b"clean") == b"clean"
    text = f'{{"a": "{KEY}", "b": "x"}}'
    assert KEY not in r.text(text)
    r2 = Redactor()
    r2.headers([("x-api-key", 'quote"secret"value')])
    assert "secret" not in r2.text('{"a": "quote\\"secret\\"value"}')
