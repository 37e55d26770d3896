"""``Endpoints``: the calls clients make besides the three conversation endpoints, on the hosts Dragoman
answers for (the official hosts in every mode, any host in reverse mode; see ``hosts.py``). Registered
before ``Translate``, active only while ``dragoman_target`` is set.

HEAD /                          answered 200 locally (Claude Code's preconnect probe)
GET  /v1/models[/ID]            the upstream's list, converted to the client's shape, plus the model map's
                                names, each once; answered from the model map alone when there is no upstream
                                list (no ``dragoman_upstream`` outside reverse mode, or a non-2xx/non-JSON
                                answer). A good list is kept ``dragoman_models_ttl`` seconds per upstream and
                                credential and answered from memory meanwhile.
                                ``/v1/models/ID`` is answered locally: every name is accepted (it is mapped)
POST /v1/messages/count_tokens  forwarded when the target is Anthropic; otherwise a local estimate
                                (``dragoman.translate.tokens``), marked ``x-dragoman-estimate: true``
POST /v1beta/models/M:countTokens  Gemini's: forwarded when the target is Gemini or Anthropic (``gemini_calls``),
                                the estimate when the upstream's answer is not a count; GET /v1beta/models in
                                Gemini's shape
GET  .../<model endpoint> + Upgrade: websocket
                                426 Upgrade Required (the Responses WebSocket is taken first by
                                ``responses.socket`` once its loopback peer is up)

It also makes mitmproxy connect lazily (``connection_strategy=lazy``) while Dragoman is on, unless the user
set ``connection_strategy`` explicitly: with the default (eager), regular mode dials the CONNECT host
before any hook runs (offline: 502 on CONNECT; online: a connection to the real API host).
"""

from __future__ import annotations

import hashlib
import logging
import os
from typing import Any

import orjson
from mitmproxy import ctx
from mitmproxy import http
from mitmproxy import optmanager

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm import gemini_calls
from dragoman.mitm import hosts
from dragoman.mitm import options
from dragoman.mitm.guards.scrub import Scrubber
from dragoman.mitm.keymask import KeyMask
from dragoman.mitm.keymask import mask_headers
from dragoman.mitm.keymask import mask_whole
from dragoman.mitm.outbound import CREDENTIAL_HEADERS
from dragoman.mitm.outbound import rewrite_auth
from dragoman.mitm.outbound import strip_credentials
from dragoman.mitm.relay import headers as hdr
from dragoman.mitm.route_state import Routing
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.routing.keyspec import resolve_key as resolve_api_key
from dragoman.routing.url import join_endpoint
from dragoman.routing.url import parse_upstream
from dragoman.translate import models as model_lists
from dragoman.translate.plan import map_model
from dragoman.translate.plan import parse_model_map
from dragoman.translate.response import error_body
from dragoman.translate.tokens import estimate_input_tokens

logger = logging.getLogger(__name__)

JSON_CT = "application/json"
MODELS_PATHS = ("/v1/models", "/v1beta/models", "/models")
COUNT_TOKENS_SUFFIX = "/messages/count_tokens"
#: flow.metadata key naming what Endpoints did with a flow (saved with -w)
METADATA_KEY = "dragoman_endpoint"
#: its values for a call sent to the upstream (whose answer is masked for the configured keys)
FORWARDED = ("count_tokens-forwarded", "countTokens-forwarded")


def is_websocket_upgrade(req: http.Request) -> bool:
    return (hdr.get(req.headers, b"upgrade", "") or "").strip().lower() == "websocket"


def models_request(path: str) -> tuple[bool, str | None] | None:
    """``(True, None)`` for a list, ``(True, ID)`` for ``/v1/models/ID``, None for another path."""
    p = hosts.bare_path(path)
    for prefix in MODELS_PATHS:
        if p == prefix:
            return True, None
        if p.startswith(prefix + "/") and "/" not in p[len(prefix) + 1 :]:
            return True, p[len(prefix) + 1 :]
    return None


def _cache_key(req: http.Request) -> tuple[str, ...]:
    """Which cached list a request may get: the same upstream (scheme, host, port, path) asked with the same
    credential; the credential is kept as a digest, never as the key itself."""
    secret = "\n".join(req.headers.get(name, "") for name in CREDENTIAL_HEADERS)
    digest = hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()
    return (req.scheme, req.host, str(req.port), req.path, digest)


def option_is_set(name: str) -> bool:
    """The user set ``name`` (``--set``, config file or the console), even to its default value."""
    try:
        return ctx.options._options[name].value is not optmanager.unset  # noqa: SLF001 - no public API for this
    except (AttributeError, KeyError):
        return True  # cannot tell: leave it alone


