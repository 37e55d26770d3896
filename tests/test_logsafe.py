"""``logsafe``: no control or line-breaking character survives into a log line; printable text is unchanged."""

from __future__ import annotations

import pytest

from dragoman.logsafe import logsafe


@pytest.mark.parametrize("ch", ["\n", "\r", "\x00", "\x1b", "\t", "\x7f", "\x85", "\u2028", "\u2029", "\u202e", "\x0b"])
def test_control_and_line_breaking_characters_are_escaped(ch):
    out = logsafe(f"model{ch}[forged] x")
    assert ch not in out and len(out.splitlines()) == 1
    assert out.startswith("model\\") and out.endswith("[forged] x")


def test_printable_text_is_unchanged_and_long_text_cut():
    for text in ("claude-sonnet-4-5", "模型 é ✓", "a\\nb", 'it\'s "quoted"'):
        assert logsafe(text) == text
    assert logsafe("x" * 1000) == "x" * 300 + "..."
    assert logsafe("x" * 10, limit=4) == "xxxx..."
    assert logsafe(ValueError("bad\nline")) == "bad\\nline"
