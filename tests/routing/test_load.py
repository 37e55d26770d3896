"""The routes file: every error names the file, the line, the entry and what is allowed; keys never appear."""

from __future__ import annotations

import pytest

from dragoman.protocols import Protocol
from dragoman.routing.load import ConfigError
from dragoman.routing.load import config_from_options
from dragoman.routing.load import load_config
from dragoman.routing.spec import Target

ENV = {"KEY_A": "sk-a-secret", "KEY_B": "sk-b-secret"}

GOOD = """\
upstreams:
  - name: deepseek
    protocol: openai-chat
    base_url: https://api.deepseek.com/v1
    keys: [env:KEY_A, env:KEY_B]
  - name: claude
    protocol: anthropic
    base_url: https://api.anthropic.com
  - name: openrouter
    protocol: openai-chat
    base_url: https://openrouter.ai/api/v1
    keys: [literal-key]
routes:
  - match: "claude-haiku-*"
    to: [deepseek/deepseek-chat]
  - match: "claude-*"
    to: [claude, openrouter/anthropic/claude-sonnet-4.5]
  - match: "*"
    to: deepseek/deepseek-chat
clients:
  - name: alice
    key: env:KEY_A
    models: ["claude-*"]
limits:
  max_attempts: 3
  deadline: 30
"""


def load(text: str, env: dict[str, str] | None = None):
    return load_config(text, "routes.yaml", ENV if env is None else env)


def test_the_issue_schema_loads():
    cfg = load(GOOD)
    assert list(cfg.upstreams) == ["deepseek", "claude", "openrouter"]
    ds = cfg.upstreams["deepseek"]
    assert ds.protocol is Protocol.OPENAI_CHAT and ds.url.host == "api.deepseek.com" and ds.url.path == "/v1"
    assert [k.value for k in ds.keys] == ["sk-a-secret", "sk-b-secret"]
    assert [k.label for k in ds.keys] == ["env:KEY_A", "env:KEY_B"]
    assert cfg.upstreams["claude"].keys == ()  # absent: the client's own key moves across
    assert cfg.upstreams["openrouter"].keys[0].label == "key #1"  # a literal is named by position only
    assert cfg.routes[1].to == (Target("claude"), Target("openrouter", "anthropic/claude-sonnet-4.5"))
    assert cfg.routes[2].to == (Target("deepseek", "deepseek-chat"),)  # a single string is a one-entry list
    assert cfg.clients[0].name == "alice" and cfg.clients[0].models == ("claude-*",)
    assert cfg.limits.max_attempts == 3 and cfg.limits.deadline == 30.0
    assert cfg.holds_keys


def test_key_values_never_show_in_repr():
    cfg = load(GOOD)
    assert "sk-a-secret" not in repr(cfg)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("upstreams: [\n", "routes.yaml line 2, column 1: not valid YAML"),
        ("- a\n- b\n", "routes.yaml: expected a mapping with 'upstreams' and 'routes' at the top"),
        ("upstreams: []\nroutes: []\n", "routes.yaml line 1: upstreams: must be a non-empty list"),
        ("routes: []\n", "routes.yaml line 1: upstreams: missing: give a list of upstreams"),
        (
            "upstream: []\n",
            "routes.yaml line 1: top level: unknown field 'upstream' (allowed: upstreams, routes, clients, limits, models)",
        ),
    ],
)
def test_document_errors(text, message):
    with pytest.raises(ConfigError) as e:
        load(text)
    assert str(e.value).startswith(message), str(e.value)


def replace(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            replace("protocol: anthropic", "protocol: vertex"),
            "routes.yaml line 7: upstreams[1] (claude): unknown protocol 'vertex' (allowed: anthropic, openai-chat, openai-responses, gemini)",
        ),
        (
            replace("base_url: https://api.anthropic.com", "base_url: ftp://x"),
            "routes.yaml line 8: upstreams[1] (claude): bad base_url 'ftp://x': scheme must be http or https, got 'ftp'",
        ),
        (
            replace("env:KEY_B", "env:MISSING_VAR"),
            "routes.yaml line 5: upstreams[0] (deepseek).keys[1]: environment variable MISSING_VAR is not set or empty",
        ),
        (
            replace("to: [deepseek/deepseek-chat]", "to: [deepsek/deepseek-chat]"),
            "routes.yaml line 15: routes[0] (match 'claude-haiku-*').to[0]: unknown upstream 'deepsek' (upstreams: deepseek, claude, openrouter)",
        ),
        (
            replace("to: [deepseek/deepseek-chat]", "to: []"),
            "routes.yaml line 15: routes[0] (match 'claude-haiku-*'): 'to' must be a non-empty list",
        ),
        (
            replace("to: [deepseek/deepseek-chat]", "to: [deepseek/]"),
            "routes.yaml line 15: routes[0] (match 'claude-haiku-*').to[0]: empty model after '/'",
        ),
        (
            replace("  - name: claude\n", "  - name: deepseek\n"),
            "routes.yaml line 6: upstreams[1] (deepseek): duplicate upstream name",
        ),
        (
            replace("  - name: claude\n", "  - name: a/b\n"),
            "routes.yaml line 6: upstreams[1] (a/b): an upstream name cannot contain '/'",
        ),
        (
            replace("    keys: [literal-key]\n", "    key: literal-key\n"),
            "routes.yaml line 12: upstreams[2]: unknown field 'key' (allowed: name, protocol, base_url, keys, profile, cache)",
        ),
        (
            replace("max_attempts: 3", "max_attempts: 0"),
            "routes.yaml line 25: limits.max_attempts: must be an integer >= 1",
        ),
        (
            replace("deadline: 30", "deadline: -1"),
            "routes.yaml line 26: limits.deadline: must be a number of seconds > 0",
        ),
        (
            replace("key: env:KEY_A\n", "key: env:NOPE\n"),
            "routes.yaml line 22: clients[0] (alice): key: environment variable NOPE is not set or empty",
        ),
    ],
)
def test_entry_errors_name_file_line_and_entry(text, message):
    with pytest.raises(ConfigError) as e:
        load(text)
    assert str(e.value).startswith(message), str(e.value)
    assert "sk-a-secret" not in str(e.value) and "literal-key" not in str(e.value)


