"""``Translate``: the mitmproxy addon that rewrites matching LLM API flows toward their upstream's protocol.

request          -> route (the model picks a route: the routes file, or the single-upstream shorthand),
                    translate the body, set URL and key; an invalid client body is answered 400 in the
                    client's shape. A route with more than one possible attempt goes through the ``Relay``
                    (failover before the first byte); otherwise mitmproxy forwards the flow itself.
responseheaders  -> for a 2xx ``text/event-stream`` answer, install the stream callable (``inbound``)
response         -> translate whole JSON bodies and upstream errors (same status, message, retry-after)
error            -> the upstream died: release the state, finish the client's stream where possible

Options are declared in ``options``; routes and key pools live in ``routing`` (sans-I/O rules in
``dragoman.routing``); URL and credentials in ``outbound``; the way back in ``inbound``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import flowfilter
from mitmproxy import http

from dragoman.errors import TranslationError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ledger import LedgerError
from dragoman.mitm import hosts
from dragoman.mitm import inbound
from dragoman.mitm import options
from dragoman.mitm import outbound
from dragoman.mitm.client_auth import CLIENT_METADATA_KEY
from dragoman.mitm.exchange import RoutedExchange
from dragoman.mitm.faults import IdleWatchdog
from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.mitm.flowstate import TARGET_OVERRIDE_KEY
from dragoman.mitm.flowstate import FlowState
from dragoman.mitm.flowstate import FlowStates
from dragoman.mitm.outbound import client_key
from dragoman.mitm.relay import Relay
from dragoman.mitm.routing import Routing
from dragoman.mitm.usage import UsageBook
from dragoman.mitm.usage import whole_usage
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.protocols.base import Context
from dragoman.routing.attempts import Attempts
from dragoman.routing.keyspec import resolve_key as resolve_api_key
from dragoman.routing.load import ConfigError
from dragoman.routing.load import config_from_options
from dragoman.routing.router import Candidate
from dragoman.routing.spec import Upstream
from dragoman.routing.url import UpstreamURL
from dragoman.routing.url import join_endpoint
from dragoman.routing.url import parse_upstream
from dragoman.translate.plan import ModelRule
from dragoman.translate.plan import Plan
from dragoman.translate.plan import parse_model_map
from dragoman.translate.request import ClientRequest
from dragoman.translate.request import decode_client_request
from dragoman.translate.request import encode_upstream_request
from dragoman.translate.response import error_body

__all__ = ["Translate", "client_key", "default_match", "join_endpoint", "parse_upstream", "resolve_api_key"]

logger = logging.getLogger(__name__)

JSON_CT = inbound.JSON_CT
#: the response header naming who answered a routed request
ROUTE_HEADER = "x-dragoman-route"
SHORTHAND_OPTIONS = ("dragoman_target", "dragoman_upstream", "dragoman_api_key", "dragoman_model_map")
ROUTING_OPTIONS = frozenset({"dragoman_config", *SHORTHAND_OPTIONS})
EXPOSURE_OPTIONS = frozenset({"dragoman_client_keys", "dragoman_allow_remote", "listen_host", "mode"})


def default_match(flow: http.HTTPFlow) -> bool:
    """POSTs to the official endpoints in every mode, to any endpoint path in reverse mode (see hosts.py)."""
    return hosts.default_match(flow)


class Translate:
    """Translate matching flows between Anthropic Messages, OpenAI Chat Completions and OpenAI Responses."""

    def __init__(self) -> None:
        # the single-upstream shorthand, as configured (also what Endpoints reads)
        self.target: Protocol | None = None
        self.upstream: UpstreamURL | None = None
        self.api_key: str | None = None
        self.model_map: list[ModelRule] = []
        self.match: Any = None  # a compiled flowfilter, or None for the default
        self.routing = Routing()
        self.usage = UsageBook()
        self.relay = Relay()
        self.flows = FlowStates()
        self._warned_deferred: set[str] = set()
        #: seconds without upstream bytes before a streamed flow is failed (0: never)
        self.idle_timeout = 300

    # -- options

    def load(self, loader: Any) -> None:
        options.declare(loader)

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "dragoman_idle_timeout" in updated:
            if opts.dragoman_idle_timeout < 0:
                raise exceptions.OptionsError(
                    f"Invalid dragoman_idle_timeout {opts.dragoman_idle_timeout}: give seconds as an integer >= 0 "
                    "(0 disables the timeout)"
                )
            self.idle_timeout = opts.dragoman_idle_timeout
        # mitmproxy enforces `choices` only on its command line, not for --set or the options API
        for name, allowed in options.CHOICES.items():
            if name in updated and getattr(opts, name) not in allowed:
                raise exceptions.OptionsError(
                    f"Invalid {name} {getattr(opts, name)!r}: choose one of {', '.join(repr(c) for c in allowed)}"
                )
        self._configure_shorthand(updated)
        if "dragoman_match" in updated:
            expr = opts.dragoman_match
            try:
                self.match = flowfilter.parse(expr) if expr.strip() else None
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot parse dragoman_match: {e}") from e
        if updated & ROUTING_OPTIONS:
            self._configure_routing()
        if updated & (ROUTING_OPTIONS | EXPOSURE_OPTIONS):
            self._check_exposure()
        if "dragoman_ledger" in updated:
            try:
                self.usage.open(opts.dragoman_ledger)
            except LedgerError as e:
                raise exceptions.OptionsError(f"Cannot use dragoman_ledger: {e}") from e

    def _check_exposure(self) -> None:
        """Refuse to serve upstream keys to the network without client keys (see ``client_auth``)."""
        auth = ctx.master.addons.get("clientauth")
        config = self.routing.config
        if auth is None or config is None:
            return
        auth.check_exposure(config.holds_keys)
        if auth.clients():
            keyless = [u.name for u in config.upstreams.values() if not u.keys]
            if keyless:
                logger.warning(
                    "client keys are configured, so a client's key never travels upstream: upstream(s) %s have no "
                    "keys of their own and get none",
                    ", ".join(keyless),
                )

    def _configure_shorthand(self, updated: set[str]) -> None:
        opts = ctx.options
        if "dragoman_target" in updated:
            self.target = Protocol(opts.dragoman_target) if opts.dragoman_target else None
        if "dragoman_upstream" in updated:
            value = opts.dragoman_upstream
            try:
                self.upstream = parse_upstream(value) if value.strip() else None
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot parse dragoman_upstream {value!r}: {e}") from e
        if "dragoman_api_key" in updated:
            try:
                self.api_key = resolve_api_key(opts.dragoman_api_key, os.environ)
            except ValueError as e:
                # never echo the option value: it may be the key itself
                raise exceptions.OptionsError(f"Cannot use dragoman_api_key: {e}") from e
        if "dragoman_model_map" in updated:
            try:
                self.model_map = parse_model_map(list(opts.dragoman_model_map))
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot parse dragoman_model_map: {e}") from e

    def _configure_routing(self) -> None:
        path = ctx.options.dragoman_config.strip()
        if not path:
            config = None
            if self.target is not None:
                config = config_from_options(self.target, self.upstream, self.api_key, self.model_map)
            self.routing.install(config)
            return
        clash = [n for n in SHORTHAND_OPTIONS if getattr(ctx.options, n)]
        if clash:
            raise exceptions.OptionsError(
                f"dragoman_config cannot be combined with {', '.join(clash)}: the routes file names every "
                "upstream, key and model (use UPSTREAM/MODEL in a route's `to` instead of dragoman_model_map); "
                "drop either the routes file or those options"
            )
        try:
            self.routing.load_file(Path(path).expanduser())
        except ConfigError as e:
            raise exceptions.OptionsError(f"Cannot use dragoman_config: {e}") from e

    async def running(self) -> None:
        self.warn_deferred()
        await self.relay.start()
        self.routing.start_watching()

    def done(self) -> None:
        self.routing.stop_watching()
        self.relay.stop()
        self.usage.close()

    def warn_deferred(self) -> None:
        """Unknown ``--set dragoman_*`` names are deferred silently by mitmproxy: they are typos."""
        for name in sorted(getattr(ctx.options, "deferred", {}) or {}):
            if name.startswith(options.OPTION_PREFIX) and name not in self._warned_deferred:
                self._warned_deferred.add(name)
                logger.warning(
                    "unknown option %s (ignored); Dragoman's options are: %s", name, ", ".join(self._option_names())
                )

    @staticmethod
    def _option_names() -> list[str]:
        return sorted(n for n in ctx.options.keys() if n.startswith(options.OPTION_PREFIX))

    @property
    def routed(self) -> bool:
        """Routes come from a routes file (not the single-upstream shorthand)."""
        return self.routing.path is not None

    # -- request

    def request(self, flow: http.HTTPFlow) -> None:
        # the Replayer sets the recorded upstream's protocol per flow
        override = flow.metadata.get(TARGET_OVERRIDE_KEY)
        config = self.routing.config
        if config is None and not override:
            return
        if flow.response is not None or flow.error is not None or flow.is_replay:
            return
        if not self._matches(flow):
            return
        client = detect(flow.request.path)
        if client is None:
            return
        try:
            cr = decode_client_request(flow.request.get_content(strict=False) or b"", client)
        except TranslationError as e:
            self._reject(flow, client, e.to_error_info())
            return
        except Exception as e:  # noqa: BLE001 - a codec bug must not reach the upstream or kill the flow
            logger.exception("flow %s: request translation failed", flow.id)
            self._reject(flow, client, _internal(f"Dragoman failed to translate the request: {type(e).__name__}"))
            return
        if override:
            route, candidates = "", [Candidate(Upstream("replay", Protocol(override), None), cr.client_model)]
        else:
            assert config is not None and self.routing.router is not None
            found = self.routing.router.route(cr.client_model)
            if found is None:
                self._reject(flow, client, self._no_route(cr.client_model))
                return
            route, candidates = found.match, self.routing.router.candidates(found, cr.client_model)
        if len(candidates) == 1 and len(candidates[0].upstream.keys) <= 1:
            self._direct(flow, client, cr, route, candidates[0])
        else:
            self._relayed(flow, client, cr, route, candidates)

    def _new_context(self) -> Context:
        return Context(
            strict=ctx.options.dragoman_strict,
            chat_reasoning_field=ctx.options.dragoman_chat_reasoning,
            chat_max_tokens_field=ctx.options.dragoman_chat_max_tokens_field,
        )

    def _encode(self, flow: http.HTTPFlow, cr: ClientRequest, plan: Plan, tctx: Context, model: str) -> bytes | None:
        try:
            return encode_upstream_request(cr, plan, tctx, model)
        except TranslationError as e:
            self._reject(flow, plan.client, e.to_error_info())
        except Exception as e:  # noqa: BLE001
            logger.exception("flow %s: request translation failed", flow.id)
            self._reject(flow, plan.client, _internal(f"Dragoman failed to translate the request: {type(e).__name__}"))
        return None

    def _state(
        self, flow: http.HTTPFlow, plan: Plan, tctx: Context, cr: ClientRequest, route: str, cand: Candidate
    ) -> FlowState:
        state = FlowState(plan, tctx, cr.client_model, cand.model, cr.stream)
        state.client_name = str(flow.metadata.get(CLIENT_METADATA_KEY, ""))
        if self.routed:
            state.route, state.upstream_name = route, cand.upstream.name
        return state

    def _direct(self, flow: http.HTTPFlow, client: Protocol, cr: ClientRequest, route: str, cand: Candidate) -> None:
        """One possible attempt: mitmproxy forwards the flow itself (no extra hop)."""
        up = cand.upstream
        plan = Plan(client, up.protocol)
        tctx = self._new_context()
        body = self._encode(flow, cr, plan, tctx, cand.model)
        if body is None:
            return
        state = self._state(flow, plan, tctx, cr, route, cand)
        self.flows.put(flow.id, state)
        outbound.rewrite_url(flow.request, up.url, up.protocol, plan.identity)
        outbound.rewrite_auth(flow.request.headers, up.protocol, up.keys[0].value if up.keys else None)
        headers = flow.request.headers
        headers["accept-encoding"] = "identity"
        if body is not cr.raw:
            headers.pop("content-encoding", None)
            headers.pop("transfer-encoding", None)
            flow.request.content = body
        flow.metadata[METADATA_KEY] = state.metadata()

    def _relayed(
        self, flow: http.HTTPFlow, client: Protocol, cr: ClientRequest, route: str, candidates: list[Candidate]
    ) -> None:
        """Several possible attempts: the relay tries them in order until one answers (see ``relay``)."""
        config = self.routing.config
        assert config is not None
        first = candidates[0]
        state = self._state(flow, Plan(client, first.upstream.protocol), self._new_context(), cr, route, first)
        exchange = RoutedExchange(flow, client, cr, state, self._new_context, self.routed)
        job = exchange.make_job(
            Attempts(candidates, self.routing.pools, config.limits),
            config.limits,
            float(self.idle_timeout),
            bool(getattr(ctx.options, "ssl_insecure", False)),
        )
        if not self.relay.port:
            self._reject(flow, client, _internal("Dragoman's relay is not running (failover needs mitmproxy running)"))
            return
        state.relay_token = self.relay.register(job)
        self.flows.put(flow.id, state)
        req = flow.request
        for name in (*outbound.AUTH_HEADERS, "cookie"):
            req.headers.pop(name, None)
        req.scheme, req.host, req.port = "http", "127.0.0.1", self.relay.port
        req.path = "/" + state.relay_token
        req.headers["accept-encoding"] = "identity"
        flow.metadata[METADATA_KEY] = state.metadata()

    # -- response

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or flow.response is None or flow.is_replay:
            return
        resp = flow.response
        if state.upstream_name:
            resp.headers[ROUTE_HEADER] = f"{state.upstream_name}/{state.upstream_model}"
        if not 200 <= resp.status_code < 300:
            return
        if not resp.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return
        if not inbound.install_stream(flow, state, self.usage.on):
            return
        if self.idle_timeout > 0 and state.relay_token is None:  # the relay watches relayed flows itself
            state.watchdog = IdleWatchdog(flow, self.idle_timeout).start()
        resp.stream = inbound.stream_callable(flow.id, state)

    def response(self, flow: http.HTTPFlow) -> None:
        state = self._release(flow)
        if state is None or flow.response is None:
            return
        if flow.is_replay:
            return
        if state.translator is None and self.usage.on and 200 <= flow.response.status_code < 300:
            whole_usage(state, flow.response.get_content(strict=False) or b"")
        if state.translator is None and not state.plan.identity:
            inbound.translate_whole(flow, state)
        self._show_upstream(flow, state)
        flow.metadata[METADATA_KEY] = state.metadata()
        inbound.log_done(flow, state, flow.response.status_code)
        self.usage.record(flow, state, flow.response.status_code, failed=state.relay_failure is not None)

    def error(self, flow: http.HTTPFlow) -> None:
        state = self._release(flow)
        if state is None:
            return
        message = flow.error.msg if flow.error else "unknown error"
        if state.watchdog is not None:
            timed_out = state.watchdog.timed_out
            state.watchdog.cancel()
            if state.translator is not None and inbound.final_error_frame(flow, state, message, timed_out, self.idle_timeout):
                flow.metadata[METADATA_KEY] = state.metadata()
                inbound.log_dropped(flow, state)
                self.usage.record(flow, state, flow.response.status_code if flow.response else 502, failed=True)
                return
        if state.translator is not None and state.started:
            # Measured on mitmproxy 11.0.2 and 12.2.3: when the upstream dies mid-stream, the stream
            # callable is never called with b"" and nothing more can be written; mitmproxy closes the
            # client connection without the terminating chunk, so every SDK raises a connection error.
            logger.warning(
                "flow %s: connection failed mid-stream after %d bytes to the client (%s); the client's stream is cut off",
                flow.id,
                state.sent,
                message,
            )
        else:
            logger.warning("flow %s: connection failed (%s)", flow.id, message)
        flow.metadata[METADATA_KEY] = state.metadata()
        inbound.log_dropped(flow, state)
        self.usage.record(flow, state, flow.response.status_code if flow.response else 502, failed=True)

    # -- internals

    def _release(self, flow: http.HTTPFlow) -> FlowState | None:
        state = self.flows.pop(flow.id)
        if state is None:
            return None
        if state.watchdog is not None and flow.error is None:
            state.watchdog.cancel()
        if state.relay_token is not None:
            self.relay.forget(state.relay_token)
        logger.debug("flow %s: state released, %d flows in flight", flow.id, len(self.flows))
        return state

    def _show_upstream(self, flow: http.HTTPFlow, state: FlowState) -> None:
        """A relayed flow went to 127.0.0.1: show the request the answering upstream really got."""
        if state.sent_request is None:
            return
        url, path, body = state.sent_request
        req = flow.request
        req.scheme = url.scheme
        req.host = url.host
        req.port = url.port
        req.path = path
        req.content = body

    def _matches(self, flow: http.HTTPFlow) -> bool:
        if self.match is None:
            return default_match(flow)
        return bool(self.match(flow))

    def _no_route(self, model: str) -> ErrorInfo:
        patterns = ", ".join(repr(r.match) for r in self.routing.config.routes) if self.routing.config else ""
        return ErrorInfo(
            kind=ErrorKind.NOT_FOUND,
            message=f"no route for model {model!r} (routes: {patterns}); add a route or a catch-all '*'",
            status=404,
        )

    def _reject(self, flow: http.HTTPFlow, client: Protocol, info: ErrorInfo) -> None:
        """Answer the client ourselves with an error in its own protocol; nothing is forwarded."""
        status = info.http_status
        flow.response = http.Response.make(status, error_body(info, client), {"content-type": JSON_CT})
        logger.warning("flow %s: %s request rejected with %d: %s", flow.id, client.value, status, info.message)


def _internal(message: str) -> ErrorInfo:
    return ErrorInfo(kind=ErrorKind.API_ERROR, message=message, status=500)


