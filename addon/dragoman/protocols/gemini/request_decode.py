"""Gemini ``GenerateContentRequest`` -> IR request.

``contents`` (``user`` / ``model`` roles, ``function`` read as ``user``) with their ``parts``: text, ``thought``
text (thinking), ``inlineData`` / ``fileData`` (images; other media types are files), ``functionCall`` and
``functionResponse``. A call without an ``id`` gets one, and a response without a matching ``id`` is paired
with the earliest unanswered call of its name (Gemini CLI gives responses ids of its own). A part's
``thoughtSignature`` becomes the thinking part before it (``thoughts.client_thinking``).
``systemInstruction``, ``tools`` (``functionDeclarations``; hosted tools kept as builtin), ``toolConfig``,
``generationConfig`` (sampling, stop sequences, ``candidateCount``, structured output, ``thinkingConfig``).
The model and ``stream`` come from the URL: the caller sets them (``path_info``); a Code Assist request
(``{"model", "project", "request": {...}}``) is unwrapped here. The body is validated with the wire
models (``models.REQUEST_ADAPTER``): a malformed one is a ``ClientRequestError`` naming the field (Gemini's 400
``INVALID_ARGUMENT`` toward the client).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from pydantic import ValidationError

from dragoman.errors import ClientRequestError
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import Part
from dragoman.ir.request import Reasoning
from dragoman.ir.request import Request
from dragoman.ir.request import ResponseFormat
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolChoice
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.gemini import models as m
from dragoman.protocols.gemini import search
from dragoman.protocols.gemini import thoughts
from dragoman.protocols.gemini.schema import to_json_schema

_PATH = re.compile(r"/(?:v1|v1beta|v1alpha)(?:internal)?(?:/models/([^/:?]+))?:(\w+)")


def path_info(path: str) -> tuple[str | None, str | None]:
    """``/v1beta/models/{model}:{method}?...`` -> (model, method); (None, method) for ``/v1internal:{method}``."""
    m = _PATH.search(path.split("?", 1)[0])
    return (m.group(1), m.group(2)) if m else (None, None)


#: ``Request.extra`` keys a Gemini client's URL sets: the stream is a JSON array (no ``alt=sse``); the request came
#: wrapped for Code Assist (``v1internal``), whose answers are wrapped as ``{"response": ...}``
ARRAY = "gemini_array"
WRAPPED = "gemini_wrapped"


def apply_path(req: Request, path: str) -> None:
    """What a Gemini client's URL says: the model (unless the body named it), streaming, the stream's framing."""
    model, method = path_info(path)
    if model and not req.model:
        req.model = model.removeprefix("models/")
    req.stream = method == "streamGenerateContent"
    query = path.partition("?")[2]
    if req.stream and "alt=sse" not in query.split("&"):
        req.extra[ARRAY] = True
    if "/v1internal:" in path:
        req.extra[WRAPPED] = True


class _Calls:
    """Tool call ids of one request: made up where missing, matched to responses by id, else by name."""

    def __init__(self) -> None:
        self.n = 0
        self.open: list[tuple[str, str]] = []  # (id, name) not answered yet

    def call(self, fc: m.FunctionCall) -> str:
        cid = fc.id
        if not cid:
            cid = f"call_{self.n}"
            self.n += 1
        self.open.append((cid, fc.name or ""))
        return cid

    def answer(self, fr: m.FunctionResponse) -> str:
        rid, name = fr.id, fr.name or ""
        for i, (cid, _) in enumerate(self.open):
            if cid == rid:
                del self.open[i]
                return cid
        for i, (cid, cname) in enumerate(self.open):
            if cname == name:
                del self.open[i]
                return cid
        return rid or f"call_{name}"  # a response to no call in the history


def _media(d: m.Blob | m.FileData) -> ImagePart | FilePart:
    mime = d.mime_type
    if isinstance(d, m.FileData):
        if mime and mime.startswith("image/"):
            return ImagePart(url=d.file_uri, media_type=mime)
        return FilePart(url=d.file_uri, media_type=mime)
    if mime and mime.startswith("image/"):
        return ImagePart(data=d.data, media_type=mime)
    return FilePart(data=d.data, media_type=mime)


def _result(fr: m.FunctionResponse, cid: str, req: Request) -> ToolResultPart:
    resp = fr.response
    is_error = isinstance(resp, dict) and "error" in resp and "output" not in resp
    content: list[TextPart | ImagePart | FilePart] = []
    if isinstance(resp, dict) and len(resp) == 1 and isinstance(next(iter(resp.values())), str):
        content.append(TextPart(next(iter(resp.values()))))  # {"output": "..."} / {"error": "..."}
    elif resp is not None:
        content.append(TextPart(orjson.dumps(resp).decode()))
    for p in fr.parts or ():
        if p.inline_data is not None:
            content.append(_media(p.inline_data))
    custom = fr.name in req.custom_tool_names()
    return ToolResultPart(tool_call_id=cid, content=content, is_error=is_error, kind="custom" if custom else "function")


def _part(p: m.Part, calls: _Calls, req: Request, out: list[Part]) -> None:
    sig = p.thought_signature
    fc = p.function_call if isinstance(p, m.FunctionCallPart) else None
    cid = calls.call(fc) if fc is not None else None
    if sig is not None:
        t = thoughts.client_thinking(sig, cid)
        if t is not None:
            if p.thought is True and isinstance(p, m.TextPart) and not t.text:
                t.text = p.text
                out.append(t)
                return
            out.append(t)
    if fc is not None and cid is not None:
        arguments = orjson.dumps(fc.args if fc.args is not None else {}).decode()
        out.append(ToolCallPart(id=cid, name=fc.name or "", arguments=arguments))
    elif isinstance(p, m.FunctionResponsePart):
        out.append(_result(p.function_response, calls.answer(p.function_response), req))
    elif isinstance(p, m.TextPart):
        out.append(ThinkingPart(text=p.text, summary=True) if p.thought is True else TextPart(p.text))
    elif isinstance(p, m.InlineDataPart):
        out.append(_media(p.inline_data))
    elif isinstance(p, m.FileDataPart):
        out.append(_media(p.file_data))
    else:
        req.dropped.add(m.part_name(p))


def _contents(wire: m.GenerateContentRequest, req: Request) -> None:
    calls = _Calls()
    for i, c in enumerate(wire.contents):
        parts: list[Part] = []
        for j, p in enumerate(c.parts):
            req.dropped.at(f"contents[{i}].parts[{j}]")
            _part(p, calls, req, parts)
        model = c.role == "model"
        req.messages.append(Message(role="assistant" if model else "user", parts=parts, source=f"contents[{i}]"))
    req.dropped.leave()


def _tools(wire: m.GenerateContentRequest, req: Request) -> None:
    for t in wire.tools or ():
        for fd in t.function_declarations or ():
            params = fd.parameters_json_schema if fd.parameters_json_schema is not None else fd.parameters
            params = to_json_schema(params) if params is not None else None
            req.tools.append(Tool(name=fd.name, description=fd.description, parameters=params))
        for key, value in (t.model_extra or {}).items():  # googleSearch, codeExecution, urlContext, ...: hosted
            req.tools.append(Tool(name=key, kind="builtin", raw={key: value}))


def _tool_choice(wire: m.GenerateContentRequest, req: Request) -> None:
    cfg = wire.tool_config
    fcc = cfg.function_calling_config if cfg is not None else None
    if fcc is None:
        return
    mode = (fcc.mode or "AUTO").upper()
    names = fcc.allowed_function_names or []
    if mode in ("ANY", "VALIDATED"):
        if len(names) == 1:
            req.tool_choice = ToolChoice(mode="tool", name=names[0])
            return
        if names:
            req.dropped.add("toolConfig.functionCallingConfig.allowedFunctionNames")
        req.tool_choice = ToolChoice(mode="any")
    elif mode == "NONE":
        req.tool_choice = ToolChoice(mode="none")
    else:
        req.tool_choice = ToolChoice(mode="auto")


def _thinking(cfg: m.ThinkingConfig | None) -> Reasoning | None:
    if cfg is None:
        return None
    budget, level = cfg.thinking_budget, cfg.thinking_level
    r = Reasoning()
    if budget is not None:
        if budget == 0:
            r.enabled = False
        elif budget < 0:
            r.enabled, r.adaptive = True, True
        else:
            r.enabled, r.budget_tokens = True, budget
    if level:
        r.enabled, r.effort = True, level.lower()
    if cfg.include_thoughts is True:
        r.enabled = True if r.enabled is None else r.enabled
        r.summary = "auto"
    return r if r.enabled is not None or r.summary else None


def _generation(wire: m.GenerateContentRequest, req: Request) -> None:
    g = wire.generation_config
    if g is None:
        return
    req.temperature = g.temperature
    req.top_p = g.top_p
    req.top_k = g.top_k  # type: ignore[assignment]  # Gemini's topK is an integer; a float passes as sent
    req.max_tokens = g.max_output_tokens
    req.stop = list(g.stop_sequences or ())
    req.n = g.candidate_count
    mime = g.response_mime_type
    schema = g.response_json_schema if g.response_json_schema is not None else g.response_schema
    if schema is not None:  # Gemini CLI sends upper-case type names even in responseJsonSchema
        schema = to_json_schema(schema)
    if mime == "application/json" or schema is not None:
        req.response_format = (
            ResponseFormat(type="json_schema", name="response", schema=schema)
            if isinstance(schema, dict)
            else ResponseFormat(type="json_object")
        )
    elif mime and mime != "text/plain":
        req.dropped.add("generationConfig.responseMimeType")
    req.reasoning = _thinking(g.thinking_config)
    for field, name in m.GEN_DROPPED:
        if getattr(g, field) is not None:
            req.dropped.add(f"generationConfig.{name}")
    for name in g.model_extra or ():  # a field newer than these models
        req.dropped.add(f"generationConfig.{name}")


def decode_request(body: dict[str, Any]) -> Request:
    model = body.get("model")
    if isinstance(body.get("request"), dict) and "contents" not in body:  # Code Assist's wrapped request
        body = body["request"]
    try:
        wire = m.REQUEST_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise ClientRequestError(f"invalid generateContent request: {m.describe(e)}") from None
    req = Request(model=model.removeprefix("models/") if isinstance(model, str) else "")
    sys = wire.system_instruction
    if isinstance(sys, str):
        req.system.append(TextPart(sys))
    elif sys is not None:
        req.system.extend(TextPart(p.text) for p in sys.parts if isinstance(p, m.TextPart))
    _tools(wire, req)
    search.take_spec(req)
    _contents(wire, req)
    _tool_choice(wire, req)
    _generation(wire, req)
    for field, name in m.REQUEST_DROPPED:
        if getattr(wire, field) is not None:
            req.dropped.add(name)
    for name in wire.model_extra or ():  # a field newer than these models (Code Assist's session_id, ...)
        req.dropped.add(name)
    return req
