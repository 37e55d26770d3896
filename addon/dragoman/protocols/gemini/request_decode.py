"""Gemini ``GenerateContentRequest`` -> IR request.

``contents`` (``user`` / ``model`` roles, ``function`` read as ``user``) with their ``parts``: text, ``thought``
text (thinking), ``inlineData`` / ``fileData`` (images; other media types are files), ``functionCall`` and
``functionResponse``. A call without an ``id`` gets one, and a response without a matching ``id`` is paired
with the earliest unanswered call of its name (Gemini CLI gives responses ids of its own). A part's
``thoughtSignature`` becomes the thinking part before it (``thoughts.client_thinking``).
``systemInstruction``, ``tools`` (``functionDeclarations``; hosted tools kept as builtin), ``toolConfig``,
``generationConfig`` (sampling, stop sequences, ``candidateCount``, structured output, ``thinkingConfig``).
The model and ``stream`` come from the URL: the caller sets them (``path_info``); a Code Assist request
(``{"model", "project", "request": {...}}``) is unwrapped here.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

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
from dragoman.protocols.gemini import search
from dragoman.protocols.gemini import thoughts
from dragoman.protocols.gemini.schema import to_json_schema

_PATH = re.compile(r"/(?:v1|v1beta|v1alpha)(?:internal)?(?:/models/([^/:?]+))?:(\w+)")
#: generationConfig fields the IR does not carry (named in ``dropped`` when present)
_GEN_DROPPED = (
    "presencePenalty",
    "frequencyPenalty",
    "seed",
    "responseLogprobs",
    "logprobs",
    "responseModalities",
    "speechConfig",
    "mediaResolution",
    "imageConfig",
)


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


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    v = obj.get(camel)
    return obj.get(snake) if v is None else v


class _Calls:
    """Tool call ids of one request: made up where missing, matched to responses by id, else by name."""

    def __init__(self) -> None:
        self.n = 0
        self.open: list[tuple[str, str]] = []  # (id, name) not answered yet
        self.ids: set[str] = set()

    def call(self, fc: dict[str, Any]) -> str:
        cid = fc.get("id")
        if not isinstance(cid, str) or not cid:
            cid = f"call_{self.n}"
            self.n += 1
        self.ids.add(cid)
        self.open.append((cid, fc.get("name") or ""))
        return cid

    def answer(self, fr: dict[str, Any]) -> str:
        rid, name = fr.get("id"), fr.get("name") or ""
        for i, (cid, _) in enumerate(self.open):
            if cid == rid:
                del self.open[i]
                return cid
        for i, (cid, cname) in enumerate(self.open):
            if cname == name:
                del self.open[i]
                return cid
        return rid if isinstance(rid, str) and rid else f"call_{name}"  # a response to no call in the history


def _media(d: dict[str, Any], url: bool) -> ImagePart | FilePart:
    mime = _get(d, "mimeType", "mime_type")
    mime = mime if isinstance(mime, str) else None
    if url:
        uri = _get(d, "fileUri", "file_uri")
        if mime and mime.startswith("image/"):
            return ImagePart(url=uri, media_type=mime)
        return FilePart(url=uri, media_type=mime)
    if mime and mime.startswith("image/"):
        return ImagePart(data=d.get("data"), media_type=mime)
    return FilePart(data=d.get("data"), media_type=mime)


def _result(fr: dict[str, Any], cid: str, req: Request) -> ToolResultPart:
    resp = fr.get("response")
    is_error = isinstance(resp, dict) and "error" in resp and "output" not in resp
    content: list[TextPart | ImagePart | FilePart] = []
    if isinstance(resp, dict) and len(resp) == 1 and isinstance(next(iter(resp.values())), str):
        content.append(TextPart(next(iter(resp.values()))))  # {"output": "..."} / {"error": "..."}
    elif resp is not None:
        content.append(TextPart(orjson.dumps(resp).decode()))
    for p in fr.get("parts") or ():
        media = _get(p, "inlineData", "inline_data") if isinstance(p, dict) else None
        if isinstance(media, dict):
            content.append(_media(media, False))
    custom = fr.get("name") in req.custom_tool_names()
    return ToolResultPart(tool_call_id=cid, content=content, is_error=is_error, kind="custom" if custom else "function")


def _part(p: dict[str, Any], calls: _Calls, req: Request, out: list[Part]) -> None:
    sig = _get(p, "thoughtSignature", "thought_signature")
    fc = _get(p, "functionCall", "function_call")
    cid = calls.call(fc) if isinstance(fc, dict) else None
    if isinstance(sig, str):
        t = thoughts.client_thinking(sig, cid)
        if t is not None:
            if p.get("thought") is True and isinstance(p.get("text"), str) and not t.text:
                t.text = p["text"]
                out.append(t)
                return
            out.append(t)
    if isinstance(fc, dict) and cid is not None:
        args = fc.get("args")
        arguments = orjson.dumps(args if isinstance(args, dict) else {}).decode()
        name = fc.get("name")
        name = name if isinstance(name, str) else ""
        out.append(ToolCallPart(id=cid, name=name, arguments=arguments))
        return
    fr = _get(p, "functionResponse", "function_response")
    if isinstance(fr, dict):
        out.append(_result(fr, calls.answer(fr), req))
        return
    if isinstance(p.get("text"), str):
        out.append(ThinkingPart(text=p["text"], summary=True) if p.get("thought") is True else TextPart(p["text"]))
        return
    inline, file = _get(p, "inlineData", "inline_data"), _get(p, "fileData", "file_data")
    if isinstance(inline, dict) or isinstance(file, dict):
        out.append(_media(inline if isinstance(inline, dict) else file, not isinstance(inline, dict)))
        return
    req.dropped.add(next(iter(p), "?"))


def _contents(body: dict[str, Any], req: Request) -> None:
    contents = body.get("contents")
    if isinstance(contents, dict):
        contents = [contents]
    if not isinstance(contents, list):
        raise ClientRequestError("contents: a list of Content objects is required")
    calls = _Calls()
    for i, c in enumerate(contents):
        if not isinstance(c, dict) or not isinstance(c.get("parts", []), list):
            raise ClientRequestError(f"contents[{i}]: a Content object with a parts list is required")
        model = c.get("role") == "model"
        parts: list[Part] = []
        for j, p in enumerate(c.get("parts") or ()):
            if not isinstance(p, dict):
                raise ClientRequestError(f"contents[{i}].parts: each part must be an object")
            req.dropped.at(f"contents[{i}].parts[{j}]")
            _part(p, calls, req, parts)
        req.messages.append(Message(role="assistant" if model else "user", parts=parts, source=f"contents[{i}]"))
    req.dropped.leave()


def _tools(body: dict[str, Any], req: Request) -> None:
    for t in body.get("tools") or ():
        if not isinstance(t, dict):
            raise ClientRequestError("tools: each tool must be an object")
        for key, value in t.items():
            if key in ("functionDeclarations", "function_declarations") and isinstance(value, list):
                for fd in value:
                    if not isinstance(fd, dict) or not isinstance(fd.get("name"), str):
                        raise ClientRequestError("functionDeclarations: each needs a name")
                    params = _get(fd, "parametersJsonSchema", "parameters_json_schema")
                    if params is None:
                        params = fd.get("parameters")
                    params = to_json_schema(params) if params is not None else None
                    req.tools.append(Tool(name=fd["name"], description=fd.get("description"), parameters=params))
            else:  # googleSearch, codeExecution, urlContext, ...: hosted tools
                req.tools.append(Tool(name=key, kind="builtin", raw={key: value}))


def _tool_choice(body: dict[str, Any], req: Request) -> None:
    cfg = _get(body, "toolConfig", "tool_config")
    fcc = _get(cfg, "functionCallingConfig", "function_calling_config") if isinstance(cfg, dict) else None
    if not isinstance(fcc, dict):
        return
    mode = str(fcc.get("mode") or "AUTO").upper()
    names = _get(fcc, "allowedFunctionNames", "allowed_function_names") or []
    if mode in ("ANY", "VALIDATED"):
        if isinstance(names, list) and len(names) == 1:
            req.tool_choice = ToolChoice(mode="tool", name=names[0])
            return
        if names:
            req.dropped.add("toolConfig.functionCallingConfig.allowedFunctionNames")
        req.tool_choice = ToolChoice(mode="any")
    elif mode == "NONE":
        req.tool_choice = ToolChoice(mode="none")
    else:
        req.tool_choice = ToolChoice(mode="auto")


def _thinking(cfg: Any) -> Reasoning | None:
    if not isinstance(cfg, dict):
        return None
    budget = _get(cfg, "thinkingBudget", "thinking_budget")
    level = _get(cfg, "thinkingLevel", "thinking_level")
    include = _get(cfg, "includeThoughts", "include_thoughts")
    r = Reasoning()
    if isinstance(budget, int):
        if budget == 0:
            r.enabled = False
        elif budget < 0:
            r.enabled, r.adaptive = True, True
        else:
            r.enabled, r.budget_tokens = True, budget
    if isinstance(level, str) and level:
        r.enabled, r.effort = True, level.lower()
    if include is True:
        r.enabled = True if r.enabled is None else r.enabled
        r.summary = "auto"
    return r if r.enabled is not None or r.summary else None


def _generation(body: dict[str, Any], req: Request) -> None:
    g = _get(body, "generationConfig", "generation_config")
    if not isinstance(g, dict):
        return
    req.temperature = g.get("temperature")
    req.top_p = _get(g, "topP", "top_p")
    req.top_k = _get(g, "topK", "top_k")
    req.max_tokens = _get(g, "maxOutputTokens", "max_output_tokens")
    stop = _get(g, "stopSequences", "stop_sequences")
    req.stop = [s for s in stop if isinstance(s, str)] if isinstance(stop, list) else []
    n = _get(g, "candidateCount", "candidate_count")
    req.n = n if isinstance(n, int) else None
    mime = _get(g, "responseMimeType", "response_mime_type")
    js = _get(g, "responseJsonSchema", "response_json_schema")
    schema = js if js is not None else _get(g, "responseSchema", "response_schema")
    if schema is not None:  # Gemini CLI sends upper-case type names even in responseJsonSchema
        schema = to_json_schema(schema)
    if mime == "application/json" or schema is not None:
        req.response_format = (
            ResponseFormat(type="json_schema", name="response", schema=schema)
            if isinstance(schema, dict)
            else ResponseFormat(type="json_object")
        )
    elif isinstance(mime, str) and mime != "text/plain":
        req.dropped.add("generationConfig.responseMimeType")
    req.reasoning = _thinking(_get(g, "thinkingConfig", "thinking_config"))
    for name in _GEN_DROPPED:
        if g.get(name) is not None:
            req.dropped.add(f"generationConfig.{name}")


def decode_request(body: dict[str, Any]) -> Request:
    model = body.get("model")
    if isinstance(body.get("request"), dict) and "contents" not in body:  # Code Assist's wrapped request
        body = body["request"]
    req = Request(model=model.removeprefix("models/") if isinstance(model, str) else "")
    sys = _get(body, "systemInstruction", "system_instruction")
    if isinstance(sys, str):
        req.system.append(TextPart(sys))
    elif isinstance(sys, dict):
        for p in sys.get("parts") or ():
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                req.system.append(TextPart(p["text"]))
    _tools(body, req)
    search.take_spec(req)
    _contents(body, req)
    _tool_choice(body, req)
    _generation(body, req)
    for name in ("safetySettings", "safety_settings", "cachedContent", "cached_content", "labels"):
        if body.get(name) is not None:
            req.dropped.add(name)
    return req
