"""How each profile asks its provider for reasoning, from an Anthropic budget, a Responses/Chat effort, or a
client that turned thinking off."""

from __future__ import annotations

import pytest

from dragoman.ir.request import Message
from dragoman.ir.request import Reasoning
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.protocols import profiles
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.protocols.openai_chat.reasoning_ask import fit

BUDGET = Reasoning(enabled=True, budget_tokens=4096)
EFFORT = Reasoning(effort="high")
OFF = Reasoning(enabled=False)

#: profile -> (asked with an Anthropic budget of 4096, asked with effort "high", thinking turned off)
EXPECTED = {
    "generic": ({"reasoning_effort": "medium"}, {"reasoning_effort": "high"}, {}),
    "openai": ({"reasoning_effort": "medium"}, {"reasoning_effort": "high"}, {}),
    "deepseek": (
        {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        {"thinking": {"type": "disabled"}},
    ),
    "deepseek-r1": ({}, {}, {}),
    "gemini": (
        {"extra_body": {"google": {"thinking_config": {"include_thoughts": True, "thinking_budget": 4096}}}},
        {"extra_body": {"google": {"thinking_config": {"include_thoughts": True, "thinking_budget": 24576}}}},
        {},
    ),
    "openrouter": (
        {"reasoning": {"max_tokens": 4096}},
        {"reasoning": {"effort": "high"}},
        {"reasoning": {"enabled": False}},
    ),
    "kimi": ({"thinking": {"type": "enabled"}}, {"thinking": {"type": "enabled"}}, {"thinking": {"type": "disabled"}}),
    "glm": ({"thinking": {"type": "enabled"}}, {"thinking": {"type": "enabled"}}, {"thinking": {"type": "disabled"}}),
    "qwen": ({"enable_thinking": True, "thinking_budget": 4096}, {"enable_thinking": True}, {"enable_thinking": False}),
    "ollama": ({"reasoning_effort": "medium"}, {"reasoning_effort": "high"}, {}),
    "vllm": (
        {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "medium"},
        {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "high"},
        {"chat_template_kwargs": {"enable_thinking": False}},
    ),
}
KEYS = (
    "reasoning_effort",
    "thinking",
    "extra_body",
    "reasoning",
    "enable_thinking",
    "thinking_budget",
    "chat_template_kwargs",
)


def encode(profile: str, reasoning: Reasoning) -> dict:
    req = Request(model="m", messages=[Message(role="user", parts=[TextPart("hi")])], reasoning=reasoning)
    body = CODEC.encode_request(req, Context(profile=profiles.get(profile)))
    return {k: body[k] for k in KEYS if k in body}


@pytest.mark.parametrize("profile", EXPECTED)
def test_each_profile_asks_in_its_providers_words(profile):
    budget, effort, off = EXPECTED[profile]
    assert encode(profile, BUDGET) == budget
    assert encode(profile, EFFORT) == effort
    assert encode(profile, OFF) == off


def test_an_effort_the_provider_lacks_maps_to_the_nearest_one_at_or_above():
    assert fit("medium", ("low", "high", "max")) == "high"
    assert fit("xhigh", ("low", "high", "max")) == "max"
    assert fit("minimal", ("low", "high", "max")) == "low"
    assert fit("max", ("low", "medium", "high")) == "high"
    assert fit("xhigh", ()) == "xhigh"  # generic: as asked


def test_openai_gets_max_completion_tokens_and_gemini_drops_no_summary():
    req = Request(model="m", messages=[Message(role="user", parts=[TextPart("hi")])], max_tokens=100)
    assert "max_completion_tokens" in CODEC.encode_request(req, Context(profile=profiles.get("openai")))
    assert "max_tokens" in CODEC.encode_request(req, Context())
    req.reasoning = Reasoning(effort="low", summary="auto")
    ctx = Context(profile=profiles.get("gemini"))
    CODEC.encode_request(req, ctx)
    assert "reasoning.summary" not in ctx.dropped.fields  # include_thoughts is the summary
    ctx = Context(profile=profiles.get("deepseek"))
    CODEC.encode_request(req, ctx)
    assert "reasoning.summary" in ctx.dropped.fields
