"""Request translation: client JSON bytes -> upstream JSON bytes, through the IR.

Two steps, so a routed request is decoded once and encoded once per attempt (each attempt may speak
another protocol and ask for another model): ``decode_client_request`` and ``encode_upstream_request``.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any

import orjson

from dragoman.errors import ClientRequestError
from dragoman.errors import UnsupportedFeatureError
from dragoman.ir.lossy import LossReport
from dragoman.ir.request import Request
from dragoman.protocols import Protocol
from dragoman.protocols._wire import parse_client_json
from dragoman.protocols.base import Context
from dragoman.protocols.gemini.request_decode import apply_path
from dragoman.protocols.openai_responses.request_decode import EXTRA_PREVIOUS
from dragoman.protocols.registry import get_codec
from dragoman.translate.images import dropped_name
from dragoman.translate.images import keep_recent_images
from dragoman.translate.mcp_names import rename_request
from dragoman.translate.model_limits import check_window
from dragoman.translate.model_limits import clamp
from dragoman.translate.model_limits import clamp_body
from dragoman.translate.plan import ModelRule
from dragoman.translate.plan import Plan
from dragoman.translate.plan import map_model
from dragoman.translate.tokens import estimate_input_tokens


@dataclass(slots=True)
class ClientRequest:
    """The client's request, decoded once."""

    #: the client's bytes; emptied by the addon once no attempt can pass them on untouched (identity plan)
    raw: bytes
    obj: dict[str, Any]
    request: Request  # IR; ``request.model`` is set per attempt
    client_model: str
    stream: bool
    #: an Anthropic stream's estimated input tokens (``translate.tokens``), computed at the first
    #: translated attempt (or when a declared window or an overflow answer needs it)
    input_tokens_estimate: int | None = None
    #: the output limit the client asked for (``request.max_tokens`` may be clamped per attempt)
    max_tokens: int | None = None
    #: what storing the answer needs (``dragoman.mitm.responses.state.Ticket``), for a stored Responses request
    state_ticket: Any = None
    #: ``raw`` is not the client's body as it came (older images replaced, ``translate.images``)
    rewritten: bool = False
    #: what Dragoman itself changed in the client's JSON (``keep_images``): reported for a same-protocol
    #: upstream too, where nothing else is lost
    own_losses: LossReport = field(default_factory=LossReport)


@dataclass(slots=True)
class TranslatedRequest:
    body: bytes
    request: Request  # the client's request in IR form (model already mapped)
    client_model: str
    upstream_model: str
    stream: bool
    #: what the translation dropped, approximated or invented (the context's report, which the
    #: response or stream of the same exchange goes on filling)
    report: LossReport


#: the deepest JSON nesting orjson serialises (its documented limit); a request nested deeper is refused
JSON_DEPTH_LIMIT = 255


def too_deep(e: BaseException) -> ClientRequestError:
    """A request nested deeper than the JSON encoder (or Python's recursion) goes: 400, not a traceback."""
    return ClientRequestError(
        f"request JSON is nested too deep to translate (more than {JSON_DEPTH_LIMIT} levels, e.g. a tool "
        f"schema): {type(e).__name__}: {e}"
    )


def decode_client_request(body: bytes, client: Protocol, keep_images: int = 0, path: str = "") -> ClientRequest:
    """Raises ``ClientRequestError`` (400 in the client's shape) for an invalid client request.

    ``keep_images`` > 0: only that many most recent images stay (``translate.images``); the others are
    replaced in the client's JSON first, so a same-protocol upstream gets the trimmed body too. ``path``: the request's path, where a Gemini
    client names the model and whether it streams."""
    obj = parse_client_json(body)
    replaced = keep_recent_images(obj, client, keep_images)
    if replaced:
        body = orjson.dumps(obj)
    try:
        req = get_codec(client).decode_request(obj)
    except RecursionError as e:
        raise too_deep(e) from None
    if client is Protocol.GEMINI:
        apply_path(req, path)
    cr = ClientRequest(body, obj, req, req.model, req.stream, max_tokens=req.max_tokens, rewritten=bool(replaced))
    if replaced:
        req.dropped.add(dropped_name(replaced, keep_images))
        cr.own_losses.add(dropped_name(replaced, keep_images))
    return cr