class Endpoints:
    """HEAD /, model lists, count_tokens and the WebSocket refusal (see the module docstring)."""

    def __init__(self) -> None:
        self.target: Protocol | None = None
        self.upstream: Any = None  # translate_addon.Upstream
        self.api_key: str | None = None
        self.model_map: list = []
        #: flow id -> the client's model-list shape and the cache key, for forwarded GET /v1/models
        self.pending: dict[str, tuple[Protocol, tuple[str, ...]]] = {}
        #: upstream model lists by upstream and credential (``dragoman_models_ttl``)
        self.models_cache = model_lists.ModelListCache(options.MODELS_TTL_DEFAULT)
        #: flow id -> the client's body of a forwarded ``:countTokens`` (estimated if the upstream fails)
        self.counts: dict[str, bytes] = {}
        #: forwarded flows carrying credentials until their request is sent
        self.scrubber = Scrubber()

    # -- options (declared and validated by Translate; read here, errors left to it)

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "dragoman_target" in updated and hasattr(opts, "dragoman_target"):
            value = opts.dragoman_target
            try:
                self.target = Protocol(value) if value else None
            except ValueError:
                self.target = None
        if "dragoman_upstream" in updated and hasattr(opts, "dragoman_upstream"):
            try:
                value = opts.dragoman_upstream
                self.upstream = parse_upstream(value) if value.strip() else None
            except ValueError:
                self.upstream = None
        if "dragoman_api_key" in updated and hasattr(opts, "dragoman_api_key"):
            try:
                self.api_key = resolve_api_key(opts.dragoman_api_key, os.environ)
            except ValueError:
                self.api_key = None
        if "dragoman_model_map" in updated and hasattr(opts, "dragoman_model_map"):
            try:
                self.model_map = parse_model_map(list(opts.dragoman_model_map))
            except ValueError:
                self.model_map = []
        if "dragoman_models_ttl" in updated and hasattr(opts, "dragoman_models_ttl"):
            self.models_cache.ttl = max(0, opts.dragoman_models_ttl)
        if updated & {"dragoman_target", "dragoman_upstream", "dragoman_api_key", "dragoman_models_ttl"}:
            self.models_cache.clear()  # another upstream, key or lifetime: no list from before stays
        if updated & {"dragoman_target", "dragoman_config", "connection_strategy"}:
            self.ensure_lazy()

    def running(self) -> None:
        self.ensure_lazy()

    def _routing(self) -> Routing | None:
        """The Translate addon's routes, when they come from a routes file (``dragoman_config``)."""
        translate = ctx.master.addons.get("translate") if hasattr(ctx, "master") else None
        routing = getattr(translate, "routing", None)
        return routing if routing is not None and routing.path is not None else None

    @property
    def active(self) -> bool:
        return self.target is not None or bool(getattr(ctx.options, "dragoman_config", ""))

    def ensure_lazy(self) -> None:
        """``connection_strategy=lazy`` while Dragoman is on, unless the user chose a strategy."""
        if not self.active or not hasattr(ctx.options, "connection_strategy"):
            return
        if ctx.options.connection_strategy == "lazy" or option_is_set("connection_strategy"):
            return
        ctx.options.update(connection_strategy="lazy")
        logger.info("connection_strategy set to lazy: upstream connections open only for the flows that need one")

    # -- hooks

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None or flow.is_replay or not self.active:
            return
        if not hosts.in_scope(flow):
            return
        req = flow.request
        path = hosts.bare_path(req.path)
        if is_websocket_upgrade(req):
            if detect(path) is not None:
                self._refuse_websocket(flow)
            return
        if req.method == "HEAD" and path == "/":
            self._answer(flow, 200, b"", "text/plain", "head")
            return
        models = models_request(path) if req.method == "GET" else None
        if models is not None:
            self._models(flow, models[1])
            return
        if req.method == "POST" and (path.endswith("/v1" + COUNT_TOKENS_SUFFIX) or path == COUNT_TOKENS_SUFFIX):
            self._count_tokens(flow)
        elif req.method == "POST" and gemini_calls.is_count_tokens(path):
            self._gemini_count_tokens(flow)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        self.scrubber.sent(flow)
        if flow.metadata.get(METADATA_KEY) in FORWARDED and flow.response is not None:
            mask_headers(flow.response, self._keys())

    def response(self, flow: http.HTTPFlow) -> None:
        self.scrubber.sent(flow)
        if flow.metadata.get(METADATA_KEY) in FORWARDED and not flow.is_replay:
            mask_whole(flow, self._keys())
        counted = self.counts.pop(flow.id, None)
        if counted is not None and flow.response is not None and not flow.is_replay:
            if gemini_calls.answer(flow.response, self.target, counted):
                logger.info("flow %s: the upstream could not count; estimated", flow.id)
                flow.metadata[METADATA_KEY] = "countTokens-estimated"
        pending = self.pending.pop(flow.id, None)
        if pending is None or flow.response is None or flow.is_replay:
            return
        shape, key = pending
        resp = flow.response
        listed = None
        if 200 <= resp.status_code < 300:
            try:
                listed = model_lists.parse_model_list(orjson.loads(resp.get_content(strict=False) or b""))
            except (orjson.JSONDecodeError, ValueError):
                listed = None
        if listed is None:
            logger.info(
                "flow %s: the upstream's model list is unusable (status %d); answering from the model map",
                flow.id,
                resp.status_code,
            )
            listed = []
        else:
            self.models_cache.put(key, listed)
        merged = model_lists.merge(listed, model_lists.model_map_models(self.model_map))
        body = orjson.dumps(model_lists.model_list(merged, shape))
        if resp.status_code != 200:
            resp.status_code = 200
            resp.reason = "OK"
        for name in ("content-encoding", "transfer-encoding", "content-length"):
            resp.headers.pop(name, None)
        resp.headers["content-type"] = JSON_CT
        resp.content = body
        flow.metadata[METADATA_KEY] = "models"

    def error(self, flow: http.HTTPFlow) -> None:
        self.scrubber.sent(flow)
        self.pending.pop(flow.id, None)
        self.counts.pop(flow.id, None)

    def done(self) -> None:
        self.scrubber.done()

    # -- the calls

    def _answer(self, flow: http.HTTPFlow, status: int, body: bytes, content_type: str, what: str, **headers) -> None:
        flow.response = http.Response.make(status, body, {"content-type": content_type, **headers})
        flow.metadata[METADATA_KEY] = what
        logger.debug("flow %s: %s answered locally (%d)", flow.id, what, status)

    def _refuse_websocket(self, flow: http.HTTPFlow) -> None:
        info = ErrorInfo(
            kind=ErrorKind.INVALID_REQUEST,
            message="Dragoman does not translate WebSocket streams; use HTTP streaming (SSE)",
            status=426,
        )
        self._answer(
            flow,
            426,
            error_body(info, Protocol.OPENAI_RESPONSES),
            JSON_CT,
            "websocket-refused",
            connection="close",
        )
        logger.info(
            "flow %s: WebSocket upgrade on %s refused (426): the client falls back to HTTP",
            flow.id,
            logsafe(flow.request.path),
        )

    def _models(self, flow: http.HTTPFlow, model_id: str | None) -> None:
        shape = model_lists.family(hosts.client_shape(flow))
        if model_id is not None:
            obj = model_lists.model_object(model_lists.ModelInfo(model_id), shape)
            self._answer(flow, 200, orjson.dumps(obj), JSON_CT, "model")
            return
        routing = self._routing()
        if routing is not None and routing.router is not None:
            # every model the routes make reachable (each upstream's own list would name models no route serves)
            router = routing.router
            names = [model_lists.ModelInfo(m, limits=router.limits_for(m)) for m in router.listed_models()]
            self._answer(flow, 200, orjson.dumps(model_lists.model_list(names, shape)), JSON_CT, "models")
            return
        reverse = hosts.is_reverse(flow)
        if self.upstream is None and not reverse:
            # the official host's own list would name models the upstream does not serve
            body = model_lists.model_list(model_lists.model_map_models(self.model_map), shape)
            self._answer(flow, 200, orjson.dumps(body), JSON_CT, "models")
            return
        target = self.target
        assert target is not None
        self._route(flow, join_endpoint(self.upstream.path if self.upstream else "", "/v1/models"))
        self._rewrite_auth(flow.request, target)
        key = _cache_key(flow.request)
        cached = self.models_cache.get(key)
        if cached is not None:
            strip_credentials(flow.request)  # answered here: the saved flow keeps no key
            merged = model_lists.merge(cached, model_lists.model_map_models(self.model_map))
            self._answer(flow, 200, orjson.dumps(model_lists.model_list(merged, shape)), JSON_CT, "models-cached")
            return
        self.scrubber.hold(flow)
        flow.request.headers["accept-encoding"] = "identity"
        self.pending[flow.id] = (shape, key)

    def _count_tokens(self, flow: http.HTTPFlow) -> None:
        raw = flow.request.get_content(strict=False) or b""
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            info = ErrorInfo(kind=ErrorKind.INVALID_REQUEST, message="request body is not a JSON object", status=400)
            self._answer(flow, 400, error_body(info, Protocol.ANTHROPIC_MESSAGES), JSON_CT, "count_tokens")
            return
        routing = self._routing()
        if routing is not None:
            if self._count_tokens_routed(flow, body, routing):
                return
        elif self.target is Protocol.ANTHROPIC_MESSAGES:
            model = body.get("model")
            if isinstance(model, str):
                mapped = map_model(self.model_map, model)
                if mapped != model:
                    body["model"] = mapped
                    flow.request.content = orjson.dumps(body)
            if self.upstream is not None:
                self._route(flow, join_endpoint(self.upstream.path, "/v1" + COUNT_TOKENS_SUFFIX))
            self._rewrite_auth(flow.request, Protocol.ANTHROPIC_MESSAGES)
            self.scrubber.hold(flow)
            flow.metadata[METADATA_KEY] = "count_tokens-forwarded"
            return
        tokens = estimate_input_tokens(body)
        self._answer(
            flow,
            200,
            orjson.dumps({"input_tokens": tokens}),
            JSON_CT,
            "count_tokens-estimated",
            **{"x-dragoman-estimate": "true"},
        )

    def _gemini_count_tokens(self, flow: http.HTTPFlow) -> None:
        """Forward to a Gemini upstream (or keep the host: the Google API) or an Anthropic one with a base URL
        (or the reverse target); estimate otherwise (a routes file, another target, nowhere to send it)."""
        req = flow.request
        raw = req.get_content(strict=False) or b""
        target, up = self.target, self.upstream
        # without a base URL: the reverse target, or Google's API host itself (not Code Assist's: no such path there)
        google_api = target is Protocol.GEMINI and "/v1internal:" not in req.path
        known_host = up is not None or hosts.is_reverse(flow) or google_api
        fwd = None
        if self._routing() is None and target is not None and known_host:
            fwd = gemini_calls.forward(raw, req.path, up.path if up is not None else "", target, self.model_map)
        if fwd is None:
            status, body = gemini_calls.count_tokens(raw)
            self._answer(flow, status, body, JSON_CT, "countTokens", **{"x-dragoman-estimate": "true"})
            return
        assert target is not None
        self._rewrite_auth(req, target)  # reads a ``?key=`` before the path is replaced
        self._route(flow, fwd[0])
        req.path = fwd[0]  # no query: a client's ``key=`` stays here
        req.content = fwd[1]
        req.headers["accept-encoding"] = "identity"
        self.counts[flow.id] = raw
        self.scrubber.hold(flow)
        flow.metadata[METADATA_KEY] = "countTokens-forwarded"

    def _count_tokens_routed(self, flow: http.HTTPFlow, body: dict[str, Any], routing: Routing) -> bool:
        """Forward to the route's first upstream when it speaks Anthropic and has a base URL; False: estimate."""
        model = body.get("model")
        router = routing.router
        if not isinstance(model, str) or router is None:
            return False
        route = router.route(model)
        if route is None:
            return False
        first = router.candidates(route, model)[0]
        up = first.upstream
        if up.protocol is not Protocol.ANTHROPIC_MESSAGES or up.url is None:
            return False
        if first.model != model:
            body["model"] = first.model
            flow.request.content = orjson.dumps(body)
        req = flow.request
        req.scheme, req.host, req.port = up.url.scheme, up.url.host, up.url.port
        req.path = join_endpoint(up.url.path, "/v1" + COUNT_TOKENS_SUFFIX)
        rewrite_auth(req, Protocol.ANTHROPIC_MESSAGES, up.keys[0].value if up.keys else None)
        self.scrubber.hold(flow)
        flow.metadata[METADATA_KEY] = "count_tokens-forwarded"
        return True

    # -- helpers

    def _route(self, flow: http.HTTPFlow, path: str) -> None:
        req = flow.request
        _, sep, query = req.path.partition("?")
        up = self.upstream
        if up is not None:
            req.scheme = up.scheme  # scheme first: setting host/port then fixes the Host header
            req.host = up.host
            req.port = up.port
        req.path = path + (sep + query if sep else "")

    def _keys(self) -> KeyMask:
        """The configured keys, from the Translate addon (which follows the routes file's reloads)."""
        translate = ctx.master.addons.get("translate") if hasattr(ctx, "master") else None
        keys = getattr(translate, "keys", None)
        return keys if isinstance(keys, KeyMask) else KeyMask([self.api_key] if self.api_key else [])

    def _rewrite_auth(self, req: http.Request, target: Protocol) -> None:
        """Like Translate: the configured key (client credentials removed) or the client's key moved."""
        rewrite_auth(req, target, self.api_key)
