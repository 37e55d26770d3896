"""OpenAI Responses wire models: the request envelope, the response object and stream events.

Items (``input`` / ``output`` entries) stay plain dicts: the family keeps growing (web_search_call,
mcp_*, additional_tools, ...) and the codec only reads a few keys of the item types it knows.
Stream events are a union with a callable discriminator: known ``type`` values select their model,
anything else selects ``OtherEvent`` (raw fields kept), so a new event type never breaks validation
while a malformed known event does. ``EVENT_ADAPTER`` parses one SSE ``data`` payload exactly once.
"""

from __future__ import annotations

import logging
from typing import Annotated
from typing import Any
from typing import Literal

from pydantic import Discriminator
from pydantic import Tag
from pydantic import TypeAdapter

from dragoman.protocols._wire import WireModel

logger = logging.getLogger(__name__)

OTHER = "__other__"


# ---------------------------------------------------------------- requests


class ResponsesRequest(WireModel):
    """The request envelope; ``input`` items and ``tools`` are read as dicts by the decoder."""

    model: str
    input: str | list[dict[str, Any]] | None = None
    instructions: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    reasoning: dict[str, Any] | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    text: dict[str, Any] | None = None
    stream: bool | None = None
    user: str | None = None
    safety_identifier: str | None = None
    previous_response_id: str | None = None


# ---------------------------------------------------------------- response object


class ResponseObject(WireModel):
    id: str = ""
    model: str = ""
    created_at: float | None = None
    status: str | None = None
    output: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None
    incomplete_details: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


# ---------------------------------------------------------------- stream events


class LifecycleEvent(WireModel):
    """response.created / queued / in_progress / completed / incomplete / failed."""

    type: str
    response: ResponseObject
    sequence_number: int | None = None


class OutputItemEvent(WireModel):
    """response.output_item.added / done."""

    type: str
    output_index: int | None = None
    item: dict[str, Any]


class ContentPartEvent(WireModel):
    """response.content_part.added / done and response.reasoning_summary_part.added / done."""

    type: str
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    summary_index: int | None = None
    part: dict[str, Any] | None = None


class DeltaEvent(WireModel):
    """Every ``*.delta`` event the codec maps (text, refusal, reasoning, arguments, custom input)."""

    type: str
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    summary_index: int | None = None
    delta: str


class DoneEvent(WireModel):
    """Every ``*.done`` event the codec maps; the full value is in ``text``/``refusal``/``arguments``/``input``."""

    type: str
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    summary_index: int | None = None
    text: str | None = None
    refusal: str | None = None
    arguments: str | None = None
    input: str | None = None


class ErrorEvent(WireModel):
    """``{"type":"error","code","message","param"}``; some producers nest it as ``error: {...}``."""

    type: Literal["error"]
    code: str | int | None = None
    message: str | None = None
    param: str | None = None
    error: dict[str, Any] | None = None


class OtherEvent(WireModel):
    type: str = OTHER


LIFECYCLE_TYPES = frozenset(
    {
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.completed",
        "response.incomplete",
        "response.failed",
    }
)
ITEM_TYPES = frozenset({"response.output_item.added", "response.output_item.done"})
PART_TYPES = frozenset(
    {
        "response.content_part.added",
        "response.content_part.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
    }
)
DELTA_TYPES = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
    }
)
DONE_TYPES = frozenset(
    {
        "response.output_text.done",
        "response.refusal.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
        "response.function_call_arguments.done",
        "response.custom_tool_call_input.done",
    }
)


def _event_tag(value: Any) -> str:
    t = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if type(t) is not str:  # a list/dict "type" is unhashable: let OtherEvent reject it as a validation error
        return OTHER
    if t in LIFECYCLE_TYPES:
        return "lifecycle"
    if t in ITEM_TYPES:
        return "item"
    if t in PART_TYPES:
        return "part"
    if t in DELTA_TYPES:
        return "delta"
    if t in DONE_TYPES:
        return "done"
    if t == "error":
        return "error"
    return OTHER


StreamEventModel = Annotated[
    Annotated[LifecycleEvent, Tag("lifecycle")]
    | Annotated[OutputItemEvent, Tag("item")]
    | Annotated[ContentPartEvent, Tag("part")]
    | Annotated[DeltaEvent, Tag("delta")]
    | Annotated[DoneEvent, Tag("done")]
    | Annotated[ErrorEvent, Tag("error")]
    | Annotated[OtherEvent, Tag(OTHER)],
    Discriminator(_event_tag),
]

EVENT_ADAPTER: TypeAdapter[StreamEventModel] = TypeAdapter(StreamEventModel)
REQUEST_ADAPTER: TypeAdapter[ResponsesRequest] = TypeAdapter(ResponsesRequest)
RESPONSE_ADAPTER: TypeAdapter[ResponseObject] = TypeAdapter(ResponseObject)

#: output item types the codec maps; everything else is a provider-side tool call, dropped and named
MAPPED_ITEM_TYPES = frozenset({"message", "reasoning", "function_call", "custom_tool_call"})

#: Responses builtin (hosted) tool types, carried only to a Responses upstream
BUILTIN_TOOL_TYPES = frozenset(
    {
        "web_search",
        "web_search_preview",
        "web_search_2025_08_26",
        "web_search_preview_2025_03_11",
        "file_search",
        "code_interpreter",
        "computer_use_preview",
        "computer_use",
        "image_generation",
        "mcp",
        "local_shell",
        "shell",
        "apply_patch",
        "tool_search",
    }
)
