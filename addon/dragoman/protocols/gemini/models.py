"""Gemini ``generateContent`` wire models: the request, the whole response and the error body.

A ``Part`` is a union keyed by which data field it holds (``text``, ``inlineData``, ``fileData``,
``functionCall``, ``functionResponse``, ``executableCode``, ``codeExecutionResult``; anything else is
``OtherPart``, kept with its raw fields), each with ``thought`` / ``thoughtSignature``. Field names are the
API's snake_case with camelCase aliases, so both spellings validate (Google's JSON parser takes both); unknown
fields are allowed and kept (``WireModel``), so hosted tools (``googleSearch``, ``codeExecution``, ...) are a
``Tool``'s extra fields under the key the client used. The adapters are built once at import.

Requests and whole responses are validated (``REQUEST_ADAPTER``, ``RESPONSE_ADAPTER``, ``ERROR_ADAPTER``;
``describe`` names the failing field by its wire path). Stream events are NOT: ``GeminiStreamDecoder`` parses
each event once with ``orjson.loads`` and reads the dicts, checking the types it reads. Measured on the bench's
Gemini events (CPU µs per event): ``orjson.loads`` 1.4, ``RESPONSE_ADAPTER.validate_json`` 6.7,
``model_construct`` on orjson's dict 6.4, ``validate_python`` on it 8.6: a model on the hot path would cost more
than the whole translation budget (5x the orjson floor).
"""

from __future__ import annotations

from typing import Annotated
from typing import Any

from pydantic import BeforeValidator
from pydantic import Discriminator
from pydantic import Field
from pydantic import Tag
from pydantic import TypeAdapter
from pydantic import ValidationError

from dragoman.protocols._wire import WireModel

#: the Part variants by the (camelCase, snake_case) key that selects them, in the order they are looked for
_PART_KEYS = (
    ("functionCall", "function_call"),
    ("functionResponse", "function_response"),
    ("text", "text"),
    ("inlineData", "inline_data"),
    ("fileData", "file_data"),
    ("executableCode", "executable_code"),
    ("codeExecutionResult", "code_execution_result"),
)
_TAG = "~"  # tag names start with it, so ``describe`` can leave them out of a field path
OTHER = _TAG + "other"


def _pick_part(value: Any) -> str:
    if isinstance(value, dict):
        for camel, snake in _PART_KEYS:
            if camel in value or snake in value:
                return _TAG + camel
    return OTHER  # not an object: OtherPart says so


def _alias(name: str) -> Any:
    return Field(default=None, alias=name)


# ---------------------------------------------------------------- parts


class Blob(WireModel):
    mime_type: str | None = _alias("mimeType")
    data: str | None = None


class FileData(WireModel):
    mime_type: str | None = _alias("mimeType")
    file_uri: str = Field(alias="fileUri")


class FunctionCall(WireModel):
    id: str | None = None
    name: str | None = None
    args: dict[str, Any] | None = None
    #: streamed arguments (``streamFunctionCallArguments``)
    partial_args: list[dict[str, Any]] | None = _alias("partialArgs")
    will_continue: bool | None = _alias("willContinue")


class ResponsePart(WireModel):
    inline_data: Blob | None = _alias("inlineData")
    file_data: FileData | None = _alias("fileData")


class FunctionResponse(WireModel):
    id: str | None = None
    name: str | None = None
    response: Any = None  # a Struct in the API: ``{"output": ...}`` / ``{"error": ...}`` by convention
    parts: list[ResponsePart] | None = None
    will_continue: bool | None = _alias("willContinue")
    scheduling: str | None = None


class ExecutableCode(WireModel):
    language: str | None = None
    code: str | None = None


class CodeExecutionResult(WireModel):
    outcome: str | None = None
    output: str | None = None


class PartBase(WireModel):
    thought: bool | None = None
    thought_signature: str | None = _alias("thoughtSignature")


class TextPart(PartBase):
    text: str


class InlineDataPart(PartBase):
    inline_data: Blob = Field(alias="inlineData")


class FileDataPart(PartBase):
    file_data: FileData = Field(alias="fileData")


class FunctionCallPart(PartBase):
    function_call: FunctionCall = Field(alias="functionCall")


