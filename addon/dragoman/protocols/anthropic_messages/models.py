"""Anthropic Messages wire models (requests, whole responses, stream events).

Every family that the API keeps growing (content blocks, deltas, stream events) is a union with a
callable discriminator: known ``type`` values select their model, anything else selects a generic
``Other*`` model that keeps the raw fields (``extra="allow"``), so a new block or event type never
breaks validation. ``EVENT_ADAPTER`` parses one SSE ``data`` payload exactly once.
"""

from __future__ import annotations

import logging
from typing import Annotated
from typing import Any
from typing import Literal

from pydantic import Discriminator
from pydantic import Field
from pydantic import Tag
from pydantic import TypeAdapter

from dragoman.protocols._wire import WireModel

logger = logging.getLogger(__name__)

OTHER = "__other__"


def _discriminator(known: frozenset[str]) -> Discriminator:
    def pick(value: Any) -> str:
        t = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        return t if type(t) is str and t in known else OTHER  # a list/dict "type" is unhashable

    return Discriminator(pick)


# ---------------------------------------------------------------- content blocks (requests and responses)


class Base64Source(WireModel):
    type: Literal["base64"]
    media_type: str
    data: str


class UrlSource(WireModel):
    type: Literal["url"]
    url: str


class FileSource(WireModel):
    type: Literal["file"]
    file_id: str


class TextSource(WireModel):
    type: Literal["text"]
    media_type: str | None = None
    data: str


class OtherSource(WireModel):
    type: str


Source = Annotated[
    Annotated[Base64Source, Tag("base64")]
    | Annotated[UrlSource, Tag("url")]
    | Annotated[FileSource, Tag("file")]
    | Annotated[TextSource, Tag("text")]
    | Annotated[OtherSource, Tag(OTHER)],
    _discriminator(frozenset({"base64", "url", "file", "text"})),
]


class TextBlock(WireModel):
    type: Literal["text"]
    text: str
    citations: list[dict[str, Any]] | None = None
    cache_control: dict[str, Any] | None = None


class ImageBlock(WireModel):
    type: Literal["image"]
    source: Source
    cache_control: dict[str, Any] | None = None


class DocumentBlock(WireModel):
    type: Literal["document"]
    source: Source
    title: str | None = None
    context: str | None = None
    citations: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None


class ToolUseBlock(WireModel):
    type: Literal["tool_use"]
    id: str
    name: str
    input: Any = Field(default_factory=dict)
    cache_control: dict[str, Any] | None = None


class ToolResultBlock(WireModel):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[dict[str, Any]] | None = None
    is_error: bool | None = None
    cache_control: dict[str, Any] | None = None


class ThinkingBlock(WireModel):
    type: Literal["thinking"]
    thinking: str = ""
    signature: str | None = None
    cache_control: dict[str, Any] | None = None


class RedactedThinkingBlock(WireModel):
    type: Literal["redacted_thinking"]
    data: str
    cache_control: dict[str, Any] | None = None


class OtherBlock(WireModel):
    """Any block type we do not model (server_tool_use, web_search_tool_result, mcp_tool_use, ...)."""

    type: str


_BLOCK_TYPES = frozenset({"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"})

ContentBlock = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ImageBlock, Tag("image")]
    | Annotated[DocumentBlock, Tag("document")]
    | Annotated[ToolUseBlock, Tag("tool_use")]
    | Annotated[ToolResultBlock, Tag("tool_result")]
    | Annotated[ThinkingBlock, Tag("thinking")]
    | Annotated[RedactedThinkingBlock, Tag("redacted_thinking")]
    | Annotated[OtherBlock, Tag(OTHER)],
    _discriminator(_BLOCK_TYPES),
]

#: tool_result inner content: text and image (documents/search results tolerated via OtherBlock)
ToolResultContent = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ImageBlock, Tag("image")]
    | Annotated[DocumentBlock, Tag("document")]
    | Annotated[OtherBlock, Tag(OTHER)],
    _discriminator(frozenset({"text", "image", "document"})),
]
TOOL_RESULT_CONTENT_ADAPTER: TypeAdapter[list[Any]] = TypeAdapter(list[ToolResultContent])


# ---------------------------------------------------------------- requests


class MessageParam(WireModel):
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlock]


class ToolParam(WireModel):
    """A client tool (``input_schema``) or a server tool (``type`` like ``web_search_20250305``)."""

    name: str
    type: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None


