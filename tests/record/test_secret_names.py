"""The one credential list: which names are credentials in a body, a header, a query string."""

from __future__ import annotations

import pytest

from dragoman.record.secret_names import is_credential
from dragoman.record.secret_names import is_secret_header
from dragoman.record.secret_names import is_secret_query
from dragoman.record.secret_names import normal


def test_normal_form():
    assert normal("X-Api-Key") == "x_api_key"
    assert normal("clientSecret") == "client_secret"
    assert normal("OPENAI_API_KEY") == "openai_api_key"
    assert normal("a.b token") == "a_b_token"


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "apiKey",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "OPENAI_API_KEY",
        "access_token",
        "accessToken",
        "refresh_token",
        "client_secret",
        "secret",
        "password",
        "db_password",
        "aws_secret_access_key",
        "x-amz-security-token",
        "private_key",
        "credentials",
        "github_access_token",
    ],
)
def test_credentials(name):
    assert is_credential(name)
    assert is_secret_header(name)
    assert is_secret_query(name)


@pytest.mark.parametrize(
    "name",
    [
        "max_tokens",
        "max_output_tokens",
        "input_tokens",
        "cache_read_input_tokens",
        "cacheReadInputTokens",
        "prompt_cache_key",
        "idempotency_key",
        "budget_tokens",
        "token",
        "key",
        "signature",
        "encrypted_content",
        "token_budget",
        "apiKeySource",
        "keywords",
        "author",
        "sec-websocket-key",
        "anthropic-ratelimit-tokens-remaining",
    ],
)
def test_ordinary_llm_names_are_not_credentials(name):
    assert not is_credential(name)
    assert not is_secret_header(name)


def test_header_only_and_query_only_names():
    for h in ("Authorization", "proxy-authorization", "Cookie", "Set-Cookie"):
        assert is_secret_header(h) and not is_credential(h)
    for q in ("key", "token", "sig", "signature", "auth"):
        assert is_secret_query(q) and not is_credential(q) and not is_secret_header(q)
    assert not is_secret_query("alt") and not is_secret_query("api-version")
