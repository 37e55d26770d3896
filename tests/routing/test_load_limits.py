"""The routes file's per-model limits (``models:``) and an Anthropic upstream's ``cache`` mode (issue 36)."""

from __future__ import annotations

import pytest

from dragoman.ir.limits import ModelLimits
from dragoman.routing.load import ConfigError
from dragoman.routing.load import load_config
from dragoman.routing.spec import anthropic_cache

BASE = """\
upstreams:
  - name: local
    protocol: openai-chat
    base_url: http://127.0.0.1:8000/v1
  - name: claude
    protocol: anthropic
    base_url: https://api.anthropic.com
  - name: proxy
    protocol: anthropic
    base_url: https://anthropic-compatible.example/v1
routes:
  - match: "*"
    to: local/qwen3-32b
"""


def load(extra: str):
    return load_config(BASE + extra, "routes.yaml", {})


def test_models_declare_limits_first_match_wins_and_may_name_an_upstream():
    cfg = load(
        "models:\n"
        "  - match: qwen3-*\n    upstream: local\n    context_window: 32768\n    max_output_tokens: 8192\n"
        "  - match: qwen3-*\n    context_window: 131072\n"
        "  - match: claude-*\n    max_output_tokens: 64000\n"
    )
    assert cfg.model_limits("local", "qwen3-32b") == ModelLimits(32768, 8192)
    assert cfg.model_limits("other", "qwen3-32b") == ModelLimits(131072, None)
    assert cfg.model_limits("claude", "claude-sonnet-4-5") == ModelLimits(None, 64000)
    assert cfg.model_limits("local", "llama") is None


@pytest.mark.parametrize(
    "extra,message",
    [
        ("models:\n  - match: x\n", "give context_window, max_output_tokens or both"),
        ("models:\n  - match: x\n    context_window: 0\n", "models[0] (match 'x').context_window: must be a number"),
        ("models:\n  - match: x\n    max_output_tokens: big\n", "max_output_tokens: must be a number of tokens"),
        ("models:\n  - match: x\n    context_window: true\n", "context_window: must be a number"),
        ("models:\n  - match: x\n    window: 5\n", "unknown field 'window'"),
        ("models:\n  - match: x\n    upstream: nope\n    context_window: 5\n", "unknown upstream 'nope'"),
        ("models:\n  - context_window: 5\n", "'match' must be a non-empty string"),
        ("models: {}\n", "models: must be a list"),
    ],
)
def test_bad_model_entries_are_refused_with_file_line_and_entry(extra, message):
    with pytest.raises(ConfigError) as e:
        load(extra)
    assert message in str(e.value)
    assert str(e.value).startswith("routes.yaml line")


def test_cache_mode_per_anthropic_upstream_with_a_default_per_host():
    cfg = load("")
    assert anthropic_cache(cfg.upstreams["claude"], "x") == "auto"  # Anthropic's API: request-level caching
    assert anthropic_cache(cfg.upstreams["proxy"], "x") == "breakpoints"  # others may lack the top-level form
    text = BASE.replace(
        "base_url: https://api.anthropic.com\n", "base_url: https://api.anthropic.com\n    cache: off\n"
    )
    assert anthropic_cache(load_config(text, "r", {}).upstreams["claude"], "x") == "off"


@pytest.mark.parametrize(
    "line,proto,message",
    [
        ("    cache: always\n", "anthropic", "unknown cache mode 'always' (allowed: auto, breakpoints, off)"),
        ("    cache: auto\n", "openai-chat", "'cache' applies to anthropic upstreams, not openai-chat"),
    ],
)
def test_a_bad_cache_mode_is_refused(line, proto, message):
    text = f"upstreams:\n  - name: x\n    protocol: {proto}\n    base_url: http://h\n{line}routes:\n  - match: '*'\n    to: x\n"
    with pytest.raises(ConfigError) as e:
        load_config(text, "routes.yaml", {})
    assert message in str(e.value)


def test_v1_models_lists_the_declared_window_in_each_shape():
    from dragoman.protocols import Protocol
    from dragoman.routing.router import Router
    from dragoman.translate.models import ModelInfo
    from dragoman.translate.models import model_list

    cfg = load_config(
        BASE.replace(
            '  - match: "*"\n    to: local/qwen3-32b\n',
            '  - match: "small"\n    to: local/qwen3-32b\n  - match: "*"\n    to: claude\n',
        )
        + "models:\n  - match: qwen3-*\n    context_window: 32768\n    max_output_tokens: 8192\n",
        "routes.yaml",
        {},
    )
    router = Router(cfg)
    assert router.limits_for("small") == ModelLimits(32768, 8192)
    assert router.limits_for("claude-x") is None
    names = [ModelInfo(m, limits=router.limits_for(m)) for m in router.listed_models()]
    anth = model_list(names, Protocol.ANTHROPIC_MESSAGES)["data"]
    small = next(m for m in anth if m["id"] == "small")
    assert (small["max_input_tokens"], small["max_tokens"]) == (32768, 8192)
    oai = model_list(names, Protocol.OPENAI_CHAT)["data"]
    small = next(m for m in oai if m["id"] == "small")
    assert (small["context_length"], small["max_completion_tokens"]) == (32768, 8192)
