from __future__ import annotations

import pytest

from dragoman.ir import mapping
from dragoman.ir.common import StopReason


@pytest.mark.parametrize("reason", [r for r in StopReason if r is not StopReason.ERROR])
def test_anthropic_identity(reason):
    assert mapping.anthropic_stop(mapping.IR_TO_ANTHROPIC[reason]) is reason


def test_anthropic_unknown_and_none():
    assert mapping.anthropic_stop(None) is None
    assert mapping.anthropic_stop("something_new") is StopReason.END_TURN
    assert mapping.IR_TO_ANTHROPIC[StopReason.ERROR] == "end_turn"


@pytest.mark.parametrize(
    "finish,reason",
    [
        ("stop", StopReason.END_TURN),
        ("length", StopReason.MAX_TOKENS),
        ("tool_calls", StopReason.TOOL_USE),
        ("function_call", StopReason.TOOL_USE),
        ("content_filter", StopReason.REFUSAL),
    ],
)
def test_chat(finish, reason):
    assert mapping.chat_stop(finish) is reason
    if finish != "function_call":
        assert mapping.IR_TO_CHAT[reason] == finish


def test_chat_unknown_and_none():
    assert mapping.chat_stop(None) is None
    assert mapping.chat_stop("eos") is StopReason.END_TURN


def test_tables_total():
    for table in (mapping.IR_TO_ANTHROPIC, mapping.IR_TO_CHAT, mapping.IR_TO_RESPONSES_STATUS):
        assert set(table) == set(StopReason)
    assert set(mapping.IR_TO_CHAT.values()) <= {"stop", "length", "tool_calls", "content_filter"}


@pytest.mark.parametrize("reason", [StopReason.MAX_TOKENS, StopReason.REFUSAL])
def test_responses_incomplete_roundtrip(reason):
    status, detail = mapping.IR_TO_RESPONSES_STATUS[reason]
    assert status == "incomplete"
    assert mapping.RESPONSES_INCOMPLETE_TO_IR[detail] is reason
    assert mapping.IR_TO_RESPONSES_STATUS[StopReason.TOOL_USE] == ("completed", None)
    assert mapping.IR_TO_RESPONSES_STATUS[StopReason.ERROR] == ("failed", None)


@pytest.mark.parametrize(
    "stop,refused,expected",
    [
        (StopReason.END_TURN, True, StopReason.REFUSAL),  # Chat refusal + "stop", a Responses refusal part
        (None, True, StopReason.REFUSAL),
        (StopReason.REFUSAL, True, StopReason.REFUSAL),
        (StopReason.MAX_TOKENS, True, StopReason.MAX_TOKENS),  # cut short: that is the stop reason
        (StopReason.TOOL_USE, True, StopReason.TOOL_USE),
        (StopReason.END_TURN, False, StopReason.END_TURN),
        (None, False, None),
        (StopReason.REFUSAL, False, StopReason.REFUSAL),  # content_filter without refusal text
    ],
)
def test_refused_stop(stop, refused, expected):
    assert mapping.refused_stop(stop, refused) is expected


def test_chat_stop_after_tool_calls_is_a_tool_use_stop():
    chat_stop = mapping.chat_stop
    assert chat_stop("stop") is StopReason.END_TURN
    assert chat_stop("stop", tool_calls=True) is StopReason.TOOL_USE
    assert chat_stop("length", tool_calls=True) is StopReason.MAX_TOKENS
    assert chat_stop("content_filter", tool_calls=True) is chat_stop("content_filter")
    assert chat_stop(None, tool_calls=True) is None
