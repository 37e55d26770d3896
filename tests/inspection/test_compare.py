"""``inspect.compare``: the two sides of an answer row by row, in columns or stacked, differences marked."""

from __future__ import annotations

from dragoman.inspect.assemble import Assembled
from dragoman.inspect.assemble import Call
from dragoman.inspect.compare import MARK
from dragoman.inspect.compare import columns
from dragoman.inspect.compare import differences
from dragoman.inspect.compare import rows
from dragoman.inspect.compare import stacked
from dragoman.inspect.compare import two_sides
from dragoman.ir.common import Usage


def side(protocol: str, **kw) -> dict:
    a = Assembled(protocol, **kw)
    for c in a.calls:
        c.parsed = {"q": c.arguments}
    return a.as_dict()


UP = side("openai-chat", text="same", calls=[Call("c1", "f", "x")], stop="tool_use", usage=Usage(3, 4))
CL = side("anthropic", text="same", calls=[Call("c1", "f", "x")], stop="tool_use", usage=Usage(3, 4, 0, 0))


def test_equal_sides_have_no_difference_and_zero_equals_absent():
    assert differences(UP, CL) == []
    assert ("usage", "in 3, out 4", "in 3, out 4") in rows(UP, CL)
    assert not any(line.startswith(MARK) for line in columns(UP, CL) + stacked(UP, CL))


def test_every_kind_of_row_that_differs_is_marked():
    cl = side(
        "anthropic",
        text="other",
        thinking="hm",
        calls=[Call("c9", "g", "y"), Call("c2", "h", "")],
        stop="end_turn",
        usage=Usage(3, 5, cache_read_tokens=2),
        error="boom",
    )
    assert differences(UP, cl) == [
        "thinking",
        "text",
        "tool call 1",
        "call 1 id",
        "tool call 2",
        "call 2 id",
        "error",
        "stop",
        "usage",
    ]
    usage = dict((label, (u, c)) for label, u, c in rows(UP, cl))["usage"]
    assert usage == ("in 3, out 4, cache read 0", "in 3, out 5, cache read 2")
    lines = columns(UP, cl, 100)
    marked = [line for line in lines if line.startswith(MARK)]
    assert len(marked) == 9 and all(len(line) <= 100 for line in lines)
    assert "     upstream sent (openai-chat): (nothing)" in stacked(UP, cl)  # a value only one side has
    thinking = next(line for line in lines if line[3:].startswith("thinking"))
    assert [v.strip() for v in thinking[15:].split(" | ")] == ["(nothing)", "hm"]


def test_long_values_wrap_inside_their_column_and_are_cut_past_the_limit():
    up = side("gemini", text="word " * 400)
    cl = side("openai-responses", text="word " * 400)
    lines = columns(up, cl, 120)
    body = [line for line in lines[1:] if " | " in line]
    assert len(body) > 5 and all(len(line) <= 120 for line in lines)
    assert all(line.index(" | ") == body[0].index(" | ") for line in body)  # the columns line up
    assert "(1999 chars)" in "\n".join(lines)


def test_the_layout_follows_the_width():
    assert two_sides(UP, CL, 100) == columns(UP, CL, 100)
    assert two_sides(UP, CL, 99) == stacked(UP, CL, 99)
    assert all(len(line) <= 80 for line in stacked(UP, CL, 80))


def test_a_truncated_side_says_so():
    cut = {**CL, "truncated": True}
    assert ("kept", "whole", "truncated at the keep limit") in rows(UP, cut)