def test_two_clients_cannot_share_a_key():
    text = GOOD + "  - name: bob\n    key: env:KEY_A\n"
    text = text.replace("limits:\n  max_attempts: 3\n  deadline: 30\n", "")
    with pytest.raises(ConfigError, match="two clients share one key"):
        load(text.replace("clients:\n  - name: alice", "limits: {}\nclients:\n  - name: alice"))


def test_client_route_restriction_must_name_a_route():
    text = GOOD.replace('    models: ["claude-*"]\n', '    routes: ["gpt-*"]\n')
    with pytest.raises(ConfigError, match=r"routes: no route matches 'gpt-\*'"):
        load(text)


def test_shorthand_is_one_upstream_and_a_catch_all_route():
    cfg = config_from_options(Protocol.OPENAI_CHAT, None, "sk-x", [])
    assert list(cfg.upstreams) == ["default"] and cfg.routes[0].match == "*"
    assert cfg.upstreams["default"].keys[0].label == "dragoman_api_key"


PROFILED = """\
upstreams:
  - name: ds
    protocol: openai-chat
    base_url: https://api.deepseek.com/v1
  - name: local
    protocol: openai-chat
    base_url: http://127.0.0.1:8000/v1
    profile: deepseek
  - name: gem
    protocol: openai-chat
    base_url: https://generativelanguage.googleapis.com/v1beta/openai
    profile: generic
routes:
  - match: "*"
    to: ds
"""


def test_an_upstream_profile_is_set_or_detected_from_its_host():
    from dragoman.protocols import profiles
    from dragoman.routing.spec import describe_profile
    from dragoman.routing.spec import upstream_profile

    cfg = load(PROFILED)
    ds, local, gem = cfg.upstreams["ds"], cfg.upstreams["local"], cfg.upstreams["gem"]
    assert (ds.profile, local.profile, gem.profile) == ("auto", "deepseek", "generic")
    assert upstream_profile(ds, "ignored", 1) is profiles.get("deepseek")
    assert upstream_profile(local, "ignored", 1) is upstream_profile(ds, "x", 1)  # set = detected, same rules
    assert upstream_profile(gem, "ignored", 1) is profiles.GENERIC  # set overrides detection
    assert describe_profile(ds) == "deepseek (detected from api.deepseek.com)"
    assert describe_profile(local) == "deepseek (set)"
    claude = load(GOOD).upstreams["claude"]
    assert describe_profile(claude) is None and upstream_profile(claude, "h", 1) is profiles.GENERIC


def test_shorthand_upstream_without_url_detects_from_the_client_host():
    from dragoman.protocols import profiles
    from dragoman.routing.spec import upstream_profile

    up = config_from_options(Protocol.OPENAI_CHAT, None, None, []).upstreams["default"]
    assert upstream_profile(up, "openrouter.ai", 443) is profiles.get("openrouter")
    up = config_from_options(Protocol.OPENAI_CHAT, None, None, [], "qwen").upstreams["default"]
    assert upstream_profile(up, "openrouter.ai", 443) is profiles.get("qwen")


@pytest.mark.parametrize(
    "line,message",
    [
        (
            "    profile: deepsek\n",
            "routes.yaml line 5: upstreams[0] (x): unknown profile 'deepsek' (allowed: auto, generic,",
        ),
        ("    profile: [gemini]\n", "unknown profile ['gemini']"),
    ],
)
def test_a_bad_profile_is_refused_with_the_allowed_names(line, message):
    text = (
        "upstreams:\n  - name: x\n    protocol: openai-chat\n    base_url: http://h\n"
        + line
        + "routes:\n  - match: '*'\n    to: x\n"
    )
    with pytest.raises(ConfigError) as e:
        load(text)
    assert message in str(e.value)


def test_a_profile_on_a_non_chat_upstream_is_refused():
    text = "upstreams:\n  - name: x\n    protocol: anthropic\n    base_url: http://h\n    profile: gemini\nroutes:\n  - match: '*'\n    to: x\n"
    with pytest.raises(ConfigError, match="a profile applies to openai-chat upstreams, not anthropic"):
        load(text)