class FunctionResponsePart(PartBase):
    function_response: FunctionResponse = Field(alias="functionResponse")


class ExecutableCodePart(PartBase):
    executable_code: ExecutableCode = Field(alias="executableCode")


class CodeExecutionResultPart(PartBase):
    code_execution_result: CodeExecutionResult = Field(alias="codeExecutionResult")


class OtherPart(PartBase):
    """A part with none of the known data fields (a bare ``thoughtSignature``, ``videoMetadata`` alone, ...)."""


Part = Annotated[
    Annotated[FunctionCallPart, Tag(_TAG + "functionCall")]
    | Annotated[FunctionResponsePart, Tag(_TAG + "functionResponse")]
    | Annotated[TextPart, Tag(_TAG + "text")]
    | Annotated[InlineDataPart, Tag(_TAG + "inlineData")]
    | Annotated[FileDataPart, Tag(_TAG + "fileData")]
    | Annotated[ExecutableCodePart, Tag(_TAG + "executableCode")]
    | Annotated[CodeExecutionResultPart, Tag(_TAG + "codeExecutionResult")]
    | Annotated[OtherPart, Tag(OTHER)],
    Discriminator(_pick_part),
]


class Content(WireModel):
    role: str | None = None
    parts: list[Part] = Field(default_factory=list)


def _listed(value: Any) -> Any:
    return [value] if isinstance(value, dict) else value  # one Content object for the list (the SDKs allow it)


# ---------------------------------------------------------------- request


