"""Responses client request -> IR: the envelope, tools (namespaces flattened), input items, options.
Its content-part and reasoning-item readers also serve ``response_decode`` (an output item is an input item)."""

from __future__ import annotations

from typing import Any
from typing import Literal

from pydantic import ValidationError

from dragoman.errors import ClientRequestError
from dragoman.ir import carry
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
from dragoman.protocols._data_url import split_data_url
from dragoman.protocols._wire import describe_validation_error
from dragoman.protocols.openai_responses import search
from dragoman.protocols.openai_responses.models import REQUEST_ADAPTER
from dragoman.protocols.openai_responses.models import ResponsesRequest

#: the namespace whose tools Codex calls by their bare name (no ``namespace`` field on the call)
DEFAULT_NAMESPACE = "functions"
#: ``req.extra`` keys this codec sets (read back by the Responses encoder toward the client)
EXTRA_ECHO = "responses_echo"
EXTRA_NAMESPACES = "responses_tool_namespaces"
#: the ``previous_response_id`` a request still carries (not expanded from the response store)
EXTRA_PREVIOUS = "responses_previous_response_id"

_HANDLED_KEYS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "max_output_tokens",
        "temperature",
        "top_p",
        "text",
        "stream",
        "user",
        "safety_identifier",
        "previous_response_id",
        "prompt_cache_key",
        "prompt_cache_retention",
    }
)
#: request fields a Responses object echoes back (as the client sent them)
_ECHO_KEYS = tuple(
    "instructions tools tool_choice parallel_tool_calls temperature top_p max_output_tokens reasoning text user".split()
)
#: a tuple, not a set: ``in`` compares, so an unhashable ``type`` value is dropped by name, never a TypeError
_TEXT_PART_TYPES = ("input_text", "output_text", "text", "summary_text", "reasoning_text")

Role = Literal["system", "user", "assistant"]
#: (namespace or None, tool dict), in the order the client listed them
FlatTools = list[tuple[str | None, dict[str, Any]]]
#: IR tool name -> (namespace, name as the client knows it)
Namespaces = dict[str, tuple[str, str]]


def decode_request(body: dict[str, Any]) -> Request:
    try:
        w = REQUEST_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise ClientRequestError(f"invalid Responses request: {describe_validation_error(e)}") from e
    req = Request(model=w.model)
    if w.previous_response_id:
        # toward a Responses upstream it passes as sent; any other upstream needs the response store
        # (``dragoman.state``), which expands it into the whole history before this decoder runs
        req.extra[EXTRA_PREVIOUS] = w.previous_response_id
    dropped = req.dropped
    for key in body:
        if key not in _HANDLED_KEYS:
            dropped.add(key)
    _decode_instructions(w.instructions, req)
    namespaces = _decode_tools(_all_tools(w), req)
    web = next((t for t in req.tools if t.kind == "builtin" and search.is_search_tool(t.raw)), None)
    if web is not None:
        req.tools.remove(web)
        req.web_search = search.spec_from_tool(web.raw or {})
    if isinstance(w.input, str):
        req.messages.append(Message("user", [TextPart(w.input)]))
    else:
        _decode_input(w.input or [], req, namespaces)
    req.tool_choice = _decode_tool_choice(w.tool_choice, dropped)
    req.parallel_tool_calls = w.parallel_tool_calls
    req.max_tokens = w.max_output_tokens
    req.temperature = w.temperature
    req.top_p = w.top_p
    req.stream = bool(w.stream)
    req.user = w.safety_identifier or w.user
    req.prompt_cache_key, req.cache_retention = cache_fields(body)
    if w.reasoning is not None:
        req.reasoning = _decode_reasoning(w.reasoning, dropped)
    if w.text is not None:
        req.response_format = _decode_text(w.text, dropped)
    req.extra[EXTRA_ECHO] = {key: body[key] for key in _ECHO_KEYS if key in body}
    if namespaces:
        req.extra[EXTRA_NAMESPACES] = {ir: ns for ir, ns in namespaces.items() if ns[0] != DEFAULT_NAMESPACE}
    return req


