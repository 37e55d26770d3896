"""The options of the Translate addon: declared here (``declare``), validated in ``Translate.configure`` and
``Routing.configure``. The help strings are the user documentation (``mitmdump --options``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dragoman.protocols import Protocol
from dragoman.protocols import profiles

OPTION_PREFIX = "dragoman_"
CHOICES = {
    "dragoman_target": ["", *(p.value for p in Protocol)],
    "dragoman_chat_reasoning": ["reasoning_content", "drop"],
    "dragoman_chat_max_tokens_field": ["max_tokens", "max_completion_tokens"],
    "dragoman_profile": list(profiles.CHOICES),
    "dragoman_lint": ["off", "log", "strict"],
}


def declare(loader: Any) -> None:
    declare_upstream(loader)
    declare_behaviour(loader)
    declare_sharing(loader)
    declare_limits(loader)


def declare_upstream(loader: Any) -> None:
    """The single upstream (shorthand) and the routes file."""
    loader.add_option(
        "dragoman_target",
        str,
        "",
        "Protocol of the upstream to translate to. Empty: Dragoman is off and passes everything through.",
        choices=CHOICES["dragoman_target"],
    )
    loader.add_option(
        "dragoman_upstream",
        str,
        "",
        "Base URL of the upstream in the target SDK's convention (https://api.anthropic.com, "
        "https://api.openai.com/v1, http://localhost:11434/v1); the target's endpoint path is appended. "
        "Empty: keep the host the client asked for (e.g. the reverse-mode target) and use the target's "
        "default path (/v1/messages, /v1/chat/completions, /v1/responses).",
    )
    loader.add_option(
        "dragoman_api_key",
        str,
        "",
        "API key for the upstream, or env:NAME to read it from the environment at startup. When set, the "
        "client's x-api-key, authorization and cookie headers are removed. Empty: the client's own key is "
        "moved to the target's header (x-api-key for anthropic, Authorization: Bearer for OpenAI).",
    )
    loader.add_option(
        "dragoman_profile",
        str,
        "auto",
        "Provider profile of an openai-chat upstream: how reasoning is asked for, what goes back on later turns "
        'and what stands in where the history has none (README "Providers"). auto: detected from the upstream\'s '
        "host (api.deepseek.com, generativelanguage.googleapis.com, openrouter.ai, ...; any other host: generic).",
        choices=CHOICES["dragoman_profile"],
    )
    loader.add_option(
        "dragoman_model_map",
        Sequence[str],
        [],
        "Model name mapping, PATTERN=MODEL (shell glob, first match wins) or a bare MODEL that maps every "
        "model. Repeat the option for several rules.",
    )

    loader.add_option(
        "dragoman_config",
        str,
        "",
        "Path of a routes file (YAML): several upstreams with key pools, routes by model with failover, "
        "client keys. Reloaded when it changes. Cannot be combined with dragoman_target, dragoman_upstream, "
        "dragoman_api_key or dragoman_model_map (those are the shorthand for one upstream).",
    )


def declare_behaviour(loader: Any) -> None:
    """Which flows, and how translation behaves."""
    loader.add_option(
        "dragoman_match",
        str,
        "",
        "mitmproxy filter expression selecting the flows to translate (they must also have an endpoint "
        "path). Empty: POSTs to the official endpoints (api.anthropic.com/v1/messages, "
        "api.openai.com/v1/chat/completions and /v1/responses, chatgpt.com/backend-api/codex/responses) in "
        "every mode, and to any /v1/messages, /chat/completions or /responses path in reverse mode.",
    )
    loader.add_option(
        "dragoman_lint",
        str,
        "off",
        "Conformance lint (a debugging aid): check every stream and body Dragoman sends a client against its "
        "protocol's strict grammar, and every upstream stream and body against the tolerant one; each violation "
        "is logged once per flow with its event index and listed in the flow's metadata (lint). off | log | "
        "strict (strict also ends our stream with an error event in the client's protocol when our own "
        "output breaks the grammar, and answers a broken body with a 502 error body).",
        choices=CHOICES["dragoman_lint"],
    )
    loader.add_option(
        "dragoman_strict",
        bool,
        False,
        "Treat tolerated upstream oddities (unknown stream event types) as errors.",
    )
    loader.add_option(
        "dragoman_lossy_header",
        bool,
        True,
        "Tell the client how lossy a translated exchange was: a response header x-dragoman-lossy with the "
        "number of entries in the flow's lossiness report (fields dropped, approximated or invented; for a "
        "stream, those known when the headers left). The report itself is in the flow's metadata and in "
        "recordings (docs/debugging.md). Never sent for a flow passed through untouched.",
    )
    loader.add_option(
        "dragoman_keep_answer",
        bool,
        False,
        "Assemble both sides of each translated answer (text, thinking, tool calls, stop reason, usage) into "
        "the flow's metadata: the upstream's, and the client's read back from the bytes that left, so the "
        "Dragoman content view of mitmweb shows them side by side (mitmproxy does not keep a streamed body). "
        "Capped (100,000 characters of text, thinking and each call's arguments); costs memory in proportion "
        "to the answer's text while the flow is kept.",
    )
    loader.add_option(
        "dragoman_idle_timeout",
        int,
        300,
        "Seconds without any upstream byte during a streamed response before Dragoman closes the upstream "
        "connection and ends the client's stream with an error event in its protocol. 0 disables it.",
    )
    loader.add_option(
        "dragoman_models_ttl",
        int,
        MODELS_TTL_DEFAULT,
        "Seconds an upstream's model list (GET /v1/models, merged with the model map's names) is kept and "
        "answered from memory, per upstream and credential. 0: every list request goes upstream.",
    )
    loader.add_option(
        "dragoman_keep_images",
        int,
        0,
        "Keep only the N most recent images of a conversation (in user turns and tool results, e.g. the "
        "screenshots of a computer-use or browser loop); older ones become the text "
        "'[image removed to save context]' and are reported as dropped. 0: every image is sent.",
    )
    loader.add_option(
        "dragoman_mcp_prefix",
        bool,
        False,
        "For an Anthropic upstream: send tool names starting with a single mcp_ as mcp__... (the prefix "
        "Anthropic subscription (OAuth) credentials expect) in tool definitions, tool_choice and the history, "
        "and rename them back in the answer, whole or streamed. Names already starting with mcp__ are never touched.",
    )
    loader.add_option(
        "dragoman_chat_reasoning",
        str,
        "reasoning_content",
        "How thinking in the conversation history is sent to an openai-chat upstream: as "
        "reasoning_content (DeepSeek, vLLM, OpenRouter) or dropped.",
        choices=CHOICES["dragoman_chat_reasoning"],
    )
    loader.add_option(
        "dragoman_chat_max_tokens_field",
        str,
        "max_tokens",
        "Which field carries the output token limit to an openai-chat upstream "
        "(OpenAI's reasoning models need max_completion_tokens).",
        choices=CHOICES["dragoman_chat_max_tokens_field"],
    )


def declare_sharing(loader: Any) -> None:
    """What a shared deployment keeps (client keys and binding live in ``client_auth``)."""
    loader.add_option(
        "dragoman_ledger",
        str,
        "",
        "Where the usage ledger is kept (requests, tokens and errors per client, route, upstream and model; read "
        "it with `python -m dragoman usage`): a file path, sqlite://PATH or redis://HOST:PORT/DB (shared by "
        "several Dragoman processes). Empty: $DRAGOMAN_LEDGER, else ~/.dragoman/usage.sqlite3. off: no ledger.",
    )
    loader.add_option(
        "dragoman_responses_store",
        str,
        "",
        "Where Responses answers are kept so previous_response_id and GET/DELETE /v1/responses/{id} work toward "
        "any upstream (docs/responses-state.md): a file path, sqlite://PATH or redis://HOST:PORT/DB (shared by "
        "several Dragoman instances). Empty: $DRAGOMAN_RESPONSES_STORE, else ~/.dragoman/responses.sqlite3. "
        "off: none (previous_response_id then works toward a Responses upstream only).",
    )
    loader.add_option(
        "dragoman_responses_ttl", str, "30d", "How long a stored response is kept (30d, 12h, or seconds)."
    )
    loader.add_option(
        "dragoman_responses_max_size",
        str,
        "1g",
        "The response store's size cap (bytes; k, m, g suffixes); past it the oldest responses go first.",
    )


#: defaults of the size caps (``declare_limits``); the README's Security section explains the choice
MAX_BODY_DEFAULT = "64m"
MAX_INFLATE_RATIO_DEFAULT = 100
MAX_SSE_EVENT_DEFAULT = "8m"
#: seconds an upstream's model list is kept (``dragoman_models_ttl``), as the adapter guide suggests
MODELS_TTL_DEFAULT = 300


def declare_limits(loader: Any) -> None:
    """Caps on what one request or answer may make Dragoman hold in memory (validated in ``configure``)."""
    loader.add_option(
        "dragoman_max_body",
        str,
        MAX_BODY_DEFAULT,
        "Largest client request body Dragoman accepts, after decompression (bytes, or with k/m/g: 64m). Larger: "
        "413 in the client's protocol; a Content-Length beyond it is refused before the body is read. The "
        "default admits the providers' own limits (Anthropic 32 MB, OpenAI 50 MB of images/files per request).",
    )
    loader.add_option(
        "dragoman_max_inflate_ratio",
        int,
        MAX_INFLATE_RATIO_DEFAULT,
        "Largest expansion of a compressed (Content-Encoding: gzip, deflate, br, zstd) request body, inflated "
        "size / compressed size, checked once it passes 1 MiB. Beyond it: 413 in the client's protocol. 0: only "
        "dragoman_max_body applies.",
    )
    loader.add_option(
        "dragoman_max_sse_event",
        str,
        MAX_SSE_EVENT_DEFAULT,
        "Largest upstream SSE line or event Dragoman buffers while translating a stream (bytes, or with k/m/g). "
        "Beyond it the client's stream ends with an error event in its protocol.",
    )
