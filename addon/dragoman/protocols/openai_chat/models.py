"""OpenAI Chat Completions wire models.

Requests and whole responses are validated with pydantic (``REQUEST_ADAPTER``, ``COMPLETION_ADAPTER``)
so a malformed client request is reported with field paths. Stream chunks are NOT parsed with
pydantic on the hot path: ``stream_decode.ChatStreamDecoder`` reads them with ``orjson`` and plain dict
access, which measured ~4x cheaper per chunk than ``CHUNK_ADAPTER.validate_json`` (see
``tests/protocols/openai_chat/test_models.py::test_chunk_parse_cost``). ``ChatCompletionChunk`` and
``CHUNK_ADAPTER`` document the chunk shape and are used by tests.
"""

from __future__ import annotations

import logging
from typing import Annotated
from typing import Any
from typing import Literal

from pydantic import Field
from pydantic import TypeAdapter

from dragoman.protocols._wire import WireModel

logger = logging.getLogger(__name__)

# Content parts stay as dicts (many vendor variants); the decoder checks each ``type``.
Content = str | list[dict[str, Any]] | None


class FunctionCall(WireModel):
    name: str | None = None
    arguments: str | None = None


class CustomCall(WireModel):
    name: str
    input: str = ""


class ToolCall(WireModel):
    id: str | None = None
    type: str = "function"
    function: FunctionCall | None = None
    custom: CustomCall | None = None


class SystemMessage(WireModel):
    role: Literal["system"]
    content: Content = None
    name: str | None = None


class DeveloperMessage(WireModel):
    role: Literal["developer"]
    content: Content = None
    name: str | None = None


class UserMessage(WireModel):
    role: Literal["user"]
    content: Content = None
    name: str | None = None


class AssistantMessage(WireModel):
    role: Literal["assistant"]
    content: Content = None
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None
    function_call: FunctionCall | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    #: OpenRouter's reasoning entries (``reasoning.text`` / ``.summary`` / ``.encrypted``), kept as they are
    reasoning_details: list[Any] | None = None
    name: str | None = None


class ToolMessage(WireModel):
    role: Literal["tool"]
    tool_call_id: str
    content: Content = None


class FunctionMessage(WireModel):
    role: Literal["function"]
    name: str
    content: Content = None


ChatMessage = Annotated[
    SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage | FunctionMessage,
    Field(discriminator="role"),
]


class FunctionDef(WireModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class CustomDef(WireModel):
    name: str
    description: str | None = None
    format: dict[str, Any] | None = None


class ChatTool(WireModel):
    type: str = "function"
    function: FunctionDef | None = None
    custom: CustomDef | None = None


class StreamOptions(WireModel):
    include_usage: bool | None = None


class ChatRequest(WireModel):
    model: str
    messages: list[ChatMessage]
    tools: list[ChatTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    functions: list[FunctionDef] | None = None
    function_call: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: str | list[str] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = None
    reasoning_effort: str | None = None
    reasoning: dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    n: int | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None


#: Top-level request keys the decoder maps into the IR; every other key is named in ``dropped``.
KNOWN_REQUEST_KEYS = frozenset(ChatRequest.model_fields)

REQUEST_ADAPTER: TypeAdapter[ChatRequest] = TypeAdapter(ChatRequest)


# -- whole responses


class ResponseMessage(WireModel):
    role: str | None = "assistant"
    content: Content = None
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None
    function_call: FunctionCall | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    #: OpenRouter's reasoning entries (``reasoning.text`` / ``.summary`` / ``.encrypted``), kept as they are
    reasoning_details: list[Any] | None = None


class Choice(WireModel):
    index: int = 0
    message: ResponseMessage = Field(default_factory=ResponseMessage)
    finish_reason: str | None = None


class ChatCompletion(WireModel):
    id: str = ""
    object: str | None = None
    created: int | None = None
    model: str = ""
    choices: list[Choice] = Field(default_factory=list)
    usage: dict[str, Any] | None = None


COMPLETION_ADAPTER: TypeAdapter[ChatCompletion] = TypeAdapter(ChatCompletion)


# -- stream chunks (documentation and tests; the decoder reads dicts)


class ChunkToolCall(WireModel):
    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: FunctionCall | None = None


class ChunkDelta(WireModel):
    role: str | None = None
    content: str | list[dict[str, Any]] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    #: OpenRouter's reasoning entries (``reasoning.text`` / ``.summary`` / ``.encrypted``), kept as they are
    reasoning_details: list[Any] | None = None
    refusal: str | None = None
    tool_calls: list[ChunkToolCall] | None = None


class ChunkChoice(WireModel):
    index: int = 0
    delta: ChunkDelta = Field(default_factory=ChunkDelta)
    finish_reason: str | None = None


class ChatCompletionChunk(WireModel):
    id: str = ""
    object: str | None = None
    created: int | None = None
    model: str = ""
    choices: list[ChunkChoice] = Field(default_factory=list)
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


CHUNK_ADAPTER: TypeAdapter[ChatCompletionChunk] = TypeAdapter(ChatCompletionChunk)
