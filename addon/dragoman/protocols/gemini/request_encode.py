"""IR request -> Gemini ``GenerateContentRequest`` (the model and ``stream`` go in the URL, see ``upstream_path``).

System text (and system/developer messages inside the conversation, which Gemini's ``contents`` cannot hold)
-> ``systemInstruction``; user and tool-result parts -> ``user`` contents (``functionResponse`` named after
its call); assistant parts -> ``model`` contents with the thought signatures they carry (``thoughts.Signer``;
reasoning state from other providers is dropped and named); function tools -> ``functionDeclarations`` with
``parametersJsonSchema`` (custom tools as one string parameter ``input``); hosted tools only when they are
Gemini's own; tool choice -> ``toolConfig``; sampling, structured output and reasoning -> ``generationConfig``.
"""

from __future__ import annotations

from typing import Any

from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.base import Context
from dragoman.protocols.gemini import search
from dragoman.protocols.gemini import thoughts
from dragoman.protocols.gemini.response import model_parts

#: hosted tools Gemini knows by these keys (carried only when they came from a Gemini client)
GEMINI_HOSTED = frozenset(
    {
        "googleSearch",
        "google_search",
        "googleSearchRetrieval",
        "codeExecution",
        "code_execution",
        "urlContext",
        "url_context",
        "googleMaps",
        "fileSearch",
        "computerUse",
        "enterpriseWebSearch",
    }
)
#: OpenAI effort names -> Gemini thinkingLevel
_LEVELS = {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH", "xhigh": "HIGH", "max": "HIGH"}


def upstream_path(model: str, stream: bool, version: str = "v1beta") -> str:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/{version}/models/{model}:{method}"


def _media(p: ImagePart | FilePart, ctx: Context) -> dict[str, Any] | None:
    if p.data:
        return {"inlineData": {"mimeType": p.media_type or "application/octet-stream", "data": p.data}}
    if p.url:
        d: dict[str, Any] = {"fileUri": p.url}
        if p.media_type:
            d["mimeType"] = p.media_type
        return {"fileData": d}
    ctx.dropped.add(f"{type(p).__name__}.file_id")
    return None


def _result(p: ToolResultPart, names: dict[str, str], ctx: Context) -> list[dict[str, Any]]:
    texts = [c.text for c in p.content if type(c) is TextPart]
    body = "\n".join(texts)
    fr: dict[str, Any] = {"id": p.tool_call_id, "name": names.get(p.tool_call_id, p.tool_call_id)}
    fr["response"] = {"error": body} if p.is_error else {"output": body}
    media = [m for m in (_media(c, ctx) for c in p.content if not isinstance(c, TextPart)) if m is not None]
    if media:
        fr["parts"] = media  # Gemini 3 takes images and documents inside a function response
    return [{"functionResponse": fr}]


def _user_parts(m: Message, names: dict[str, str], ctx: Context) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in m.parts:
        if type(p) is TextPart:
            if p.text:
                out.append({"text": p.text})
        elif type(p) is ImagePart or type(p) is FilePart:
            media = _media(p, ctx)
            if media is not None:
                out.append(media)
        elif type(p) is ToolResultPart:
            out += _result(p, names, ctx)
        else:
            ctx.dropped.add(f"user.{type(p).__name__}")
    return out


def _skip_unsigned(contents: list[dict[str, Any]], ctx: Context) -> None:
    """A model turn whose calls carry no signature (a history from another model, or a Chat client that did
    not hand back ``extra_content``) gets Google's documented skip value on its first call, or Gemini 3 answers 400."""
    for c in contents:
        if c["role"] != "model":
            continue
        calls = [p for p in c["parts"] if "functionCall" in p]
        if calls and not any("thoughtSignature" in p for p in calls):
            calls[0]["thoughtSignature"] = thoughts.SKIP_VALIDATOR
            ctx.placeholders.add("thought_signature")
            ctx.dropped.invent(
                "functionCall.thoughtSignature", "Gemini's skip-validation signature for a call without one"
            )


def _tools(req: Request, ctx: Context) -> list[dict[str, Any]]:
    decls: list[dict[str, Any]] = []
    hosted: list[dict[str, Any]] = []
    for t in req.tools:
        if t.kind == "builtin":
            if t.raw and len(t.raw) == 1 and next(iter(t.raw)) in GEMINI_HOSTED:
                hosted.append(t.raw)
            else:
                ctx.dropped.add(f"{t.source or 'tools'}.{t.name}")
            continue
        d: dict[str, Any] = {"name": t.name}
        if t.description:
            d["description"] = t.description
        if t.kind == "custom":
            d["parametersJsonSchema"] = {
                "type": "object",
                "properties": {CUSTOM_TOOL_PARAM: {"type": "string"}},
                "required": [CUSTOM_TOOL_PARAM],
            }
        elif t.parameters:
            d["parametersJsonSchema"] = t.parameters
        decls.append(d)
    if req.web_search is not None:
        hosted.append(search.tool_from_spec(req.web_search, ctx))
    return ([{"functionDeclarations": decls}] if decls else []) + hosted


def _tool_config(req: Request) -> dict[str, Any] | None:
    tc = req.tool_choice
    if tc is None:
        return None
    if tc.mode == "tool" and tc.name:
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [tc.name]}}
    return {"functionCallingConfig": {"mode": {"any": "ANY", "none": "NONE"}.get(tc.mode, "AUTO")}}


