"""The house rules of issue 30: no import circle under addon/dragoman, no folder beyond ~15 modules."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import import_graph  # noqa: E402


def test_no_import_circle():
    assert import_graph.circles(import_graph.graph(import_graph.modules())) == []


def test_the_checker_finds_a_circle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_graph.circles(edges) == [["a", "b", "c"]]


def test_no_folder_beyond_the_limit():
    sizes = import_graph.folder_sizes(import_graph.modules())
    assert sizes, "no modules found"
    assert {d: n for d, n in sizes.items() if n > import_graph.MAX_MODULES} == {}
