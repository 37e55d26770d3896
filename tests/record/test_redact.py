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
    assert Redactor().json(body)["metadata"] is body["metadata"]  # password is built in; user_id is not
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


def test_credential_fields_are_redacted_at_any_depth_by_default():
    r = Redactor()
    body = {
        "model": "m",
        "max_tokens": 10,
        "usage": {"input_tokens": 3, "cache_read_input_tokens": 1},
        "prompt_cache_key": "conv-0123456789",
        "api_key": "sk-body-SECRET-01234",
        "tools": [{"name": "login", "input_schema": {"properties": {"password": {"type": "string"}}}}],
        "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "input": {"clientSecret": "cs-SECRET-98765"}}]},
            {"logprobs": [{"token": "Hello", "logprob": -0.1}]},
        ],
        "nested": {"db_password": 12345678, "password": "", "access_token": None},
    }
    out = r.json(body)
    assert out["api_key"] == REDACTED
    assert out["messages"][0]["content"][0]["input"]["clientSecret"] == REDACTED
    assert out["nested"] == {"db_password": REDACTED, "password": "", "access_token": None}
    for k in ("model", "max_tokens", "usage", "prompt_cache_key", "tools"):
        assert out[k] == body[k]
    assert out["messages"][1] == body["messages"][1]
    assert {"sk-body-SECRET-01234", "cs-SECRET-98765"} <= r.secrets
    assert r.json(out) == out  # idempotent (a recorded body matches a live one on replay)
    clean = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert r.json(clean) is clean


def test_more_credential_headers_and_query_parameters():
    r = Redactor()
    hdrs = [("X-Auth-Token", "tok-SECRET-1234"), ("x-amz-security-token", "amz-SECRET-1"), ("x-request-id", "r")]
    assert r.headers(hdrs) == [("X-Auth-Token", REDACTED), ("x-amz-security-token", REDACTED), ("x-request-id", "r")]
    url = "https://h/v1/x?token=tq-SECRET-123&sig=abc&api-version=2024&alt=sse&clientSecret=cs-SECRET-456"
    out = r.url(url)
    assert "SECRET" not in out and "sig=abc" not in out
    assert "api-version=2024" in out and "alt=sse" in out
    assert {"tq-SECRET-123", "cs-SECRET-456"} <= r.secrets


def test_stream_mask_equals_body_bytes_over_every_split():
    r = Redactor()
    r.headers([("x-api-key", KEY), ("cookie", "sid=cookievalue123")])
    data = f"data: {KEY} and cookievalue123 and {KEY[:5]} end {KEY}".encode()
    want = r.body_bytes(data)
    assert KEY.encode() not in want
    for cut in range(len(data) + 1):
        for cut2 in (cut, min(len(data), cut + 3)):
            m = r.mask()
            out = m.feed(data[:cut]) + m.feed(data[cut:cut2]) + m.feed(data[cut2:]) + m.flush()
            assert out == want, (cut, cut2)
    assert Redactor().mask().feed(b"abc") == b"abc"


def test_a_hostile_deep_body_does_not_recurse_without_bound():
    deep: object = {"api_key": "sk-deep-SECRET-0123"}
    for _ in range(5000):
        deep = {"a": [deep]}
    r = Redactor()
    assert r.json(deep) is deep  # not walked that deep: no RecursionError
    shallow = {"a": {"api_key": "sk-shallow-SECRET-01"}}
    assert r.json(shallow) == {"a": {"api_key": REDACTED}}


def test_keys_dragoman_holds_are_masked_in_bodies_whole_and_streamed():
    """Issue 29, 2: a configured key that no redacted place showed (a relayed request leaves without it) is
    masked in a whole upstream error body exactly as in a streamed one: one code path."""
    key = "sk-configured-upstream-KEY-123"
    red = Redactor()
    red.add_secrets([key, "short"])  # too short to mask
    body = f'{{"error": {{"message": "Incorrect API key provided: Bearer {key}"}}}}'.encode()
    whole = red.body_bytes(body)
    assert key.encode() not in whole and len(whole) == len(body) and b"short" not in red.body_bytes(b"x")
    for cut in range(len(body)):
        mask = red.mask()
        assert mask.feed(body[:cut]) + mask.feed(body[cut:]) + mask.flush() == whole
    assert key not in red.text(repr({"b": body.decode()}))
