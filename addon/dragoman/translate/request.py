"""Request translation: client JSON bytes -> upstream JSON bytes, through the IR."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from dragoman.ir.request import Request
from dragoman.protocols import get_codec
from dragoman.protocols._wire import parse_client_json
from dragoman.protocols.base import Context
from dragoman.translate.plan import ModelRule
from dragoman.translate.plan import Plan
from dragoman.translate.plan import map_model


@dataclass(slots=True)
class TranslatedRequest:
    body: bytes
    request: Request  # the client's request in IR form (model already mapped)
    client_model: str
    upstream_model: str
    stream: bool


def translate_request(body: bytes, plan: Plan, ctx: Context, model_map: list[ModelRule] | None = None) -> TranslatedRequest:
    """Raises ``ClientRequestError`` (400 in the client's shape) for an invalid client request."""
    obj = parse_client_json(body)
    src = get_codec(plan.client)
    req = src.decode_request(obj)
    client_model = req.model
    req.model = map_model(model_map or [], req.model)
    ctx.request = req
    for name in req.dropped.fields:
        ctx.dropped.add(name)
    if plan.identity:
        if req.model != client_model:
            obj["model"] = req.model
            out = orjson.dumps(obj)
        else:
            out = body
        return TranslatedRequest(out, req, client_model, req.model, req.stream)
    dst = get_codec(plan.upstream)
    wire = dst.encode_request(req, ctx)
    return TranslatedRequest(orjson.dumps(wire), req, client_model, req.model, req.stream)
