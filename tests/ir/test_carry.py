from __future__ import annotations

import pytest

from dragoman.ir import carry


def test_anthropic_roundtrip():
    v = carry.wrap_anthropic("sig", "thinking ✓", redacted_data="r")
    assert v.startswith(carry.ANTHROPIC_TAG) and carry.is_carried(v)
    assert carry.unwrap_anthropic(v) == {"text": "thinking ✓", "sig": "sig", "redacted": "r"}
    assert carry.unwrap_anthropic(carry.wrap_anthropic(None, "t")) == {"text": "t"}
    assert carry.unwrap_responses(v) is None  # only unwrapped for its own origin


def test_responses_roundtrip():
    v = carry.wrap_responses("rs_1", "gAAA==")
    assert carry.unwrap_responses(v) == {"id": "rs_1", "enc": "gAAA=="}
    assert carry.unwrap_anthropic(v) is None
    assert "=" not in v[len(carry.RESPONSES_TAG) :]  # padding stripped


@pytest.mark.parametrize(
    "value", [None, "", "EqQBCkgIAhABGAIiQH", carry.ANTHROPIC_TAG + "!!!notbase64", carry.ANTHROPIC_TAG + "WzFd"]
)
def test_native_or_broken_values_not_unwrapped(value):
    assert carry.unwrap_anthropic(value) is None  # WzFd is base64 of [1]: not an object


def test_is_carried_and_unsigned():
    assert not carry.is_carried(None) and not carry.is_carried("native-sig")
    assert carry.is_carried(carry.UNSIGNED) and carry.is_unsigned(carry.UNSIGNED)
    assert not carry.is_unsigned("sig")


def test_gemini_roundtrip():
    v = carry.wrap_gemini({"fc-1": "CiQB0e2K/+A==", "fc-2": "EjQK"})
    assert v.startswith(carry.GEMINI_TAG) and carry.is_carried(v) and carry.is_gemini(v)
    assert carry.unwrap_gemini(v) == {"fc-1": "CiQB0e2K/+A==", "fc-2": "EjQK"}
    assert carry.unwrap_anthropic(v) is None and carry.unwrap_openrouter(v) is None
    assert carry.unwrap_gemini(carry.wrap_openrouter({"e": [], "s": []})) is None
    # entries that are not non-empty strings are not signatures
    assert carry.unwrap_gemini(carry.wrap_gemini({"a": "", "b": 1, "c": "x"})) == {"c": "x"}  # type: ignore[dict-item]
    assert not carry.is_gemini("native-sig") and carry.unwrap_gemini(None) is None
