"""Neutral request model.

Messages are a list of ``Message(role, parts)``. Roles: ``system`` (a system/developer message
inside the conversation, as Claude Code and Responses clients send), ``user``, ``assistant``.
Tool results are ``ToolResultPart`` inside a ``user`` message (Anthropic's shape; the Chat encoder
splits them into ``tool`` messages, the Responses encoder into ``function_call_output`` items).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Literal

from dragoman.ir.common import Dropped
from dragoman.ir.search import Citation
from dragoman.ir.search import WebSearchPart
from dragoman.ir.search import WebSearchSpec


@dataclass(slots=True)
class TextPart:
    text: str
    #: the spans of ``text`` that cite sources (``dragoman.ir.search``); None: none
    citations: list[Citation] | None = None


@dataclass(slots=True)
class ImagePart:
    """An image, either inline (``data`` base64 + ``media_type``) or by ``url``.

    A ``data:`` URL is always split into ``media_type`` + ``data`` by decoders.
    """

    data: str | None = None
    media_type: str | None = None
    url: str | None = None
    detail: str | None = None  # OpenAI's low/high/auto
    file_id: str | None = None


@dataclass(slots=True)
class FilePart:
    """A document (PDF or other file), inline base64 ``data`` or by ``url`` / ``file_id``."""

    data: str | None = None
    media_type: str | None = None
    url: str | None = None
    filename: str | None = None
    file_id: str | None = None


@dataclass(slots=True)
class ThinkingPart:
    """Reasoning. Native opaque state per protocol is kept in its own field:

    * ``signature``: Anthropic thinking signature; ``redacted_data``: Anthropic ``redacted_thinking.data``
    * ``encrypted_content`` + ``item_id``: a Responses reasoning item
    ``summary`` is True when ``text`` is a summary (Responses ``summary_text``) rather than raw reasoning.
    See ``dragoman.ir.carry`` for how these cross protocols.
    """

    text: str = ""
    signature: str | None = None
    redacted_data: str | None = None
    encrypted_content: str | None = None
    item_id: str | None = None
    summary: bool = False


@dataclass(slots=True)
class ToolCallPart:
    """An assistant tool call. ``arguments`` is the JSON text of the arguments for ``kind="function"``;
    for ``kind="custom"`` (a Responses freeform tool) it is the raw ``input`` string."""

    id: str
    name: str
    arguments: str = "{}"
    kind: Literal["function", "custom"] = "function"
    item_id: str | None = None  # Responses item id (fc_...), when known


@dataclass(slots=True)
class ToolResultPart:
    tool_call_id: str
    content: list[TextPart | ImagePart | FilePart] = field(default_factory=list)
    is_error: bool = False
    kind: Literal["function", "custom"] = "function"


@dataclass(slots=True)
class RefusalPart:
    text: str


Part = TextPart | ImagePart | FilePart | ThinkingPart | ToolCallPart | ToolResultPart | RefusalPart | WebSearchPart


@dataclass(slots=True)
class Message:
    role: Literal["system", "user", "assistant"]
    parts: list[Part] = field(default_factory=list)
    #: the source role when it was ``developer`` (Responses/Chat), so a same-family encoder can keep it
    source_role: str | None = None
    #: where this turn is in the client's request (``messages[3]``, ``input[5]``, ``contents[2]``): the place an
    #: encoder names in the lossiness report (``LossReport.at``)
    source: str = field(default="", compare=False)


@dataclass(slots=True)
class Tool:
    """A tool offered to the model.

    ``kind="function"``: ``parameters`` is the JSON schema, kept as it is.
    ``kind="custom"``: a Responses freeform tool; ``format`` is its grammar/text format (opaque). Encoders
    for protocols without custom tools offer it as a function with one string parameter ``input``
    (see ``CUSTOM_TOOL_PARAM``) and decoders turn the call back using the request's tool list.
    ``kind="builtin"``: a provider-side tool (web_search, code execution, ...), ``raw`` is its definition;
    carried only to the same protocol family, otherwise dropped and logged.
    """

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    kind: Literal["function", "custom", "builtin"] = "function"
    strict: bool | None = None
    format: dict[str, Any] | None = None
    raw: dict[str, Any] | None = None
    #: where this tool is in the client's request (``tools[3]``; "" when its decoder does not say): the place
    #: an encoder names in the lossiness report
    source: str = field(default="", compare=False)


CUSTOM_TOOL_PARAM = "input"


@dataclass(slots=True)
class ToolChoice:
    """``mode``: auto | any (must call some tool) | none | tool (must call ``name``)."""

    mode: Literal["auto", "any", "none", "tool"] = "auto"
    name: str | None = None


@dataclass(slots=True)
class Reasoning:
    """Reasoning/thinking configuration.

    ``enabled`` False means explicitly off. ``effort``: minimal/low/medium/high/xhigh (OpenAI terms);
    ``budget_tokens``: Anthropic's explicit budget; ``adaptive``: Anthropic adaptive thinking;
    ``summary``: Responses ``reasoning.summary`` (auto/concise/detailed).
    """

    enabled: bool | None = None
    effort: str | None = None
    budget_tokens: int | None = None
    adaptive: bool = False
    summary: str | None = None


@dataclass(slots=True)
class ResponseFormat:
    """Structured output. ``type``: text | json_object | json_schema."""

    type: str = "text"
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None


@dataclass(slots=True)
class Request:
    model: str
    messages: list[Message] = field(default_factory=list)
    system: list[TextPart] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    user: str | None = None
    reasoning: Reasoning | None = None
    response_format: ResponseFormat | None = None
    #: the client asked for a usage chunk (Chat ``stream_options.include_usage``)
    include_usage: bool | None = None
    #: how many answers the client asked for (Chat ``n``); only a Chat upstream can give more than one
    n: int | None = None
    #: the client's prompt-cache routing key (OpenAI ``prompt_cache_key``), see ``dragoman.protocols._cache``
    prompt_cache_key: str | None = None
    #: how long the client asks a cached prefix to live: OpenAI ``prompt_cache_retention`` ("in_memory",
    #: "24h") or Anthropic ``cache_control.ttl`` ("5m", "1h")
    cache_retention: str | None = None
    #: the hosted web search the client offers (``dragoman.ir.search``), None: none
    web_search: WebSearchSpec | None = None
    #: fields of the source request the IR could not carry (names only)
    dropped: Dropped = field(default_factory=Dropped)
    #: protocol-specific passthrough extras the same-family encoder may reuse (never bodies of other fields)
    extra: dict[str, Any] = field(default_factory=dict)

    def custom_tool_names(self) -> set[str]:
        return {t.name for t in self.tools if t.kind == "custom"}
