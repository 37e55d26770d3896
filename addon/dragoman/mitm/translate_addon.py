"""``Translate``: the mitmproxy addon that rewrites matching LLM API flows toward their upstream's protocol.

request          -> route (the model picks a route: the routes file, or the single-upstream shorthand),
                    translate the body, set URL and key; an invalid client body is answered 400 in the
                    client's shape. A request (streamed or not) from a plain-HTTP/1.1 client with one possible
                    attempt is forwarded by mitmproxy itself; every other flow goes through the ``Relay``
                    (failover before the first byte, faults framed for TLS and HTTP/2 clients).
responseheaders  -> for a 2xx ``text/event-stream`` answer, install the stream callable (``inbound``)
response         -> translate whole JSON bodies and upstream errors (same status, message, retry-after)
error            -> the upstream died: release the state, finish the client's stream where possible

Options are declared in ``options``; routes and key pools live in ``routing`` (sans-I/O rules in
``dragoman.routing``); URL and credentials in ``outbound``; the way back in ``inbound``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable

from mitmproxy import ctx
from mitmproxy import http
from mitmproxy.net.http import status_codes

from dragoman.errors import TranslationError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm import hosts
from dragoman.mitm import keymask
from dragoman.mitm import outbound
from dragoman.mitm.answer import callables
from dragoman.mitm.answer import faults
from dragoman.mitm.answer import inbound
from dragoman.mitm.answer.faults import IdleWatchdog
from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.mitm.flowstate import TARGET_OVERRIDE_KEY
from dragoman.mitm.flowstate import FlowState
from dragoman.mitm.flowstate import detach_stream
from dragoman.mitm.flowstate import log_done
from dragoman.mitm.flowstate import log_dropped
from dragoman.mitm.guards import lint
from dragoman.mitm.guards.client_auth import CLIENT_METADATA_KEY
from dragoman.mitm.outbound import client_key
from dragoman.mitm.relay import headers as hdr
from dragoman.mitm.relay.exchange import RoutedExchange
from dragoman.mitm.relay.relay import RelayJob
from dragoman.mitm.relay.upstream_http import trust_from_options
from dragoman.mitm.route_state import log_placeholders
from dragoman.mitm.translate_config import TranslateConfig
from dragoman.mitm.usage import whole_usage
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.protocols.base import Context
from dragoman.routing.attempts import Attempts
from dragoman.routing.keyspec import resolve_key as resolve_api_key
from dragoman.routing.router import Candidate
from dragoman.routing.spec import Upstream
from dragoman.routing.spec import anthropic_cache
from dragoman.routing.spec import upstream_profile
from dragoman.routing.url import join_endpoint
from dragoman.routing.url import parse_upstream
from dragoman.translate.plan import Plan
from dragoman.translate.request import ClientRequest
from dragoman.translate.request import decode_client_request
from dragoman.translate.request import encode_upstream_request
from dragoman.translate.response import error_body

__all__ = ["Translate", "client_key", "default_match", "join_endpoint", "parse_upstream", "resolve_api_key"]

logger = logging.getLogger(__name__)

JSON_CT = inbound.JSON_CT
#: the framing a translated request body replaces (its length is set anew)
_NEW_BODY_DROP = frozenset({b"content-encoding", b"transfer-encoding"})
ROUTE_HEADER, LOSSY_HEADER = inbound.ROUTE_HEADER, inbound.LOSSY_HEADER


def default_match(flow: http.HTTPFlow) -> bool:
    """POSTs to the official endpoints in every mode, to any endpoint path in reverse mode (see hosts.py)."""
    return hosts.default_match(flow)


class Translate(TranslateConfig):
    """Translate matching flows between Anthropic Messages, OpenAI Chat Completions and OpenAI Responses."""

    # -- request

    def request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        # the Replayer sets the recorded upstream's protocol per flow
        override = flow.metadata.get(TARGET_OVERRIDE_KEY)
        config = self.routing.config
        if config is None and not override:
            return None
        if flow.response is not None or flow.error is not None or flow.is_replay:
            return None
        if not self._matches(flow):
            return None
        client = detect(flow.request.path)
        if client is None:
            return None
        try:
            cr = decode_client_request(hdr.body(flow.request), client, self.keep_images, flow.request.path)
        except TranslationError as e:
            self._reject(flow, client, e.to_error_info())
            return None
        except Exception as e:  # noqa: BLE001 - a codec bug must not reach the upstream or kill the flow
            logger.exception("flow %s: request translation failed", flow.id)
            self._reject(flow, client, _internal(f"Dragoman failed to translate the request: {type(e).__name__}"))
            return None
        if override:
            route, candidates = "", [Candidate(Upstream("replay", Protocol(override), None), cr.client_model)]
        else:
            assert config is not None and self.routing.router is not None
            found = self.routing.router.route(cr.client_model)
            if found is None:
                self._reject(flow, client, self._no_route(cr.client_model))
                return None
            route, candidates = found.match, self.routing.router.candidates(found, cr.client_model)
            if client is Protocol.OPENAI_RESPONSES:  # previous_response_id, and what storing the answer needs
                prepared = self.responses.prepare(flow, cr, candidates, self.routed)
                if isinstance(prepared, ErrorInfo):
                    self._reject(flow, client, prepared)
                    return None
                cr = prepared
        if all(c.upstream.protocol is not client for c in candidates):
            # every attempt is translated: the client's bytes are not needed any more, so a large body is
            # held as its parsed text plus the translated body, not three times (issue 23, 3(e))
            cr.raw = b""
        single = len(candidates) == 1 and len(candidates[0].upstream.keys) <= 1
        held = self.gate.held.token(flow) is not None  # its connection goes to the relay already (``held``)
        if override or not self.relay.port or (single and _plain_http1(flow) and not held):
            # mitmproxy forwards the flow itself: a replayed flow (to the Replayer's own server), no running
            # relay (unit tests with taddons), or a request from a plain-HTTP/1.1 client with one possible
            # attempt (nothing to fail over to), where the addon can still answer a refused or dropped upstream
            # in JSON and finish the client's stream after an upstream fault (``faults``, from ``error``) —
            # and the loopback hop's cost is saved (measured: 9-16 µs of mitmdump CPU per streamed event,
            # about 1 ms per short request, issue 31)
            if not single:
                _drop_body(flow, cr)
                self._reject(
                    flow, client, _internal("Dragoman's relay is not running (failover needs mitmproxy running)")
                )
                return None
            self._direct(flow, client, cr, route, candidates[0])  # sets the translated body
        else:
            _drop_body(flow, cr)
            # Everything else runs the relay's attempts, even with a single attempt: they read whole answers in
            # full (a dropped or refused upstream becomes a JSON 502 in the client's protocol) — in this hook,
            # for a request that is not streamed — and a stream goes through the relay's loopback server,
            # which ends a failed stream cleanly, so the client's protocol error event reaches it over TLS and
            # HTTP/2 too; mitmproxy's own forwarding gives an HTML 502 and cuts the stream there.
            return self._relayed(flow, client, cr, route, candidates)
        return None

    def _new_context(self, up: Upstream, flow: http.HTTPFlow, model: str) -> Context:
        config = self.routing.config
        opts = self.context_options
        if opts is None:  # not configured yet (an addon driven without ``configure``)
            o = ctx.options
            opts = (o.dragoman_strict, o.dragoman_chat_reasoning, o.dragoman_chat_max_tokens_field)
        return Context(
            strict=opts[0],
            chat_reasoning_field=opts[1],
            chat_max_tokens_field=opts[2],
            profile=upstream_profile(up, flow.request.host, flow.request.port),
            model_limits=config.model_limits(up.name, model) if config is not None else None,
            anthropic_cache=anthropic_cache(up, flow.request.host),
            mcp_prefix=self.mcp_prefix,
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
        state.ticket = cr.state_ticket
        if self.routed:
            state.route, state.upstream_name = route, cand.upstream.name
        return state

    def _direct(self, flow: http.HTTPFlow, client: Protocol, cr: ClientRequest, route: str, cand: Candidate) -> None:
        """One possible attempt: mitmproxy forwards the flow itself (no extra hop)."""
        up = cand.upstream
        plan = Plan(client, up.protocol)
        tctx = self._new_context(up, flow, cand.model)
        body = self._encode(flow, cr, plan, tctx, cand.model)
        if body is None:
            _drop_body(flow, cr)
            return
        log_placeholders(flow.id, tctx)
        state = self._state(flow, plan, tctx, cr, route, cand)
        self.flows.put(flow.id, state)
        req = flow.request
        outbound.rewrite_url(req, up.url, up.protocol, plan.identity, cand.model, cr.stream)
        # the key, the framing of a new body and ``accept-encoding`` in one pass over the headers
        puts: list[outbound.Put] = [(b"accept-encoding", "identity")]
        new_body = body is not cr.raw or cr.rewritten
        if new_body:
            puts.append((b"content-length", str(len(body))))
        drop = _NEW_BODY_DROP if new_body else ()
        outbound.rewrite_auth(req, up.protocol, up.keys[0].value if up.keys else None, drop, puts)
        if new_body:
            req.raw_content = body  # no content-encoding left: the body as it goes (what ``content =`` sets)
        self.scrubber.hold(flow)  # the credentials leave the flow once the request is sent
        flow.metadata[METADATA_KEY] = state.metadata()

    def _relayed(
        self, flow: http.HTTPFlow, client: Protocol, cr: ClientRequest, route: str, candidates: list[Candidate]
    ) -> Awaitable[None] | None:
        """Several possible attempts: the relay tries them in order until one answers (see ``relay``)."""
        config = self.routing.config
        assert config is not None
        first = candidates[0]
        first_ctx = self._new_context(first.upstream, flow, first.model)
        state = self._state(flow, Plan(client, first.upstream.protocol), first_ctx, cr, route, first)
        exchange = RoutedExchange(
            flow, client, cr, state, lambda up, model: self._new_context(up, flow, model), self.routed
        )
        job = exchange.make_job(
            Attempts(candidates, self.routing.pools, config.limits),
            config.limits,
            float(self.idle_timeout),
            trust_from_options(),
        )
        self.relay.keys = self.keys
        token = self.gate.held.token(flow)
        if token is None and not cr.stream:
            # a whole answer: the attempts run in this hook and their answer becomes the flow's response (no
            # loopback hop; mitmproxy never connects upstream for this flow)
            self.flows.put(flow.id, state)
            outbound.pop_credential_headers(flow.request.headers)  # the job holds what each attempt sends
            flow.metadata[METADATA_KEY] = state.metadata()
            return self._answer_whole(flow, state, job)
        if token is not None:
            self.relay.jobs[token] = job
            state.relay_token = token
        else:
            state.relay_token = self.relay.register(job)
        self.flows.put(flow.id, state)
        req = flow.request
        outbound.pop_credential_headers(req.headers)  # the relay job holds what each attempt sends
        req.scheme, req.host, req.port = "http", "127.0.0.1", self.relay.port
        req.path = "/" + state.relay_token
        req.headers["accept-encoding"] = "identity"
        # the relay sends the translated body itself (``state.sent_request`` shows it afterwards): the client's
        # body does not travel to it (no copy of a large body in mitmproxy's transport, no loopback transfer)
        req.headers.pop("content-encoding", None)
        req.content = b""
        flow.metadata[METADATA_KEY] = state.metadata()
        return None

    async def _answer_whole(self, flow: http.HTTPFlow, state: FlowState, job: RelayJob) -> None:
        try:
            answer = await self.relay.whole_answer(job)
        except Exception:  # noqa: BLE001 - a bug must not leave the flow to be forwarded unanswered
            logger.exception("flow %s: running the upstream attempts failed", flow.id)
            answer = job.error_answer(502, "Dragoman failed to run the upstream attempts", None)
        headers = http.Headers([(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers])
        hdr.edit(headers, put=[(b"content-length", str(len(answer.body)))])
        reason = status_codes.RESPONSES.get(answer.status, "").encode()
        now = time.time()
        # the body as the upstream sent it (the response hook decodes and translates it); what
        # ``Response.make`` builds, without setting an empty body first
        flow.response = http.Response(b"HTTP/1.1", answer.status, reason, headers, answer.body, None, now, now)
        flow.metadata[METADATA_KEY] = state.metadata()

    # -- response

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        self.scrubber.sent(flow)
        state = self.flows.get(flow.id)
        if state is None or flow.response is None or flow.is_replay:
            return
        resp = flow.response
        keymask.mask_headers(resp, self.keys)
        # (none of ``puts`` is a header read below: a stream's framing headers are set with them, in one pass)
        puts = inbound.answer_puts(resp, state, self.lossy_header)
        if not (
            inbound.is_sse_2xx(resp)
            and inbound.install_stream(
                flow, state, self.usage.on, self.max_sse_event, self.keep_answer, self.lint, puts
            )
        ):
            if puts:
                hdr.edit(resp.headers, put=puts)
            return
        if self.idle_timeout > 0 and state.relay_token is None:  # the relay watches relayed flows itself
            state.watchdog = IdleWatchdog(flow, self.idle_timeout).start()
        resp.stream = callables.stream_callable(flow.id, state, self.keys)

    def response(self, flow: http.HTTPFlow) -> None:
        self.scrubber.sent(flow)
        state = self._release(flow)
        if state is None or flow.response is None:
            return
        if flow.is_replay:
            return
        inbound.carry_request_id(flow.response, state)
        whole = state.translator is None
        translated = whole and not state.plan.identity
        if (
            whole
            and self.usage.on
            and 200 <= flow.response.status_code < 300
            and not inbound.json_translated(flow, state)
        ):
            # (a translated JSON answer's usage is read as it is translated: the body is parsed once)
            whole_usage(state, hdr.body(flow.response))
        if whole:
            inbound.rename_back_whole(flow, state)
        linted = lint.whole_before(flow, state, self.lint) if whole else None
        upstream_status = flow.response.status_code
        if translated:
            if self.keep_answer:  # the view's upstream side of a whole answer, read before it is translated
                state.upstream_whole = inbound.assemble_whole(flow.response, state.plan.upstream)
            # the whole answer has not left yet: its lossy count is the full one (set with its other headers)
            inbound.translate_whole(flow, state, inbound.LOSSY_HEADER_B if self.lossy_header else b"")
        if state.ticket is not None and state.translator is None and 200 <= flow.response.status_code < 300:
            state.ticket.offer_whole(state, hdr.body(flow.response))
        lint.whole_after(flow, state, linted, upstream_status)
        keymask.mask_whole(flow, self.keys)
        self._show_upstream(flow, state)
        if state.answer_tap is not None and flow.response.raw_content is None:
            # mitmproxy keeps no streamed body (None: "content missing", no content view is asked); an empty
            # body lets the Dragoman view show the answer assembled in the metadata
            flow.response.raw_content = b""
        flow.metadata[METADATA_KEY] = state.metadata()
        log_done(flow, state, flow.response.status_code, self.warned_losses)
        self.usage.record(flow, state, flow.response.status_code, failed=state.relay_failure is not None)

    def error(self, flow: http.HTTPFlow) -> None:
        self.scrubber.sent(flow)
        state = self._release(flow)
        if state is None:
            return
        lint.on_abort(flow.id, state)  # ``dragoman_lint=log``: the bytes gathered but not checked yet
        message = flow.error.msg if flow.error else "unknown error"
        if state.watchdog is not None:
            timed_out = state.watchdog.timed_out
            state.watchdog.cancel()
            if state.translator is not None and faults.final_error_frame(
                flow, state, message, timed_out, self.idle_timeout
            ):
                flow.metadata[METADATA_KEY] = state.metadata()
                log_dropped(flow, state, self.warned_losses)
                self.usage.record(flow, state, flow.response.status_code if flow.response else 502, failed=True)
                return
        if state.translator is None and faults.error_answer(flow, state, message):
            # nothing reached the client yet (refused, or dropped before a streamed body began): mitmproxy
            # would answer with its HTML page; the client got a JSON error in its protocol instead
            flow.metadata[METADATA_KEY] = state.metadata()
            log_dropped(flow, state, self.warned_losses)
            self.usage.record(flow, state, 502, failed=True)
            return
        if state.translator is not None and state.started:
            # Measured on mitmproxy 11.0.2 and 12.2.3: when the upstream dies mid-stream, the stream
            # callable is never called with b"" and nothing more can be written; mitmproxy closes the
            # client connection without the terminating chunk, so every SDK raises a connection error.
            logger.warning(
                "flow %s: connection failed mid-stream after %d bytes to the client (%s); the client's stream is cut off",
                flow.id,
                state.sent,
                logsafe(message),
            )
        else:
            logger.warning("flow %s: connection failed (%s)", flow.id, logsafe(message))
        flow.metadata[METADATA_KEY] = state.metadata()
        log_dropped(flow, state, self.warned_losses)
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
        detach_stream(flow, callables.STREAM_CODES)  # the stream is over: its state goes now, not with the flow
        logger.debug("flow %s: state released, %d flows in flight", flow.id, len(self.flows))
        return state

    def _show_upstream(self, flow: http.HTTPFlow, state: FlowState) -> None:
        """A relayed flow went to 127.0.0.1: show the request the answering upstream really got."""
        if state.sent_request is None:
            return
        url, path, body = state.sent_request
        req = flow.request
        outbound.point_at(req, url.scheme, url.host, url.port)
        req.path = path
        hdr.set_body(req, body)

    def matches(self, flow: http.HTTPFlow) -> bool:
        return self._matches(flow)

    def _matches(self, flow: http.HTTPFlow) -> bool:
        if self.match is None:
            return default_match(flow)
        # a user filter may name hosts (``~d`` also reads the Host header): a flow whose Host header names
        # another host than its connection goes to is never taken for one the filter names
        if not hosts.is_reverse(flow) and not hosts.host_header_agrees(flow):
            return False
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
        logger.warning("flow %s: %s request rejected with %d: %s", flow.id, client.value, status, logsafe(info.message))


def _drop_body(flow: http.HTTPFlow, cr: ClientRequest) -> None:
    """Every attempt is translated (``cr.raw`` emptied): the client's bytes leave the flow too, so a large body
    is held as its parsed text plus the translated body, not three times (issue 23, 3(e))."""
    if not cr.raw and flow.request.raw_content:
        hdr.set_body(flow.request, b"")


def _plain_http1(flow: http.HTTPFlow) -> bool:
    """The client talks HTTP/1.x without TLS: the connection the addon can write a last frame to."""
    return not flow.client_conn.tls and flow.request.http_version.startswith("HTTP/1")


def _internal(message: str) -> ErrorInfo:
    return ErrorInfo(kind=ErrorKind.API_ERROR, message=message, status=500)