def cache_fields(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """(``prompt_cache_key``, ``prompt_cache_retention``) of an OpenAI request (Chat or Responses), strings only."""
    key, retention = body.get("prompt_cache_key"), body.get("prompt_cache_retention")
    return (key if isinstance(key, str) and key else None), (
        retention if isinstance(retention, str) and retention else None
    )


def _decode_instructions(instructions: str | list[dict[str, Any]] | None, req: Request) -> None:
    if isinstance(instructions, str):
        if instructions:
            req.system.append(TextPart(instructions))
    elif isinstance(instructions, list):
        for item in instructions:
            for part in content_parts(item.get("content"), req.dropped):
                if isinstance(part, TextPart):
                    req.system.append(part)


def _decode_reasoning(reasoning: dict[str, Any], dropped: Dropped) -> Reasoning | None:
    effort = reasoning.get("effort")
    summary = reasoning.get("summary") or reasoning.get("generate_summary")
    for key in reasoning:
        if key not in ("effort", "summary", "generate_summary"):
            dropped.add(f"reasoning.{key}")
    if effort is None and summary is None:
        return None
    return Reasoning(enabled=effort != "none", effort=effort if effort != "none" else None, summary=summary)


def _decode_text(text: dict[str, Any], dropped: Dropped) -> ResponseFormat | None:
    fmt = text.get("format")
    out: ResponseFormat | None = None
    if isinstance(fmt, dict):
        ftype = fmt.get("type")
        if ftype == "json_schema":
            out = ResponseFormat("json_schema", fmt.get("name"), fmt.get("schema"), fmt.get("strict"))
        elif ftype == "json_object":
            out = ResponseFormat("json_object")
    for key in text:
        if key != "format":
            dropped.add(f"text.{key}")
    return out


# ---------------------------------------------------------------- tools


def _all_tools(w: ResponsesRequest) -> FlatTools:
    """Top-level tools, then tools delivered in-band (Codex "responses-lite": ``additional_tools`` items)."""
    flat: FlatTools = []
    _flatten_tools(w.tools or [], None, flat)
    if isinstance(w.input, list):
        for item in w.input:
            if isinstance(item, dict) and item.get("type") == "additional_tools":
                _flatten_tools(item.get("tools") or [], None, flat)
    return flat


def _flatten_tools(tools: list[Any], ns: str | None, out: FlatTools) -> None:
    for t in tools:
        if not isinstance(t, dict):
            raise ClientRequestError("tools: every tool must be an object")
        if t.get("type") == "namespace":
            _flatten_tools(t.get("tools") or [], t.get("name"), out)
        else:
            out.append((ns, t))


def _decode_tools(flat: FlatTools, req: Request) -> Namespaces:
    """Fills ``req.tools``; returns {IR name: (namespace, name)} for namespaced tools.

    A namespaced tool keeps its bare name unless another tool has it; then it becomes ``ns__name``.
    """
    counts: dict[str, int] = {}
    for _, t in flat:
        name = t.get("name")
        if isinstance(name, str):
            counts[name] = counts.get(name, 0) + 1
    namespaces: Namespaces = {}
    for ns, t in flat:
        req.tools.append(_decode_tool(ns, t, counts, namespaces))
    return namespaces


def _decode_tool(ns: str | None, t: dict[str, Any], counts: dict[str, int], namespaces: Namespaces) -> Tool:
    ttype = t.get("type")
    name = t.get("name")
    if ttype not in ("function", "custom"):
        return Tool(name=name if isinstance(name, str) and name else str(ttype), kind="builtin", raw=t)
    if not isinstance(name, str) or not name:
        raise ClientRequestError(f"tools: a {ttype} tool needs a name")
    ir_name = name
    if ns is not None:
        if counts.get(name, 0) > 1:
            ir_name = f"{ns}__{name}"
        namespaces[ir_name] = (ns, name)
    desc = t.get("description")
    if ttype == "function":
        return Tool(name=ir_name, description=desc, parameters=t.get("parameters"), strict=t.get("strict"))
    return Tool(name=ir_name, description=desc, kind="custom", format=t.get("format"))


def _decode_tool_choice(tc: str | dict[str, Any] | None, dropped: Dropped) -> ToolChoice | None:
    if tc is None:
        return None
    if isinstance(tc, str):
        if tc == "required":
            return ToolChoice("any")
        if tc == "none":
            return ToolChoice("none")
        return ToolChoice("auto")
    ttype = tc.get("type")
    if ttype in ("function", "custom") and isinstance(tc.get("name"), str):
        return ToolChoice("tool", tc["name"])
    dropped.add(f"tool_choice.{ttype}")
    return ToolChoice("auto")


# ---------------------------------------------------------------- content parts (shared with responses)


def _image_part(p: dict[str, Any]) -> ImagePart:
    url = p.get("image_url")
    if isinstance(url, dict):  # Chat-style {"url": ...} tolerated
        url = url.get("url")
    img = ImagePart(detail=p.get("detail"), file_id=p.get("file_id"))
    if isinstance(url, str):
        split = split_data_url(url)
        if split is not None:
            img.media_type, img.data = split
        else:
            img.url = url
    return img


def _file_part(p: dict[str, Any]) -> FilePart:
    f = FilePart(filename=p.get("filename"), file_id=p.get("file_id"), url=p.get("file_url"))
    data = p.get("file_data")
    if isinstance(data, str):
        split = split_data_url(data)
        if split is not None:
            f.media_type, f.data = split
        else:
            f.data = data
    return f


def content_parts(content: Any, dropped: Dropped) -> list[Part]:
    """A message's ``content`` (a string or a list of parts) -> IR parts; unknown part types dropped."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    if not isinstance(content, list):
        raise ClientRequestError("input: message content must be a string or a list of parts")
    out: list[Part] = []
    for j, p in enumerate(content):
        if not isinstance(p, dict):
            raise ClientRequestError("input: every content part must be an object")
        ptype = p.get("type")
        if ptype in _TEXT_PART_TYPES:
            cites = search.citations_from(p.get("annotations"), dropped) if p.get("annotations") else None
            out.append(TextPart(p.get("text") or "", cites))
        elif ptype == "input_image":
            out.append(_image_part(p))
        elif ptype == "input_file":
            out.append(_file_part(p))
        elif ptype == "refusal":
            out.append(RefusalPart(p.get("refusal") or ""))
        else:
            dropped.add(f"content[{j}].{ptype}")
    return out


def _tool_output(output: Any, dropped: Dropped) -> list[TextPart | ImagePart | FilePart]:
    if output is None:
        return []
    if isinstance(output, str):
        return [TextPart(output)]
    parts = content_parts(output, dropped)
    return [p for p in parts if isinstance(p, (TextPart, ImagePart, FilePart))]


def reasoning_part(item: dict[str, Any]) -> ThinkingPart:
    """A ``reasoning`` item -> ThinkingPart (an Anthropic thinking block carried in ``encrypted_content``
    comes back as it was)."""
    enc = item.get("encrypted_content")
    carried = carry.unwrap_anthropic(enc) if isinstance(enc, str) else None
    if carried is not None:
        sig = carried.get("sig")
        return ThinkingPart(
            text=carried.get("text") or "",
            signature=sig if isinstance(sig, str) else None,
            redacted_data=carried.get("redacted"),
        )
    summaries = [s.get("text") or "" for s in item.get("summary") or [] if isinstance(s, dict)]
    raw = [
        c.get("text") or ""
        for c in item.get("content") or []
        if isinstance(c, dict) and c.get("type") == "reasoning_text"
    ]
    if raw:
        return ThinkingPart(text="\n\n".join(raw), encrypted_content=enc, item_id=item.get("id"))
    return ThinkingPart(
        text="\n\n".join(summaries), encrypted_content=enc, item_id=item.get("id"), summary=bool(summaries)
    )


# ---------------------------------------------------------------- input items


def _decode_input(items: list[dict[str, Any]], req: Request, namespaces: Namespaces) -> None:
    d = _InputDecoder(req, namespaces)
    for n, item in enumerate(items):
        req.dropped.at(f"input[{n}]")
        if not isinstance(item, dict):
            raise ClientRequestError("input: every item must be an object")
        itype = item.get("type")
        if itype is None and "role" in item:
            itype = "message"
        if itype == "message":
            d.message(item)
        elif itype == "function_call" or itype == "custom_tool_call":
            d.tool_call(item, itype)
        elif itype in ("function_call_output", "custom_tool_call_output"):
            d.tool_output(item, itype)
        elif itype == "reasoning":
            d.add("assistant", [reasoning_part(item)])
        elif itype == search.CALL:
            d.add("assistant", [search.part_from_item(item)])
        elif itype == "additional_tools":
            continue  # its tools were read with the top-level tools
        else:
            req.dropped.add(str(itype))
    req.dropped.leave()


class _InputDecoder:
    """Appends input items to ``req``: consecutive items of one role merge into one IR message."""

    __slots__ = ("req", "reverse", "dropped")

    def __init__(self, req: Request, namespaces: Namespaces) -> None:
        self.req = req
        self.reverse = {v: k for k, v in namespaces.items()}
        self.dropped = req.dropped

    def add(self, role: Role, parts: list[Part], source_role: str | None = None) -> None:
        messages = self.req.messages
        if role == "system" and not messages:
            self.req.system.extend(p for p in parts if isinstance(p, TextPart))
            return
        if messages and messages[-1].role == role and messages[-1].source_role == source_role:
            messages[-1].parts.extend(parts)
        else:
            messages.append(Message(role, list(parts), source_role=source_role, source=self.dropped.place()))

    def message(self, item: dict[str, Any]) -> None:
        role = item.get("role")
        parts = content_parts(item.get("content"), self.dropped)
        if role in ("developer", "system"):
            self.add("system", parts, role)
        elif role == "user":
            self.add("user", parts)
        elif role == "assistant":
            self.add("assistant", parts)
        else:
            raise ClientRequestError(f"input: unknown message role {role!r}")

    def tool_call(self, item: dict[str, Any], itype: str) -> None:
        call_id = item.get("call_id") or item.get("id")
        if not call_id:
            raise ClientRequestError(f"input: {itype} needs a call_id")
        name = item.get("name") or ""
        ns = item.get("namespace")
        if isinstance(ns, str) and (ns, name) in self.reverse:
            name = self.reverse[(ns, name)]
        if itype == "function_call":
            part = ToolCallPart(id=call_id, name=name, arguments=item.get("arguments") or "{}", item_id=item.get("id"))
        else:
            part = ToolCallPart(
                id=call_id, name=name, arguments=item.get("input") or "", kind="custom", item_id=item.get("id")
            )
        self.add("assistant", [part])

    def tool_output(self, item: dict[str, Any], itype: str) -> None:
        call_id = item.get("call_id")
        if not call_id:
            raise ClientRequestError(f"input: {itype} needs a call_id")
        kind: Literal["function", "custom"] = "custom" if itype == "custom_tool_call_output" else "function"
        content = _tool_output(item.get("output"), self.dropped)
        self.add("user", [ToolResultPart(tool_call_id=call_id, content=content, kind=kind)])