class FunctionDeclaration(WireModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    parameters_json_schema: Any = _alias("parametersJsonSchema")
    response: dict[str, Any] | None = None
    response_json_schema: Any = _alias("responseJsonSchema")
    behavior: str | None = None


class Tool(WireModel):
    """``functionDeclarations``; every other key (``googleSearch``, ``codeExecution``, ``urlContext``, ...) is a
    hosted tool, kept in ``model_extra`` under the client's own key."""

    function_declarations: list[FunctionDeclaration] | None = _alias("functionDeclarations")


class FunctionCallingConfig(WireModel):
    mode: str | None = None
    allowed_function_names: list[str] | None = _alias("allowedFunctionNames")


class ToolConfig(WireModel):
    function_calling_config: FunctionCallingConfig | None = _alias("functionCallingConfig")


class ThinkingConfig(WireModel):
    include_thoughts: bool | None = _alias("includeThoughts")
    thinking_budget: int | None = _alias("thinkingBudget")
    thinking_level: str | None = _alias("thinkingLevel")


Number = int | float  # an int stays an int (the encoders write back what the client sent)


class GenerationConfig(WireModel):
    temperature: Number | None = None
    top_p: Number | None = _alias("topP")
    top_k: Number | None = _alias("topK")
    max_output_tokens: int | None = _alias("maxOutputTokens")
    stop_sequences: list[str] | None = _alias("stopSequences")
    candidate_count: int | None = _alias("candidateCount")
    response_mime_type: str | None = _alias("responseMimeType")
    response_schema: Any = _alias("responseSchema")
    response_json_schema: Any = _alias("responseJsonSchema")
    thinking_config: ThinkingConfig | None = _alias("thinkingConfig")
    # carried by no IR field: named in ``dropped`` when set
    presence_penalty: Any = _alias("presencePenalty")
    frequency_penalty: Any = _alias("frequencyPenalty")
    seed: Any = None
    response_logprobs: Any = _alias("responseLogprobs")
    logprobs: Any = None
    response_modalities: Any = _alias("responseModalities")
    speech_config: Any = _alias("speechConfig")
    media_resolution: Any = _alias("mediaResolution")
    image_config: Any = _alias("imageConfig")


#: GenerationConfig fields the IR does not carry, by their wire (camelCase) name
GEN_DROPPED = tuple(
    (f, info.alias or f)
    for f, info in GenerationConfig.model_fields.items()
    if f
    in (
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "response_logprobs",
        "logprobs",
        "response_modalities",
        "speech_config",
        "media_resolution",
        "image_config",
    )
)


class GenerateContentRequest(WireModel):
    model: str | None = None
    contents: Annotated[list[Content], BeforeValidator(_listed)]
    system_instruction: str | Content | None = _alias("systemInstruction")
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = _alias("toolConfig")
    generation_config: GenerationConfig | None = _alias("generationConfig")
    safety_settings: Any = _alias("safetySettings")
    cached_content: Any = _alias("cachedContent")
    labels: Any = None


#: request fields the IR does not carry, by their wire name
REQUEST_DROPPED = (("safety_settings", "safetySettings"), ("cached_content", "cachedContent"), ("labels", "labels"))


# ---------------------------------------------------------------- whole responses


class SafetyRating(WireModel):
    category: str | None = None
    probability: str | None = None
    blocked: bool | None = None


class CitationMetadata(WireModel):
    citation_sources: list[dict[str, Any]] | None = _alias("citationSources")


class Candidate(WireModel):
    content: Content | None = None
    finish_reason: str | None = _alias("finishReason")
    finish_message: str | None = _alias("finishMessage")
    index: int | None = None
    safety_ratings: list[SafetyRating] | None = _alias("safetyRatings")
    citation_metadata: CitationMetadata | None = _alias("citationMetadata")
    #: read by ``search`` as the dict it is (queries, chunks, supports)
    grounding_metadata: dict[str, Any] | None = _alias("groundingMetadata")


class PromptFeedback(WireModel):
    block_reason: str | None = _alias("blockReason")
    block_reason_message: str | None = _alias("blockReasonMessage")
    safety_ratings: list[SafetyRating] | None = _alias("safetyRatings")


class UsageMetadata(WireModel):
    prompt_token_count: int | None = _alias("promptTokenCount")
    cached_content_token_count: int | None = _alias("cachedContentTokenCount")
    candidates_token_count: int | None = _alias("candidatesTokenCount")
    tool_use_prompt_token_count: int | None = _alias("toolUsePromptTokenCount")
    thoughts_token_count: int | None = _alias("thoughtsTokenCount")
    total_token_count: int | None = _alias("totalTokenCount")


class GenerateContentResponse(WireModel):
    candidates: list[Candidate] | None = None
    prompt_feedback: PromptFeedback | None = _alias("promptFeedback")
    usage_metadata: UsageMetadata | None = _alias("usageMetadata")
    model_version: str | None = _alias("modelVersion")
    response_id: str | None = _alias("responseId")


# ---------------------------------------------------------------- errors


class Status(WireModel):
    code: int | None = None
    message: str | None = None
    status: str | None = None
    details: list[Any] | None = None


class ErrorBody(WireModel):
    error: Status


REQUEST_ADAPTER: TypeAdapter[GenerateContentRequest] = TypeAdapter(GenerateContentRequest)
RESPONSE_ADAPTER: TypeAdapter[GenerateContentResponse] = TypeAdapter(GenerateContentResponse)
ERROR_ADAPTER: TypeAdapter[ErrorBody] = TypeAdapter(ErrorBody)


_PART_NAMES: dict[type, str] = {
    ExecutableCodePart: "executableCode",
    CodeExecutionResultPart: "codeExecutionResult",
    InlineDataPart: "inlineData",
    FileDataPart: "fileData",
    TextPart: "text",
    FunctionCallPart: "functionCall",
    FunctionResponsePart: "functionResponse",
}


def part_name(p: PartBase) -> str:
    """A part's wire name when it is not carried: its data field, else its first unknown field, else ``?``."""
    name = _PART_NAMES.get(type(p))
    if name is not None:
        return name
    if p.model_extra:
        return str(next(iter(p.model_extra)))
    if p.thought_signature is not None:
        return "thoughtSignature"
    return "thought" if p.thought is not None else "?"


def describe(e: ValidationError, limit: int = 3) -> str:
    """The failing fields by their wire path (``contents[0].parts[1].functionCall.name``) and what was wrong."""
    out = []
    for err in e.errors()[:limit]:
        path = ""
        for x in err.get("loc", ()):
            if isinstance(x, int):
                path += f"[{x}]"
            elif not str(x).startswith(_TAG):
                path += f".{x}" if path else str(x)
        out.append(f"{path or '(root)'}: {err.get('msg')}")
    more = len(e.errors()) - limit
    if more > 0:
        out.append(f"and {more} more")
    return "; ".join(out)
