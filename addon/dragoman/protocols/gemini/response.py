"""Whole Gemini responses both ways (``GenerateContentResponse``), and the usage, finish-reason and call-id
helpers the streams share.

Decoding: ``candidates[0].content.parts`` -> output parts (``thought`` text is thinking, a ``thoughtSignature``
becomes the thinking part before its part, see ``thoughts``); ``finishReason`` -> stop reason (a ``STOP`` with
function calls is a tool-use stop; safety-type reasons are refusals); a prompt blocked by
``promptFeedback.blockReason`` is a refusal. Other candidates (``candidateCount`` > 1) are dropped and named.
Encoding: the reverse, one candidate.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from dragoman.errors import UpstreamProtocolError
from dragoman.ir import search as s
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.mapping import refused_stop
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import OutputPart
from dragoman.ir.response import Response
from dragoman.protocols._checks import token_count
from dragoman.protocols._custom_args import unwrap_custom_args
from dragoman.protocols._custom_args import wrap_custom_args
from dragoman.protocols.base import Context
from dragoman.protocols.gemini import models as m
from dragoman.protocols.gemini import search
from dragoman.protocols.gemini import thoughts

#: finishReason -> IR (unknown values: END_TURN)
FINISH_TO_IR = {
    "STOP": StopReason.END_TURN,
    "MAX_TOKENS": StopReason.MAX_TOKENS,
    "SAFETY": StopReason.REFUSAL,
    "RECITATION": StopReason.REFUSAL,
    "BLOCKLIST": StopReason.REFUSAL,
    "PROHIBITED_CONTENT": StopReason.REFUSAL,
    "SPII": StopReason.REFUSAL,
    "IMAGE_SAFETY": StopReason.REFUSAL,
    "IMAGE_PROHIBITED_CONTENT": StopReason.REFUSAL,
    "LANGUAGE": StopReason.REFUSAL,
}
IR_TO_FINISH = {
    StopReason.END_TURN: "STOP",
    StopReason.TOOL_USE: "STOP",
    StopReason.STOP_SEQUENCE: "STOP",
    StopReason.PAUSE_TURN: "STOP",
    StopReason.MAX_TOKENS: "MAX_TOKENS",
    StopReason.REFUSAL: "SAFETY",
    StopReason.ERROR: "OTHER",
}
DROPPED_CANDIDATES = "candidates[1:]"


def finish_stop(reason: str, tool_calls: bool) -> StopReason:
    """A ``finishReason``; Gemini ends a function-call turn with ``STOP``: the calls are the answer."""
    stop = FINISH_TO_IR.get(reason, StopReason.END_TURN)
    return StopReason.TOOL_USE if tool_calls and stop is StopReason.END_TURN else stop


def finish_reason(stop: StopReason | None) -> str:
    return IR_TO_FINISH.get(stop or StopReason.END_TURN, "STOP")


def blocked_text(feedback: Any) -> str | None:
    """``promptFeedback.blockReason`` as the refusal text a client sees, or None when the prompt was not blocked."""
    if not isinstance(feedback, dict):
        return None
    return _blocked(feedback.get("blockReason"), feedback.get("blockReasonMessage"))


def _blocked(reason: Any, msg: Any) -> str | None:
    if not isinstance(reason, str) or not reason:
        return None
    return f"The prompt was blocked ({reason})" + (f": {msg}" if isinstance(msg, str) and msg else ".")


def _count(meta: dict[str, Any], name: str) -> int | None:
    v = meta.get(name)
    return token_count(v, name) if isinstance(v, int) else None


def decode_usage(meta: Any) -> Usage | None:
    """``usageMetadata`` -> Usage; None for a bare ``{"trafficType": ...}`` (Vertex's interim events)."""
    if not isinstance(meta, dict) or ("promptTokenCount" not in meta and "candidatesTokenCount" not in meta):
        return None
    prompt = _count(meta, "promptTokenCount")
    tool_prompt = _count(meta, "toolUsePromptTokenCount")
    cand = _count(meta, "candidatesTokenCount")
    thoughts_n = _count(meta, "thoughtsTokenCount")
    out = None if cand is None and thoughts_n is None else (cand or 0) + (thoughts_n or 0)
    return Usage(
        input_tokens=None if prompt is None else prompt + (tool_prompt or 0),
        output_tokens=out,
        cache_read_tokens=_count(meta, "cachedContentTokenCount"),
        reasoning_tokens=thoughts_n,
    )


def encode_usage(u: Usage) -> dict[str, Any]:
    prompt = u.input_tokens or 0
    thinking = u.reasoning_tokens or 0
    cand = (u.output_tokens or 0) - thinking
    if cand < 0:  # an upstream that counts reasoning apart from its output (xAI): the output count stays whole
        cand, thinking = u.output_tokens or 0, 0
    meta: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": cand}
    if thinking:
        meta["thoughtsTokenCount"] = thinking
    if u.cache_read_tokens:
        meta["cachedContentTokenCount"] = u.cache_read_tokens
    meta["totalTokenCount"] = prompt + cand + thinking
    return meta


def call_id(fc: dict[str, Any], response_id: str | None, n: int) -> str:
    """A function call's own ``id``, or one made from the response id and its position (unique per turn)."""
    cid = fc.get("id")
    return cid if isinstance(cid, str) and cid else f"call_{response_id or 'gemini'}_{n}"


# ---------------------------------------------------------------- decode (upstream -> IR)


def usage_from(meta: m.UsageMetadata | None) -> Usage | None:
    """A validated ``usageMetadata`` -> Usage (``decode_usage`` for a whole response)."""
    if meta is None or (meta.prompt_token_count is None and meta.candidates_token_count is None):
        return None
    prompt = token_count(meta.prompt_token_count, "promptTokenCount")
    cand = token_count(meta.candidates_token_count, "candidatesTokenCount")
    thoughts_n = token_count(meta.thoughts_token_count, "thoughtsTokenCount")
    tool_prompt = token_count(meta.tool_use_prompt_token_count, "toolUsePromptTokenCount")
    return Usage(
        input_tokens=None if prompt is None else prompt + (tool_prompt or 0),
        output_tokens=None if cand is None and thoughts_n is None else (cand or 0) + (thoughts_n or 0),
        cache_read_tokens=token_count(meta.cached_content_token_count, "cachedContentTokenCount"),
        reasoning_tokens=thoughts_n,
    )


def _call_part(fc: m.FunctionCall, cid: str, ctx: Context) -> ToolCallPart:
    name = fc.name or ""
    arguments = orjson.dumps(fc.args if fc.args is not None else {}).decode()
    if name in ctx.custom_tools():
        return ToolCallPart(id=cid, name=name, arguments=unwrap_custom_args(arguments), kind="custom")
    return ToolCallPart(id=cid, name=name, arguments=arguments)


def decode_parts(parts: list[m.Part], ctx: Context, response_id: str | None) -> list[OutputPart]:
    out: list[OutputPart] = []
    n = 0
    for p in parts:
        sig = p.thought_signature
        fc = p.function_call if isinstance(p, m.FunctionCallPart) else None
        cid = (fc.id or f"call_{response_id or 'gemini'}_{n}") if fc is not None else None
        if sig:
            value = thoughts.wrap(cid or thoughts.PART_KEY, sig)
            last = out[-1] if out else None
            if type(last) is ThinkingPart and last.signature is None and p.thought is not True:
                last.signature = value
            else:
                out.append(ThinkingPart(signature=value, summary=True))
        if fc is not None and cid is not None:
            out.append(_call_part(fc, cid, ctx))
            n += 1
        elif isinstance(p, m.TextPart):
            if p.thought is True:
                out.append(ThinkingPart(text=p.text, summary=True))
            elif p.text:
                out.append(TextPart(p.text))
        else:
            ctx.dropped.add(m.part_name(p))
    return out


def decode_response(body: dict[str, Any], ctx: Context) -> Response:
    if "candidates" not in body and isinstance(body.get("response"), dict):  # Code Assist's wrapped answer
        body = body["response"]
    try:
        wire = m.RESPONSE_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise UpstreamProtocolError(f"Gemini response: {m.describe(e)}") from None
    rid = wire.response_id or ""
    model = wire.model_version
    if model is None:
        model = ctx.request.model if ctx.request is not None else ""
    usage = usage_from(wire.usage_metadata) or Usage()
    cands = wire.candidates
    if not cands:
        fb = wire.prompt_feedback
        text = (fb and _blocked(fb.block_reason, fb.block_reason_message)) or "The model returned no candidates."
        return Response(id=rid, model=model, content=[RefusalPart(text)], stop_reason=StopReason.REFUSAL, usage=usage)
    if len(cands) > 1:
        ctx.dropped.add(DROPPED_CANDIDATES)
    cand = cands[0]
    parts = cand.content.parts if cand.content is not None else []
    out = decode_parts(parts, ctx, rid)
    if cand.grounding_metadata is not None:
        out = _grounded(out, parts, cand.grounding_metadata, rid, ctx)
    calls = any(type(p) is ToolCallPart for p in out)
    reason = cand.finish_reason
    stop = finish_stop(reason, calls) if reason is not None else StopReason.END_TURN
    return Response(id=rid, model=model, content=out, stop_reason=stop, usage=usage)


def _grounded(
    out: list[OutputPart], parts: list[m.Part], meta: dict[str, Any], rid: str, ctx: Context
) -> list[OutputPart]:
    """The answer with its grounding: the searches before its first text or call, the supports as citations."""
    raw = [i for i, p in enumerate(parts) if isinstance(p, m.TextPart) and p.text and p.thought is not True]
    texts = [p for p in out if type(p) is TextPart]
    search.cite_texts(meta, list(zip(raw, texts)), ctx.dropped)
    searches = search.searches_from(meta, rid, ctx.dropped)
    at = next((n for n, p in enumerate(out) if type(p) is not ThinkingPart), len(out))
    return out[:at] + list(searches) + out[at:]


# ---------------------------------------------------------------- encode (IR -> client)


def function_call(p: ToolCallPart, ctx: Context) -> dict[str, Any]:
    """A tool call part -> ``{"functionCall": {"id", "name", "args"}}`` (a custom tool's input wrapped)."""
    arguments = wrap_custom_args(p.arguments) if p.kind == "custom" else p.arguments
    try:
        args = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        ctx.dropped.add("functionCall.args(invalid JSON)")
        args = {}
    if not isinstance(args, dict):
        ctx.dropped.add("functionCall.args(not an object)")
        args = {}
    return {"functionCall": {"id": p.id, "name": p.name, "args": args}}


def model_parts(
    content: list[Any], signer: thoughts.Signer, ctx: Context, with_ids: bool = True, history: bool = False
) -> list[dict[str, Any]]:
    """Assistant parts -> Gemini ``parts`` with their signatures (thought text as ``thought`` parts). In
    ``history`` a search is carried as text and citations are dropped (Gemini takes no grounding back)."""
    out: list[dict[str, Any]] = []
    for p in content:
        if type(p) is ThinkingPart:
            signer.add(p)
            if p.text:
                out.append({"text": p.text, "thought": True})
        elif type(p) is TextPart or type(p) is RefusalPart:
            if p.text:
                out.append(signer.sign({"text": p.text}))
            if history and type(p) is TextPart and p.citations:
                ctx.dropped.add("citations")
        elif type(p) is s.WebSearchPart and history:
            ctx.dropped.add("web_search_call(as_text)")
            out.append(signer.sign({"text": s.context_text(p)}))
        elif type(p) is ToolCallPart:
            part = function_call(p, ctx)
            if not with_ids:
                del part["functionCall"]["id"]
            out.append(signer.sign(part, p.id))
        else:
            ctx.dropped.add(type(p).__name__)
    return out + signer.rest()


def encode_response(resp: Response, ctx: Context) -> dict[str, Any]:
    grounding = search.Grounding(ctx.dropped)
    at = 0
    content: list[Any] = []
    for p in resp.content:
        if type(p) is s.WebSearchPart:
            grounding.search(p)
            continue
        if type(p) is TextPart or type(p) is RefusalPart:
            for c in p.citations or () if type(p) is TextPart else ():
                grounding.citation(c, p.text, at)
            at += len(p.text.encode())
        content.append(p)
    parts = model_parts(content, thoughts.Signer(False, ctx.dropped), ctx)
    cand: dict[str, Any] = {
        "content": {"role": "model", "parts": parts or [{"text": ""}]},
        "finishReason": finish_reason(
            refused_stop(resp.stop_reason, any(type(p) is RefusalPart for p in resp.content))
        ),
        "index": 0,
    }
    meta = grounding.metadata()
    if meta is not None:
        cand["groundingMetadata"] = meta
    out = {
        "candidates": [cand],
        "usageMetadata": encode_usage(resp.usage),
        "modelVersion": resp.model,
        "responseId": resp.id,
    }
    if ctx.request is not None and ctx.request.extra.get("gemini_wrapped"):
        return {"response": out}  # Code Assist (``v1internal``) wraps its answers
    return out
