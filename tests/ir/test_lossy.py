"""``ir.lossy.LossReport``: the three verbs, the legacy ``add``, merging, and the JSON form kept in flows."""

from __future__ import annotations

from dragoman.ir.common import Dropped
from dragoman.ir.lossy import APPROXIMATED
from dragoman.ir.lossy import DROPPED
from dragoman.ir.lossy import GENERIC_REASON
from dragoman.ir.lossy import INVENTED
from dragoman.ir.lossy import Loss
from dragoman.ir.lossy import LossReport
from dragoman.ir.lossy import collapse
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
        "dropped: tools[].cache_control; approximated: message_start.usage.input_tokens; invented: reasoning_content"
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


def test_at_puts_entries_under_the_place_the_codec_is():
    r = LossReport()
    r.add("top_k")
    r.at("messages[2]")
    r.at("content[0]", depth=1)
    r.add("cache_control")
    r.at("content[3]", depth=1)  # the next item of the inner list
    r.add("citations")
    r.at("content[1]", depth=2)  # a list inside that item (a tool result's content)
    r.add("document(empty)")
    r.leave(1)
    r.add("thinking_without_signature")
    r.at("tools[3]")  # a new place at depth 0 leaves the deeper ones
    r.drop("cache_control", "Chat has no cache hints")
    r.leave()
    r.invent("reasoning_content", "placeholder")
    assert [(e.path, e.reason) for e in r.entries] == [
        ("top_k", "the target protocol has no top_k sampling"),
        ("messages[2].content[0].cache_control", "the target protocol has no cache hints"),
        ("messages[2].content[3].citations", "the target protocol has no citations"),
        ("messages[2].content[3].content[1].document(empty)", "the target cannot take this document"),
        ("messages[2].thinking_without_signature", "Anthropic takes back only thinking it signed"),
        ("tools[3].cache_control", "Chat has no cache hints"),
        ("reasoning_content", "placeholder"),
    ]
    assert r.place() == ""


def test_the_same_field_in_two_items_is_two_entries_one_log_name():
    r = LossReport()
    for i in (0, 1, 5):
        r.at(f"tools[{i}]")
        r.add("cache_control")
    r.leave()
    r.add("cache_control")  # a top-level one is its own path
    assert r.fields == ["tools[0].cache_control", "tools[1].cache_control", "tools[5].cache_control", "cache_control"]
    assert r.summary() == "dropped: tools[].cache_control, cache_control"


def test_a_name_takes_its_reason_from_its_shortest_known_tail():
    assert (
        known("content[1].input_audio", "input[0].content[1].input_audio")[1]
        == "the target protocol takes no audio input"
    )
    assert known("builtin", "tools[1].builtin")[1] == "server tools run only on their own provider"
    assert known("strict", "tools[1].strict")[1] == "a tool the target protocol cannot run"
    assert known("item_reference", "input[4].item_reference")[1] == "items the target protocol cannot carry"
    assert known("nothing-known", "x[1].nothing-known") == (DROPPED, GENERIC_REASON)
    assert collapse("messages[12].content[0].content[3].x") == "messages[].content[].content[].x"
