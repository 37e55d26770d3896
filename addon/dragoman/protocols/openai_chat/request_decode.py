"""Chat Completions request -> IR: messages, tools, tool choice, reasoning and response format.

History comes in every shape third-party clients send: system/developer messages (leading ones become
the system prompt, later ones stay in place), user content parts (images and files as ``data:`` URLs),
assistant ``reasoning_content``/``reasoning``/``reasoning_details``/Mistral ``thinking`` parts, refusals, tool calls (custom
tools travel as function calls with one ``input`` argument; Gemini's thought signature on a call, as
``extra_content``, is carried as the response decoders carry it: see ``gemini``), ``tool`` results and the legacy
``function_call``/``function`` pair (synthesized ids, answered in order by name).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any

from pydantic import ValidationError

from dragoman.errors import ClientRequestError
from dragoman.ir.common import Dropped
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import Part
from dragoman.ir.request import Reasoning
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import Request
from dragoman.ir.request import ResponseFormat
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolChoice
from dragoman.ir.request import ToolResultPart
from dragoman.protocols._custom_args import unwrap_custom_args
from dragoman.protocols._data_url import split_data_url
from dragoman.protocols._wire import describe_validation_error
from dragoman.protocols.openai_chat import gemini
from dragoman.protocols.openai_chat import models as m
from dragoman.protocols.openai_chat import reasoning_details
from dragoman.protocols.openai_chat import search
from dragoman.protocols.openai_chat.response import mistral_thinking

_EFFORTS = {"minimal", "low", "medium", "high", "xhigh"}
_TEXT_TYPES = ("text", "input_text", "output_text")


def decode_request(body: dict[str, Any]) -> Request:
    try:
        wire = m.REQUEST_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise ClientRequestError(f"invalid Chat Completions request: {describe_validation_error(e)}") from e
    req = Request(model=wire.model, n=wire.n)
    req.web_search = search.spec_from_body(body)
    for key in body:
        if key not in m.KNOWN_REQUEST_KEYS and not (req.web_search is not None and key in _SEARCH_KEYS):
            req.dropped.add(key)
    custom_names = _decode_tools(wire, req)
    req.tools = [t for t in req.tools if not (t.kind == "builtin" and t.name == search.OPENROUTER_TOOL)]
    req.tool_choice = _tool_choice(wire.tool_choice if wire.tool_choice is not None else wire.function_call)
    req.parallel_tool_calls = wire.parallel_tool_calls
    req.max_tokens = wire.max_completion_tokens if wire.max_completion_tokens is not None else wire.max_tokens
    req.temperature = wire.temperature
    req.top_p = wire.top_p
    if isinstance(wire.stop, str):
        req.stop = [wire.stop]
    elif wire.stop:
        req.stop = list(wire.stop)
    req.stream = bool(wire.stream)
    if wire.stream_options is not None and wire.stream_options.include_usage is not None:
        req.include_usage = wire.stream_options.include_usage
    req.user = wire.user
    req.prompt_cache_key = wire.prompt_cache_key or None
    req.cache_retention = wire.prompt_cache_retention or None
    req.reasoning = _reasoning(wire.reasoning_effort, wire.reasoning)
    req.response_format = _response_format(wire.response_format)
    _decode_messages(wire.messages, req, custom_names)
    return req


# ---------------------------------------------------------------- tools and options

#: request keys a hosted web search is read from (``search.spec_from_body``)
_SEARCH_KEYS = frozenset({"web_search_options", "plugins"})


def _decode_tools(wire: m.ChatRequest, req: Request) -> set[str]:
    """``tools`` and legacy ``functions`` into ``req.tools``; returns the names of the custom tools."""
    custom_names: set[str] = set()
    for i, t in enumerate(wire.tools or []):
        if t.type == "function":
            if t.function is None:
                raise ClientRequestError(f"tools[{i}].function: required for a function tool")
            f = t.function
            req.tools.append(Tool(name=f.name, description=f.description, parameters=f.parameters, strict=f.strict))
        elif t.type == "custom":
            if t.custom is None:
                raise ClientRequestError(f"tools[{i}].custom: required for a custom tool")
            c = t.custom
            req.tools.append(Tool(name=c.name, description=c.description, kind="custom", format=c.format))
            custom_names.add(c.name)
        else:
            req.tools.append(Tool(name=t.type, kind="builtin", raw=t.model_dump(exclude_none=True)))
        req.tools[-1].source = f"tools[{i}]"
    for f in wire.functions or []:
        req.tools.append(Tool(name=f.name, description=f.description, parameters=f.parameters, strict=f.strict))
    return custom_names


def _tool_choice(tc: str | dict[str, Any] | None) -> ToolChoice | None:
    if tc is None:
        return None
    if isinstance(tc, str):
        if tc == "auto":
            return ToolChoice("auto")
        if tc == "none":
            return ToolChoice("none")
        if tc == "required":
            return ToolChoice("any")
        raise ClientRequestError(f"tool_choice: unknown value {tc!r} (auto, none, required or an object)")
    t = tc.get("type")
    if t == "function" or (t is None and "name" in tc):
        f = tc.get("function")
        name = (f if isinstance(f, dict) else tc).get("name")
        if not isinstance(name, str):
            raise ClientRequestError("tool_choice.function.name: required")
        return ToolChoice("tool", name)
    if t == "custom" and isinstance(tc.get("custom"), dict):
        return ToolChoice("tool", tc["custom"].get("name"))
    if t == "allowed_tools":
        mode = (tc.get("allowed_tools") or {}).get("mode")
        return ToolChoice("any" if mode == "required" else "auto")
    raise ClientRequestError(f"tool_choice.type: unknown value {t!r}")


def _reasoning(effort: str | None, openrouter: dict[str, Any] | None) -> Reasoning | None:
    if effort is not None:
        if effort == "none":
            return Reasoning(enabled=False)
        return Reasoning(enabled=True, effort=effort)
    if openrouter:  # OpenRouter's {"effort", "max_tokens", "enabled", "exclude"} (claude-code-router sends it)
        eff = openrouter.get("effort")
        budget = openrouter.get("max_tokens")
        if isinstance(eff, str) and eff in _EFFORTS:
            return Reasoning(enabled=True, effort=eff)
        if isinstance(budget, int):
            return Reasoning(enabled=True, budget_tokens=budget)
        if openrouter.get("enabled") is not None:
            return Reasoning(enabled=bool(openrouter["enabled"]))
    return None


def _response_format(rf: dict[str, Any] | None) -> ResponseFormat | None:
    if rf is None:
        return None
    t = rf.get("type")
    if t == "json_schema":
        js = rf.get("json_schema")
        if not isinstance(js, dict):
            raise ClientRequestError("response_format.json_schema: required for type json_schema")
        return ResponseFormat(type="json_schema", name=js.get("name"), schema=js.get("schema"), strict=js.get("strict"))
    if t in ("json_object", "text"):
        return ResponseFormat(type=t)
    raise ClientRequestError(f"response_format.type: unknown value {t!r}")


# ---------------------------------------------------------------- content parts


def _text_of(content: m.Content, where: str) -> str:
    """System/developer/tool content (string or text parts) -> one string."""
    texts = [p.text for p in _text_parts(content, where)]
    return "".join(texts) if len(texts) <= 1 else "\n".join(texts)


def _text_parts(content: m.Content, where: str) -> list[TextPart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    out = []
    for i, p in enumerate(content):
        t = p.get("type")
        if t in _TEXT_TYPES and isinstance(p.get("text"), str):
            out.append(TextPart(p["text"]))
        else:
            raise ClientRequestError(f"{where}.content[{i}]: unsupported content part type {t!r} here")
    return out


def _image_part(p: dict[str, Any], loc: str) -> ImagePart:
    iu = p.get("image_url")
    url = iu.get("url") if isinstance(iu, dict) else iu
    if not isinstance(url, str):
        raise ClientRequestError(f"{loc}.image_url.url: must be a string")
    detail = iu.get("detail") if isinstance(iu, dict) else None
    split = split_data_url(url)
    if split is not None:
        return ImagePart(data=split[1], media_type=split[0], detail=detail)
    return ImagePart(url=url, detail=detail)


def _file_part(p: dict[str, Any], loc: str) -> FilePart:
    f = p.get("file")
    if not isinstance(f, dict):
        raise ClientRequestError(f"{loc}.file: must be an object")
    fd = f.get("file_data")
    part = FilePart(filename=f.get("filename"), file_id=f.get("file_id"))
    if isinstance(fd, str):
        split = split_data_url(fd)
        if split is not None:
            part.media_type, part.data = split
        else:
            part.data = fd
    return part


def _user_parts(content: m.Content, where: str, dropped: Dropped) -> list[TextPart | ImagePart | FilePart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    out: list[TextPart | ImagePart | FilePart] = []
    for i, p in enumerate(content):
        t = p.get("type")
        loc = f"{where}.content[{i}]"
        if t == "text":
            if not isinstance(p.get("text"), str):
                raise ClientRequestError(f"{loc}.text: must be a string")
            out.append(TextPart(p["text"]))
        elif t == "image_url":
            out.append(_image_part(p, loc))
        elif t == "file":
            out.append(_file_part(p, loc))
        elif t == "input_audio":
            dropped.add(f"content[{i}].input_audio")
        else:
            raise ClientRequestError(f"{loc}: unsupported content part type {t!r}")
    return out


def _tool_call_part(tc: m.ToolCall, where: str) -> ToolCallPart:
    if tc.type == "custom" or tc.custom is not None:
        if tc.custom is None:
            raise ClientRequestError(f"{where}.custom: required for a custom tool call")
        return ToolCallPart(id=tc.id or "", name=tc.custom.name, arguments=tc.custom.input, kind="custom")
    if tc.function is None or not tc.function.name:
        raise ClientRequestError(f"{where}.function.name: required")
    if not tc.id:
        raise ClientRequestError(f"{where}.id: required")
    return ToolCallPart(id=tc.id, name=tc.function.name, arguments=tc.function.arguments or "{}")


# ---------------------------------------------------------------- messages


@dataclass(slots=True)
class _History:
    """What decoding the message list carries from one message to the next."""

    req: Request
    custom_names: set[str]
    leading: bool = True  # still in the leading system/developer messages
    #: legacy ``function_call``: synthesized ids waiting for their ``function`` message, by name
    legacy_pending: dict[str, list[str]] = field(default_factory=dict)
    legacy_n: int = 0


def _decode_messages(msgs: list[Any], req: Request, custom_names: set[str]) -> None:
    h = _History(req, custom_names)
    for i, msg in enumerate(msgs):
        where = f"messages[{i}]"
        req.dropped.at(where)
        if isinstance(msg, (m.SystemMessage, m.DeveloperMessage)):
            _system_message(msg, where, h)
            continue
        h.leading = False
        if isinstance(msg, m.UserMessage):
            req.messages.append(Message("user", list(_user_parts(msg.content, where, req.dropped)), source=where))
        elif isinstance(msg, m.AssistantMessage):
            req.messages.append(Message("assistant", _assistant_parts(msg, where, h), source=where))
        elif isinstance(msg, (m.ToolMessage, m.FunctionMessage)):
            _tool_result(msg, where, h)
        else:  # pragma: no cover - the discriminated union rejects other roles
            raise ClientRequestError(f"{where}.role: unknown role {msg.role!r}")
    req.dropped.leave()
    if custom_names:
        _mark_custom_results(req.messages)


def _system_message(msg: m.SystemMessage | m.DeveloperMessage, where: str, h: _History) -> None:
    text = _text_of(msg.content, where)
    if h.leading:
        if text:
            h.req.system.append(TextPart(text))
        return
    h.req.messages.append(Message("system", [TextPart(text)], source_role=msg.role, source=where))


def _assistant_parts(msg: m.AssistantMessage, where: str, h: _History) -> list[Part]:
    parts: list[Part] = []
    reasoning = msg.reasoning_content if msg.reasoning_content is not None else msg.reasoning
    thinking = reasoning_details.thinking_part(msg.reasoning_details, reasoning)
    if thinking is not None:
        parts.append(thinking)
    if isinstance(msg.content, str):
        if msg.content:
            parts.append(TextPart(msg.content))
    elif msg.content:
        for j, p in enumerate(msg.content):
            t = p.get("type")
            if t == "text" and isinstance(p.get("text"), str):
                parts.append(TextPart(p["text"]))
            elif t == "refusal" and isinstance(p.get("refusal"), str):
                parts.append(RefusalPart(p["refusal"]))
            elif t == "thinking":
                parts.append(ThinkingPart(text=mistral_thinking(p.get("thinking"))))
            else:
                raise ClientRequestError(f"{where}.content[{j}]: unsupported content part type {t!r}")
    if msg.refusal:
        parts.append(RefusalPart(msg.refusal))
    calls: list[ToolCallPart] = []
    for j, tc in enumerate(msg.tool_calls or []):
        part = _tool_call_part(tc, f"{where}.tool_calls[{j}]")
        if part.kind == "function" and part.name in h.custom_names:
            part.kind = "custom"
            part.arguments = unwrap_custom_args(part.arguments)
        calls.append(part)
    parts.extend(gemini.sign_parts(parts, msg.tool_calls, calls))  # Gemini's signatures the client kept
    fc = msg.function_call
    if fc is not None and fc.name:
        h.legacy_n += 1
        cid = f"call_legacy_{h.legacy_n}"
        h.legacy_pending.setdefault(fc.name, []).append(cid)
        parts.append(ToolCallPart(id=cid, name=fc.name, arguments=fc.arguments or "{}"))
    return parts


def _tool_result(msg: m.ToolMessage | m.FunctionMessage, where: str, h: _History) -> None:
    """A ``tool`` (or legacy ``function``) message joins the user message of results before it."""
    out = h.req.messages
    if isinstance(msg, m.ToolMessage):
        cid = msg.tool_call_id
    else:
        ids = h.legacy_pending.get(msg.name) or []
        if not ids:
            h.req.dropped.add("function")
            return
        cid = ids.pop(0)
    result = ToolResultPart(tool_call_id=cid, content=_user_parts(msg.content, where, h.req.dropped))
    prev = out[-1] if out else None
    if (
        prev is not None
        and prev.role == "user"
        and prev.parts
        and all(isinstance(p, ToolResultPart) for p in prev.parts)
    ):
        prev.parts.append(result)
    else:
        out.append(Message("user", [result], source=where))


def _mark_custom_results(messages: list[Message]) -> None:
    custom_ids = {p.id for msg in messages for p in msg.parts if isinstance(p, ToolCallPart) and p.kind == "custom"}
    for msg in messages:
        for p in msg.parts:
            if isinstance(p, ToolResultPart) and p.tool_call_id in custom_ids:
                p.kind = "custom"
