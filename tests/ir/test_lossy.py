"""``ir.lossy.LossReport``: the three verbs, the legacy ``add``, merging, and the JSON form kept in flows."""

from __future__ import annotations

from dragoman.ir.common import Dropped
from dragoman.ir.lossy import APPROXIMATED
from dragoman.ir.lossy import DROPPED
from dragoman.ir.lossy import GENERIC_REASON
from dragoman.ir.lossy import INVENTED
from dragoman.ir.lossy import Loss
from dragoman.ir.lossy import LossReport
from dragoman.ir.lossy import known


def test_verbs_record_kind_and_reason_once_per_path():
    r = LossReport()
    r.drop("tools[3].cache_control", "Chat has no cache hints")
    r.approximate("message_start.usage.input_tokens", "estimated")
    r.invent("reasoning_content", "empty placeholder")
    r.drop("tools[3].cache_control", "said twice")
    assert r.entries == [
        Loss("tools[3].cache_control", DROPPED, "Chat has no cache hints"),
        Loss("message_start.usage.input_tokens", APPROXIMATED, "estimated"),
        Loss("reasoning_content", INVENTED, "empty placeholder"),
    ]
    assert r.count == 3 and r.fields == [e.path for e in r.entries]
    assert r.summary() == (
        "dropped: tools[3].cache_control; approximated: message_start.usage.input_tokens; invented: reasoning_content"
    )
    assert r.entries[0].line() == "tools[3].cache_control: dropped, Chat has no cache hints"


def test_legacy_add_takes_kind_and_reason_from_the_table():
    d = Dropped()  # the first name still works
    d.add("top_k")
    d.add("output_config.task_budget")  # by its head
    d.add("document(empty)")  # by its head before "("
    d.add("web_fetch_tool_result")  # a server tool result
    d.add("unanswered_tool_use")
    d.add("never-heard-of-it")
    kinds = {e.path: (e.kind, e.reason) for e in d.entries}
    assert kinds["top_k"] == known("top_k") == (DROPPED, "the target protocol has no top_k sampling")
    assert kinds["output_config.task_budget"][1] == "Anthropic-only output settings"
    assert kinds["document(empty)"][1] == "the target cannot take this document"
    assert "server tools" in kinds["web_fetch_tool_result"][1]
    assert kinds["unanswered_tool_use"][0] == INVENTED
    assert kinds["never-heard-of-it"] == (DROPPED, GENERIC_REASON)


def test_drop_without_a_reason_uses_the_table():
    r = LossReport()
    r.drop("cache_control")
    assert r.entries[0].reason == "the target protocol has no cache hints"


def test_merge_keeps_order_and_first_entry():
    a, b = LossReport(), LossReport()
    a.drop("x", "a's")
    b.drop("x", "b's")
    b.invent("y", "b's")
    a.merge(b)
    assert [(e.path, e.reason) for e in a.entries] == [("x", "a's"), ("y", "b's")]


def test_json_round_trip_and_older_name_lists():
    r = LossReport()
    r.drop("top_k")
    r.invent("reasoning_content", "placeholder")
    assert LossReport.from_list(r.as_list()) == r
    old = LossReport.from_list(["top_k", "cache_control"])  # a flow or recording from before the report
    assert (
        old.fields == ["top_k", "cache_control"] and old.entries[1].reason == "the target protocol has no cache hints"
    )
    junk = LossReport.from_list([{"path": "p", "kind": "weird"}, 3, {"kind": "dropped"}, None])
    assert junk.entries == [Loss("p", DROPPED, "")]
    assert LossReport.from_list(None).entries == []