def _thinking(req: Request) -> dict[str, Any] | None:
    r = req.reasoning
    if r is None:
        return None
    if r.enabled is False:
        return {"thinkingBudget": 0}
    cfg: dict[str, Any] = {"includeThoughts": True}
    if r.budget_tokens:
        cfg["thinkingBudget"] = r.budget_tokens
    elif r.effort in _LEVELS:
        cfg["thinkingLevel"] = _LEVELS[r.effort]
    elif r.adaptive:
        cfg["thinkingBudget"] = -1
    return cfg


def _generation(req: Request) -> dict[str, Any]:
    g: dict[str, Any] = {}
    for key, value in (
        ("temperature", req.temperature),
        ("topP", req.top_p),
        ("topK", req.top_k),
        ("maxOutputTokens", req.max_tokens),
        ("candidateCount", req.n),
    ):
        if value is not None:
            g[key] = value
    if req.stop:
        g["stopSequences"] = list(req.stop)
    rf = req.response_format
    if rf is not None and rf.type in ("json_object", "json_schema"):
        g["responseMimeType"] = "application/json"
        if rf.schema is not None:
            g["responseJsonSchema"] = rf.schema
    thinking = _thinking(req)
    if thinking is not None:
        g["thinkingConfig"] = thinking
    return g


def encode_request(req: Request, ctx: Context) -> dict[str, Any]:
    names = {p.id: p.name for m in req.messages for p in m.parts if type(p) is ToolCallPart}
    system = [{"text": p.text} for p in req.system if p.text]
    contents: list[dict[str, Any]] = []
    for m in req.messages:
        ctx.dropped.at(m.source)
        if m.role == "system":
            system += [{"text": p.text} for p in m.parts if type(p) is TextPart and p.text]
            continue
        if m.role == "assistant":
            parts = model_parts(m.parts, thoughts.Signer(True, ctx.dropped), ctx, history=True)
            role = "model"
        else:
            parts, role = _user_parts(m, names, ctx), "user"
        if parts:
            contents.append({"role": role, "parts": parts})
    ctx.dropped.leave()
    _skip_unsigned(contents, ctx)
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": system}
    tools = _tools(req, ctx)
    if tools:
        body["tools"] = tools
        tool_config = _tool_config(req)
        if tool_config is not None:
            body["toolConfig"] = tool_config
    gen = _generation(req)
    if gen:
        body["generationConfig"] = gen
    if req.parallel_tool_calls is False:
        ctx.dropped.add("parallel_tool_calls")
    return body