class ToolChoiceParam(WireModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class ThinkingParam(WireModel):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = None


class MetadataParam(WireModel):
    user_id: str | None = None


class MessagesRequest(WireModel):
    model: str
    messages: list[MessageParam]
    max_tokens: int
    system: str | list[TextBlock] | None = None
    tools: list[ToolParam] | None = None
    tool_choice: ToolChoiceParam | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = None
    metadata: MetadataParam | None = None
    thinking: ThinkingParam | None = None
    output_config: dict[str, Any] | None = None


# ---------------------------------------------------------------- responses


class UsageModel(WireModel):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class MessageModel(WireModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[ContentBlock] = Field(default_factory=list)
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: UsageModel = Field(default_factory=UsageModel)


class ErrorObject(WireModel):
    type: str = "api_error"
    message: str = ""


class ErrorResponse(WireModel):
    type: Literal["error"]
    error: ErrorObject
    request_id: str | None = None


# ---------------------------------------------------------------- stream events


class TextDeltaModel(WireModel):
    type: Literal["text_delta"]
    text: str


class ThinkingDeltaModel(WireModel):
    type: Literal["thinking_delta"]
    thinking: str


class SignatureDeltaModel(WireModel):
    type: Literal["signature_delta"]
    signature: str


class InputJsonDeltaModel(WireModel):
    type: Literal["input_json_delta"]
    partial_json: str


class OtherDelta(WireModel):
    """citations_delta, compaction_delta and anything new."""

    type: str


Delta = Annotated[
    Annotated[TextDeltaModel, Tag("text_delta")]
    | Annotated[ThinkingDeltaModel, Tag("thinking_delta")]
    | Annotated[SignatureDeltaModel, Tag("signature_delta")]
    | Annotated[InputJsonDeltaModel, Tag("input_json_delta")]
    | Annotated[OtherDelta, Tag(OTHER)],
    _discriminator(frozenset({"text_delta", "thinking_delta", "signature_delta", "input_json_delta"})),
]


class StreamMessage(WireModel):
    """The ``message`` of ``message_start`` (content is always empty on the real API)."""

    id: str
    model: str = ""
    usage: UsageModel = Field(default_factory=UsageModel)


class MessageStartEvent(WireModel):
    type: Literal["message_start"]
    message: StreamMessage


class ContentBlockStartEvent(WireModel):
    type: Literal["content_block_start"]
    index: int
    content_block: ContentBlock


class ContentBlockDeltaEvent(WireModel):
    type: Literal["content_block_delta"]
    index: int
    delta: Delta


class ContentBlockStopEvent(WireModel):
    type: Literal["content_block_stop"]
    index: int


class MessageDeltaBody(WireModel):
    stop_reason: str | None = None
    stop_sequence: str | None = None


class MessageDeltaEvent(WireModel):
    type: Literal["message_delta"]
    delta: MessageDeltaBody = Field(default_factory=MessageDeltaBody)
    usage: UsageModel | None = None


class MessageStopEvent(WireModel):
    type: Literal["message_stop"]


class PingEvent(WireModel):
    type: Literal["ping"]


class ErrorEvent(WireModel):
    type: Literal["error"]
    error: ErrorObject
    request_id: str | None = None


class OtherEvent(WireModel):
    type: str


_EVENT_TYPES = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    }
)

StreamEvent = Annotated[
    Annotated[MessageStartEvent, Tag("message_start")]
    | Annotated[ContentBlockStartEvent, Tag("content_block_start")]
    | Annotated[ContentBlockDeltaEvent, Tag("content_block_delta")]
    | Annotated[ContentBlockStopEvent, Tag("content_block_stop")]
    | Annotated[MessageDeltaEvent, Tag("message_delta")]
    | Annotated[MessageStopEvent, Tag("message_stop")]
    | Annotated[PingEvent, Tag("ping")]
    | Annotated[ErrorEvent, Tag("error")]
    | Annotated[OtherEvent, Tag(OTHER)],
    _discriminator(_EVENT_TYPES),
]

EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(StreamEvent)
REQUEST_ADAPTER: TypeAdapter[MessagesRequest] = TypeAdapter(MessagesRequest)
MESSAGE_ADAPTER: TypeAdapter[MessageModel] = TypeAdapter(MessageModel)
