"""``RoutedExchange``: what the relay needs from the addon for one routed flow — how to prepare each attempt
(translate for its upstream's protocol, set its key), and how the answering attempt becomes the flow's state."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import orjson
from mitmproxy import http

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.mitm import hosts
from dragoman.mitm import outbound
from dragoman.mitm.flowstate import FlowState
from dragoman.mitm.relay.relay import Failure
from dragoman.mitm.relay.relay import Prepared
from dragoman.mitm.relay.relay import RelayJob
from dragoman.mitm.relay.upstream_http import Trust
from dragoman.mitm.route_state import log_placeholders
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.routing.attempts import Attempt
from dragoman.routing.attempts import Attempts
from dragoman.routing.spec import Limits
from dragoman.routing.spec import Upstream
from dragoman.routing.url import UpstreamURL
from dragoman.translate.plan import Plan
from dragoman.translate.request import ClientRequest
from dragoman.translate.request import encode_upstream_request

JSON_CT = "application/json"


class RoutedExchange:
    def __init__(
        self,
        flow: http.HTTPFlow,
        client: Protocol,
        cr: ClientRequest,
        state: FlowState,
        new_context: Callable[[Upstream, str], Context],
        named: bool,
    ) -> None:
        req = flow.request
        self.flow_id = flow.id
        self.client = client
        self.cr = cr
        self.state = state
        self.new_context = new_context
        #: routes come from a file: name the answering upstream in the state
        self.named = named
        self.own_key = outbound.client_key(req.headers, req.path.partition("?")[2])
        self.client_headers = list(req.headers.items(multi=True))
        #: where the client was going (for an upstream without a base URL): the destination by name, so the
        #: relay checks the certificate against the name the flow was intercepted for (the SNI of a TLS flow
        #: to an IP), as mitmproxy's own connection would
        self.origin = UpstreamURL(req.scheme, hosts.destination_host(flow), req.port, "")
        #: the client's query string, kept for a same-protocol upstream (as mitmproxy's own forwarding does)
        self.query = req.path.partition("?")[2]
        self.prepared: dict[int, tuple[Plan, Context, Prepared]] = {}
        self.attempts: Attempts | None = None
        self.job: RelayJob | None = None

    def make_job(self, attempts: Attempts, limits: Limits, idle_timeout: float, trust: Trust) -> RelayJob:
        self.attempts = attempts
        self.job = RelayJob(
            self.flow_id,
            attempts,
            self.prepare,
            self.commit,
            self.error_answer,
            self.on_stream_failure,
            connect_timeout=limits.connect_timeout,
            first_byte_timeout=limits.first_byte_timeout,
            idle_timeout=idle_timeout,
            trust=trust,
            clock=time.monotonic,
        )
        return self.job

    def prepare(self, att: Attempt) -> Prepared:
        up = att.candidate.upstream
        plan = Plan(self.client, up.protocol)
        actx = self.new_context(up, att.candidate.model)
        body = encode_upstream_request(self.cr, plan, actx, att.candidate.model)
        log_placeholders(self.flow_id, actx)
        configured = att.key is not None
        key = att.key.value if att.key is not None else self.own_key
        url = up.url if up.url is not None else self.origin
        headers = outbound.relayed_headers(self.client_headers, up.protocol, key, configured)
        path = outbound.endpoint_path(up.url, up.protocol, att.candidate.model, self.cr.stream, plan.identity)
        query = outbound.clean_query(self.query)[0] if configured else self.query
        if plan.identity and query:
            path += "?" + query
        p = Prepared(url, path, headers, body)
        self.prepared[att.number] = (plan, actx, p)
        return p

    def commit(self, att: Attempt | None) -> None:
        state = self.state
        if self.attempts is not None:
            state.attempts = [o.as_dict() for o in self.attempts.outcomes]
        if att is None:
            return
        if att.number not in self.prepared:  # its request could not be translated: answer in its protocol
            state.plan = Plan(self.client, att.candidate.upstream.protocol)
            return
        plan, actx, p = self.prepared[att.number]
        state.plan, state.ctx, state.upstream_model = plan, actx, att.candidate.model
        if self.named:
            state.upstream_name = att.candidate.upstream.name
        state.sent_request = (p.url, p.path, p.body)
        if self.job is not None:
            self.job.clean_end = not plan.identity

    def error_answer(self, status: int, message: str, wait: float | None) -> Failure:
        """Our own error in the committed upstream's protocol (the response hook translates it for the client)."""
        kind = {429: ErrorKind.RATE_LIMIT, 504: ErrorKind.TIMEOUT, 400: ErrorKind.INVALID_REQUEST}.get(
            status, ErrorKind.API_ERROR
        )
        info = ErrorInfo(kind=kind, message=message, status=status)
        headers = [("content-type", JSON_CT)]
        if wait is not None:
            headers.append(("retry-after", str(max(1, math.ceil(wait)))))
        return Failure(status, headers, orjson.dumps(get_codec(self.state.plan.upstream).encode_error(info)))

    def on_stream_failure(self, message: str, timed_out: bool) -> None:
        self.state.relay_failure = (message, timed_out)
