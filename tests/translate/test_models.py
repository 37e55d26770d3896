"""Model lists in the Anthropic and OpenAI shapes, converted both ways, and the model map's names."""

from __future__ import annotations

from dragoman.protocols import Protocol
from dragoman.translate import models as m
from dragoman.translate.plan import parse_model_map

A = Protocol.ANTHROPIC_MESSAGES


def test_parse_both_shapes():
    anth = {"data": [{"type": "model", "id": "c1", "display_name": "C 1", "created_at": "2025-01-02T03:04:05Z"}]}
    assert m.parse_model_list(anth) == [m.ModelInfo("c1", "C 1", 1735787045)]
    oai = {"object": "list", "data": [{"id": "g1", "object": "model", "created": 1700000000}, {"id": ""}, "x"]}
    assert m.parse_model_list(oai) == [m.ModelInfo("g1", None, 1700000000)]


def test_not_a_list():
    for body in (None, "ok", [], {"data": "x"}, {"models": []}):
        assert m.parse_model_list(body) is None


def test_round_trip_anthropic_openai():
    infos = [m.ModelInfo("c1", "C 1", 1735787045), m.ModelInfo("c2")]
    anth = m.model_list(infos, A)
    assert anth == {
        "data": [
            {"type": "model", "id": "c1", "display_name": "C 1", "created_at": "2025-01-02T03:04:05Z"},
            {"type": "model", "id": "c2", "display_name": "c2", "created_at": "1970-01-01T00:00:00Z"},
        ],
        "has_more": False,
        "first_id": "c1",
        "last_id": "c2",
    }
    oai = m.model_list(m.parse_model_list(anth), Protocol.OPENAI_RESPONSES)
    assert oai["object"] == "list"
    assert oai["data"][0] == {"id": "c1", "object": "model", "created": 1735787045, "owned_by": "dragoman"}
    assert m.parse_model_list(oai)[0].created == 1735787045


def test_empty_list():
    assert m.model_list([], A) == {"data": [], "has_more": False, "first_id": None, "last_id": None}


def test_model_map_names_and_merge():
    rules = parse_model_map(["claude-*=deepseek-chat", "claude-opus-4-8=qwen3", "gpt-?=deepseek-chat", "fallback"])
    names = [x.id for x in m.model_map_models(rules)]
    assert names == ["deepseek-chat", "claude-opus-4-8", "qwen3", "fallback"]
    merged = m.merge([m.ModelInfo("qwen3", "Qwen")], m.model_map_models(rules))
    assert [x.id for x in merged] == ["qwen3", "deepseek-chat", "claude-opus-4-8", "fallback"]
    assert merged[0].display_name == "Qwen"


# -- the cache of upstream lists (issue 30, item 3) ------------------------------------------------------


def test_merge_keeps_each_id_once_first_wins():
    up = [m.ModelInfo("a", "A", 1), m.ModelInfo("b"), m.ModelInfo("a", "A again", 2)]
    assert m.merge(up, [m.ModelInfo("b"), m.ModelInfo("c")]) == [
        m.ModelInfo("a", "A", 1),
        m.ModelInfo("b"),
        m.ModelInfo("c"),
    ]


def test_cache_expires_with_the_injected_clock():
    now = [0.0]
    cache = m.ModelListCache(ttl=300, clock=lambda: now[0])
    listed = [m.ModelInfo("a")]
    assert cache.get("k") is None
    cache.put("k", listed)
    listed.append(m.ModelInfo("mutated"))  # the cache keeps its own copy
    now[0] = 299.999
    assert cache.get("k") == [m.ModelInfo("a")]
    now[0] = 300.0
    assert cache.get("k") is None
    assert len(cache) == 0  # the expired entry is gone, not just hidden


def test_cache_off_and_bounded():
    cache = m.ModelListCache(ttl=0)
    cache.put("k", [m.ModelInfo("a")])
    assert cache.get("k") is None and len(cache) == 0
    small = m.ModelListCache(ttl=10, clock=lambda: 0.0, max_entries=2)
    for key in ("k1", "k2", "k3"):
        small.put(key, [m.ModelInfo(key)])
    assert small.get("k1") is None and small.get("k2") == [m.ModelInfo("k2")] and len(small) == 2
