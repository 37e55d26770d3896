"""The profile table: every known provider host detects its profile, an explicit name wins over detection, and
an unknown host gets ``generic`` (what Dragoman did before profiles)."""

from __future__ import annotations

import pytest

from dragoman.protocols import profiles

HOSTS = {
    "api.openai.com": "openai",
    "api.deepseek.com": "deepseek",
    "generativelanguage.googleapis.com": "gemini",
    "openrouter.ai": "openrouter",
    "api.moonshot.ai": "kimi",
    "api.moonshot.cn": "kimi",
    "open.bigmodel.cn": "glm",
    "api.z.ai": "glm",
    "dashscope.aliyuncs.com": "qwen",
    "dashscope-intl.aliyuncs.com": "qwen",
    "ollama.com": "ollama",
    "API.DeepSeek.com.": "deepseek",  # case and a trailing dot do not matter
}


@pytest.mark.parametrize("host,name", HOSTS.items())
def test_each_known_host_detects_its_profile(host, name):
    found, detected = profiles.choose("auto", host, 443)
    assert detected and found is profiles.get(name)


def test_a_local_ollama_is_known_by_its_port_and_other_hosts_are_generic():
    assert profiles.detect("127.0.0.1", 11434).name == "ollama"
    assert profiles.detect("127.0.0.1", 8000) is profiles.GENERIC
    assert profiles.detect("deepseek.com.evil.example", 443) is profiles.GENERIC  # a suffix must be a domain
    assert profiles.detect("eu.api.deepseek.com", 443).name == "deepseek"  # a subdomain is the provider's
    assert profiles.detect("notapi.deepseek.com", 443) is profiles.GENERIC
    assert profiles.detect(None) is profiles.GENERIC


@pytest.mark.parametrize("name", [n for n in profiles.PROFILES if n != "generic"])
def test_an_explicit_profile_overrides_detection(name):
    found, detected = profiles.choose(name, "api.openai.com", 443)
    assert not detected and found.name == name
    assert profiles.choose("generic", "api.deepseek.com")[0] is profiles.GENERIC


def test_the_table_has_the_profiles_the_option_documents():
    for name in ("openai", "deepseek", "deepseek-r1", "gemini", "openrouter", "kimi", "glm", "qwen", "ollama", "vllm"):
        p = profiles.get(name)
        assert p.summary and p.ask in {
            profiles.ASK_EFFORT,
            profiles.ASK_THINKING_TYPE,
            profiles.ASK_ENABLE_THINKING,
            profiles.ASK_OPENROUTER,
            profiles.ASK_GEMINI,
            profiles.ASK_TEMPLATE,
            profiles.ASK_NONE,
        }
    assert profiles.CHOICES[0] == "auto" and set(profiles.CHOICES[1:]) == set(profiles.PROFILES)
