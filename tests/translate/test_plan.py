from __future__ import annotations

import pytest

from dragoman.protocols import Protocol
from dragoman.translate.plan import ModelRule
from dragoman.translate.plan import Plan
from dragoman.translate.plan import map_model
from dragoman.translate.plan import parse_model_map


def test_parse():
    assert parse_model_map([" claude-*=gpt-5 ", "gpt-4o"]) == [
        ModelRule("claude-*", "gpt-5"),
        ModelRule(None, "gpt-4o"),
    ]
    assert parse_model_map([]) == []


@pytest.mark.parametrize("bad", ["", "  ", "=gpt", "claude-*=", " = "])
def test_parse_rejects(bad):
    with pytest.raises(ValueError):
        parse_model_map([bad])


def test_error_names_entry():
    with pytest.raises(ValueError, match="'x='"):
        parse_model_map(["x="])


def test_map_first_match_wins_glob_case_sensitive():
    rules = parse_model_map(["claude-3-*=old", "claude-*=new", "gpt-?=four"])
    assert map_model(rules, "claude-3-opus") == "old"
    assert map_model(rules, "claude-sonnet-4") == "new"
    assert map_model(rules, "gpt-4") == "four"
    assert map_model(rules, "gpt-40") == "gpt-40"  # ? is one character
    assert map_model(rules, "Claude-x") == "Claude-x"  # case-sensitive
    assert map_model([], "m") == "m"


def test_bare_model_maps_everything():
    assert map_model(parse_model_map(["a=b", "fallback"]), "zzz") == "fallback"
    assert map_model(parse_model_map(["a=b", "fallback"]), "a") == "b"


def test_model_with_equals_in_value():
    assert parse_model_map(["x=org/model=v2"]) == [ModelRule("x", "org/model=v2")]


def test_plan_identity():
    assert Plan(Protocol.OPENAI_CHAT, Protocol.OPENAI_CHAT).identity
    assert not Plan(Protocol.OPENAI_CHAT, Protocol.ANTHROPIC_MESSAGES).identity