def client_estimate(cr: ClientRequest, client: Protocol) -> int:
    """The client request's estimated input tokens (computed once): an Anthropic request as it came, another
    protocol's through its Anthropic form (the estimator counts Anthropic shapes)."""
    if cr.input_tokens_estimate is None:
        if client is Protocol.ANTHROPIC_MESSAGES:
            cr.input_tokens_estimate = estimate_input_tokens(cr.obj)
        else:
            saved, cr.request.max_tokens = cr.request.max_tokens, cr.max_tokens
            try:
                body = get_codec(Protocol.ANTHROPIC_MESSAGES).encode_request(cr.request, Context())
            finally:
                cr.request.max_tokens = saved
            cr.input_tokens_estimate = estimate_input_tokens(body)
    return cr.input_tokens_estimate


def encode_upstream_request(cr: ClientRequest, plan: Plan, ctx: Context, model: str) -> bytes:
    """The upstream body for ``plan.upstream`` asking for ``model``; fills ``ctx`` (request, the lossiness report).

    Raises ``UnsupportedFeatureError`` for a request only a Chat upstream can serve (``n > 1``), and
    ``ClientRequestError`` for one nested deeper than the encoders go."""
    try:
        return _encode(cr, plan, ctx, model)
    except (orjson.JSONEncodeError, RecursionError) as e:
        # orjson raises JSONEncodeError ("Recursion limit reached") beyond 255 levels; a Python walk, RecursionError
        raise too_deep(e) from None


def _encode(cr: ClientRequest, plan: Plan, ctx: Context, model: str) -> bytes:
    req = cr.request
    if req.n is not None and req.n > 1 and plan.upstream is not Protocol.OPENAI_CHAT:
        raise UnsupportedFeatureError("n > 1 (several choices) is not supported by the translated upstream")
    req.model = model
    if not plan.identity and req.extra.get(EXTRA_PREVIOUS):
        raise ClientRequestError(
            f"previous_response_id toward a {plan.upstream.value} upstream needs Dragoman's response store "
            "(dragoman_responses_store is off): send the whole conversation in `input` instead"
        )
    ctx.request = req
    ctx.estimate = lambda: client_estimate(cr, plan.client)
    estimate = check_window(ctx, model)
    ctx.search = None  # set by the upstream's encoder (an earlier attempt's upstream may have been another)
    body = _encode_body(cr, plan, ctx, model, estimate)
    if ctx.mcp_prefix and plan.upstream is Protocol.ANTHROPIC_MESSAGES:
        # the names go up as mcp__...; the answer's way back renames them (``ctx.extra["mcp_names"]``)
        body, back = rename_request(body)
        if back:
            ctx.extra["mcp_names"] = back
    return body


def _encode_body(cr: ClientRequest, plan: Plan, ctx: Context, model: str, estimate: int | None) -> bytes:
    req = cr.request
    if plan.identity:  # the client's bytes go on as they are (or as keep_images left them): only that is lost
        ctx.dropped.merge(cr.own_losses)
        obj = cr.obj
        same_model = model == cr.client_model or plan.client is Protocol.GEMINI  # Gemini's model is in the URL
        if ctx.model_limits is not None:
            obj = dict(obj)
            if not clamp_body(obj, plan.client, ctx, estimate) and same_model:
                return cr.raw
        elif same_model:
            return cr.raw
        obj = dict(obj)
        if plan.client is not Protocol.GEMINI:
            obj["model"] = model
        return orjson.dumps(obj)
    ctx.dropped.merge(req.dropped)
    req.max_tokens = clamp(cr.max_tokens, ctx, estimate)
    if plan.client is Protocol.ANTHROPIC_MESSAGES and cr.stream:
        # an Anthropic stream opens with message_start and its input_tokens; a Chat or Responses upstream
        # reports usage only at the end, so the client gets the estimate count_tokens gives until then
        ctx.input_tokens_estimate = client_estimate(cr, plan.client)
        ctx.dropped.approximate(
            "message_start.usage.input_tokens",
            "estimated locally: the upstream reports usage only at the end (message_delta has its figures)",
        )
    try:
        return orjson.dumps(get_codec(plan.upstream).encode_request(req, ctx))
    finally:
        ctx.dropped.leave()  # what the answer's codecs add is at the top, whatever an encoder left


def translate_request(
    body: bytes, plan: Plan, ctx: Context, model_map: list[ModelRule] | None = None
) -> TranslatedRequest:
    """Both steps for one upstream. Raises ``ClientRequestError`` for an invalid client request."""
    cr = decode_client_request(body, plan.client)
    model = map_model(model_map or [], cr.client_model)
    out = encode_upstream_request(cr, plan, ctx, model)
    return TranslatedRequest(out, cr.request, cr.client_model, model, cr.stream, ctx.dropped)
