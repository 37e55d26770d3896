"""IR stream events: values (equal, hashable, printable, replaceable) however they are built."""

from __future__ import annotations

import dataclasses

import pytest

from dragoman.ir.events import KEEPALIVE
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import Keepalive
from dragoman.ir.events import MessageStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta


def test_compared_and_hashed_by_value_and_type():
    assert TextDelta(1, "x") == TextDelta(index=1, text="x")
    assert TextDelta(1, "x") != TextDelta(1, "y")
    # same fields, another event: never equal (these are not tuples)
    assert TextDelta(1, "x") != ToolArgsDelta(1, "x")
    assert TextDelta(1, "x") != (1, "x")
    assert len({TextDelta(1, "x"), TextDelta(1, "x"), ToolArgsDelta(1, "x"), BlockStop(1), BlockStop(1)}) == 3
    assert hash(ThinkingDelta(0, "t", True)) == hash(ThinkingDelta(0, "t", summary=True))
    assert {KEEPALIVE, Keepalive(), MessageStop()} == {KEEPALIVE, MessageStop()}


def test_defaults_repr_replace_and_slots():
    ev = BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="c", name="f")
    assert (ev.item_id, ev.data) == (None, None)
    assert repr(TextDelta(1, "x")) == "TextDelta(index=1, text='x')"
    assert dataclasses.replace(SignatureDelta(0, signature="s"), encrypted_content="e") == SignatureDelta(0, "s", "e")
    assert ThinkingDelta(0, "t").summary is False
    with pytest.raises(AttributeError):
        TextDelta(1, "x").other = 1  # type: ignore[attr-defined]
    assert not hasattr(TextDelta(1, "x"), "__dict__")
