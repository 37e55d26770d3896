"""Checks the stream decoders share: tool-call arguments must be a JSON object unless the output was cut
short, token counts must fit 64 bits, fallback error messages must be writable."""

from __future__ import annotations

import pytest

from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import StopReason
from dragoman.protocols._checks import COMPACT_AT
from dragoman.protocols._checks import MAX_TOKEN_COUNT
from dragoman.protocols._checks import ToolArgs
from dragoman.protocols._checks import args_problem
from dragoman.protocols._checks import safe_message
from dragoman.protocols._checks import token_count


@pytest.mark.parametrize("text", ["", "  \n", "{}", '{"a": [1, {"b": null}]}'])
def test_usable_arguments(text):
    assert args_problem(text) is None


@pytest.mark.parametrize(
    "text, problem",
    [('{"a": 1', "not valid JSON"), ("[1, 2]", "a JSON list, not an object"), ('"s"', "a JSON str, not an object")],
)
def test_unusable_arguments(text, problem):
    assert problem in (args_problem(text) or "")


def test_fragments_of_parallel_calls_are_joined_per_call():
    t = ToolArgs()
    t.start(0, "read")
    t.start(1, "write")
    t.add(0, '{"path":')
    t.add(1, '{"text":')
    t.add(0, ' "a"}')
    t.add(1, ' "b"}')
    t.stop(0)
    t.stop(1)
    t.check(StopReason.TOOL_USE)  # both calls are objects: nothing raised


def test_a_bad_call_fails_the_message_naming_the_tool():
    t = ToolArgs()
    t.start(3, "edit")
    t.add(3, '{"a": ')
    t.stop(3)
    with pytest.raises(UpstreamProtocolError, match=r"'edit': not valid JSON") as e:
        t.check(StopReason.TOOL_USE)
    assert "stop reason tool_use" in str(e.value)
    t.check(StopReason.TOOL_USE)  # reported once, then forgotten


def test_truncated_arguments_are_legitimate_under_max_tokens():
    t = ToolArgs()
    t.start(0, "edit")
    t.add(0, '{"a": ')
    t.check(StopReason.MAX_TOKENS)  # the open call is closed by check; no error


def test_calls_still_open_at_the_end_are_checked():
    t = ToolArgs()
    t.start(0, None)
    t.add(0, "[]")
    with pytest.raises(UpstreamProtocolError, match=r"'\?': a JSON list"):
        t.check(None)


def test_fragments_of_unknown_or_closed_calls_are_ignored():
    t = ToolArgs()
    t.add(9, "garbage")  # never started (e.g. a custom tool: free-form input, not JSON)
    t.stop(9)
    t.start(0, "f")
    t.stop(0)
    t.add(0, "garbage")  # after its stop
    t.check(StopReason.END_TURN)


def test_compaction_keeps_every_character():
    t = ToolArgs()
    frags = t.start(0, "f")
    text = '{"k": "' + "x" * (COMPACT_AT * 3) + '"}'
    for ch in text:
        t.add(0, ch)
    assert len(frags) < COMPACT_AT
    assert "".join(frags) == text
    t.check(StopReason.TOOL_USE)


@pytest.mark.parametrize("value", [None, 0, 17, MAX_TOKEN_COUNT])
def test_token_counts_in_range(value):
    assert token_count(value, "output_tokens") == value


@pytest.mark.parametrize("value, shown", [(-1, "-1"), (MAX_TOKEN_COUNT + 1, "above 2**63")])
def test_token_counts_out_of_range(value, shown):
    with pytest.raises(UpstreamProtocolError) as e:
        token_count(value, "input_tokens")
    assert str(e.value) == f"upstream usage.input_tokens is out of range: {shown}"


@pytest.mark.parametrize(
    "value, expected",
    [(None, "upstream error"), ("", "upstream error"), (42, "upstream error"), ("boom", "boom"), ("\ud800x", "?x")],
)
def test_safe_message(value, expected):
    assert safe_message(value) == expected


def test_safe_message_is_bounded():
    assert len(safe_message("m" * 5000)) == 2000
