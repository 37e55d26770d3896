"""Upstream profiles: what each Chat-compatible provider wants beyond the Chat Completions standard.

A profile is data, one row per provider: how reasoning is asked for (``ask``), which field gives prior
reasoning back to the provider on later turns (``echo``), what is sent when the history has no reasoning
state for it (``placeholder``), and request rewrites (``schema_drop``). The request encoder
(``request_encode``, ``reasoning_ask``) reads the row in ``Context.profile``; nothing else branches on the
provider. A profile is chosen per upstream: explicitly (option ``dragoman_profile``, ``profile:`` of an
upstream in the routes file) or detected from the upstream's host (``detect``); an unknown host gets
``generic``, which is what Dragoman did before profiles existed.

Sources (provider documentation, read 2026-11): DeepSeek api-docs.deepseek.com/guides/thinking_mode (V4:
``thinking: {type}`` + ``reasoning_effort`` low/high/max, thinking on by default, ``reasoning_content`` of
tool-call turns must come back: 400 "The `reasoning_content` in the thinking mode must be passed back to the
API"; an empty one is what agents that replay foreign history send) and guides/reasoning_model (R1: 400 when
``reasoning_content`` is in the input); Gemini ai.google.dev/gemini-api/docs/openai and
thought-signatures (``extra_body.google.thinking_config`` with ``include_thoughts``; thought parts streamed
as ``content`` wrapped in ``<thought>`` with ``extra_content.google.thought``; the documented dummy signature
``skip_thought_signature_validator`` for calls that have none); Moonshot Kimi and Zhipu GLM (``thinking:
{type}``, ``reasoning_content`` kept on tool-call turns); Qwen/DashScope (``enable_thinking`` +
``thinking_budget``); OpenRouter (``reasoning: {effort | max_tokens}``, ``reasoning_details`` back as they
came); Ollama (``reasoning_effort`` on its OpenAI endpoint, ``reasoning`` out); vLLM/SGLang
(``chat_template_kwargs.enable_thinking`` for templates that switch, ``reasoning_effort`` for gpt-oss,
``reasoning_content``/``reasoning`` out).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

#: how reasoning is asked for (see ``reasoning_ask``)
ASK_EFFORT = "reasoning_effort"  # {"reasoning_effort": "low|medium|high"}
ASK_THINKING_TYPE = "thinking_type"  # {"thinking": {"type": "enabled|disabled"}} (+ effort where ``efforts``)
ASK_ENABLE_THINKING = "enable_thinking"  # {"enable_thinking": bool, "thinking_budget": N}
ASK_OPENROUTER = "openrouter"  # {"reasoning": {"effort"} | {"max_tokens"}}
ASK_GEMINI = "gemini"  # {"extra_body": {"google": {"thinking_config": {...}}}}
ASK_TEMPLATE = "chat_template"  # {"chat_template_kwargs": {"enable_thinking": bool}, "reasoning_effort"}
ASK_NONE = "none"  # the model decides; nothing is sent

#: placeholders for a history without reasoning state for this provider
NO_PLACEHOLDER = ""
EMPTY_REASONING = "empty_reasoning_content"  # "reasoning_content": "" on every assistant message
DUMMY_SIGNATURE = "dummy_thought_signature"  # Gemini's documented skip signature on unsigned first calls

GEMINI_SKIP_SIGNATURE = "skip_thought_signature_validator"

#: how a Chat upstream runs a hosted web search (``openai_chat.search``)
SEARCH_NONE = ""  # it cannot: the client gets its protocol's "search unavailable" result
SEARCH_OPTIONS = "web_search_options"  # OpenAI's search models (``search_models``): ``web_search_options``
SEARCH_OPENROUTER = "openrouter:web_search"  # OpenRouter's server tool, for any model


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    #: one line for the README table and the start-up log
    summary: str
    ask: str = ASK_EFFORT
    #: the efforts the provider accepts, in order (an asked effort maps to the nearest one at or above it)
    efforts: tuple[str, ...] = ("low", "medium", "high")
    #: "reasoning_content": prior thinking text goes back in it; "": never sent back
    echo: str = "reasoning_content"
    #: "": no placeholder; else one of the constants above
    placeholder: str = NO_PLACEHOLDER
    #: JSON-schema keywords removed from tool parameters (the provider answers 400 on them)
    schema_drop: frozenset[str] = frozenset()
    #: thought summaries arrive as ``<thought>``-wrapped content flagged ``extra_content.google.thought``
    thought_tags: bool = False
    #: "max_tokens" or "max_completion_tokens"; "" keeps ``dragoman_chat_max_tokens_field``
    max_tokens_field: str = ""
    #: the provider takes OpenAI's ``prompt_cache_key`` / ``prompt_cache_retention`` (``protocols._cache``)
    cache_key: bool = False
    #: how the provider runs a hosted web search (``SEARCH_*``); ``search_models``: the model globs that can
    #: (empty: every model)
    web_search: str = SEARCH_NONE
    search_models: tuple[str, ...] = ()
    #: hosts (exact, or a suffix after a dot) and ports that identify the provider
    hosts: tuple[str, ...] = ()
    ports: tuple[int, ...] = ()


GENERIC = Profile(
    "generic",
    "any other Chat server: reasoning_effort asked; reasoning_content sent back (dragoman_chat_reasoning)",
    efforts=(),
)

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        GENERIC,
        Profile(
            "openai",
            "OpenAI: reasoning_effort; reasoning text is never sent back (OpenAI rejects unknown message fields); "
            "web search with web_search_options on its search models",
            efforts=("none", "minimal", "low", "medium", "high", "xhigh"),
            echo="",
            max_tokens_field="max_completion_tokens",
            cache_key=True,
            web_search=SEARCH_OPTIONS,
            search_models=("*search*",),
            hosts=("api.openai.com",),
        ),
        Profile(
            "deepseek",
            "DeepSeek V4: thinking {type} + reasoning_effort; reasoning_content on every assistant message "
            "(empty where the history has none)",
            ask=ASK_THINKING_TYPE,
            efforts=("low", "high", "max"),
            placeholder=EMPTY_REASONING,
            hosts=("api.deepseek.com",),
        ),
        Profile(
            "deepseek-r1",
            "DeepSeek R1 (deepseek-reasoner before V3.1): reasoning is never sent back (R1 answers 400)",
            ask=ASK_NONE,
            echo="",
        ),
        Profile(
            "gemini",
            "Gemini's OpenAI endpoint: thinking_config with thought summaries; thought signatures round-trip; "
            "the documented skip signature where the history has none; schema keywords Gemini refuses removed",
            ask=ASK_GEMINI,
            echo="",
            placeholder=DUMMY_SIGNATURE,
            schema_drop=frozenset(
                {"$schema", "$id", "$comment", "exclusiveMinimum", "exclusiveMaximum", "propertyNames"}
            ),
            thought_tags=True,
            hosts=("generativelanguage.googleapis.com",),
        ),
        Profile(
            "openrouter",
            "OpenRouter: reasoning {effort|max_tokens}; reasoning_details and reasoning_content sent back; "
            "web search by its openrouter:web_search server tool",
            ask=ASK_OPENROUTER,
            efforts=("minimal", "low", "medium", "high"),
            web_search=SEARCH_OPENROUTER,
            hosts=("openrouter.ai",),
        ),
        Profile(
            "kimi",
            "Moonshot Kimi: thinking {type}; reasoning_content on every assistant message (empty where none)",
            ask=ASK_THINKING_TYPE,
            efforts=(),
            placeholder=EMPTY_REASONING,
            hosts=("api.moonshot.ai", "api.moonshot.cn"),
        ),
        Profile(
            "glm",
            "Zhipu GLM: thinking {type}; reasoning_content sent back (preserved thinking)",
            ask=ASK_THINKING_TYPE,
            efforts=(),
            hosts=("open.bigmodel.cn", "api.z.ai"),
        ),
        Profile(
            "qwen",
            "Qwen on DashScope: enable_thinking + thinking_budget; reasoning text not sent back",
            ask=ASK_ENABLE_THINKING,
            echo="",
            hosts=("dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com", "dashscope-us.aliyuncs.com"),
        ),
        Profile(
            "ollama",
            "Ollama's OpenAI endpoint: reasoning_effort; reasoning text not sent back",
            echo="",
            hosts=("ollama.com",),
            ports=(11434,),
        ),
        Profile(
            "vllm",
            "vLLM / SGLang: chat_template_kwargs.enable_thinking + reasoning_effort; reasoning_content sent back",
            ask=ASK_TEMPLATE,
        ),
    )
}

#: the values of ``dragoman_profile`` and of ``profile:`` in the routes file
CHOICES = ("auto", *PROFILES)


def get(name: str) -> Profile:
    """The profile of that name (``KeyError`` for an unknown one; callers validate first)."""
    return PROFILES[name]


@lru_cache(maxsize=1024)
def detect(host: str | None, port: int | None = None) -> Profile:
    """The profile a host (and port) identifies; ``GENERIC`` for any other (cached: asked once per request)."""
    h = (host or "").lower().rstrip(".")
    for p in PROFILES.values():
        if any(h == d or h.endswith("." + d) for d in p.hosts) or (port is not None and port in p.ports):
            return p
    return GENERIC


def choose(name: str | None, host: str | None, port: int | None = None) -> tuple[Profile, bool]:
    """(profile, detected): the named profile, or for None/"auto" the one the host identifies."""
    if name and name != "auto":
        return PROFILES[name], False
    return detect(host, port), True
