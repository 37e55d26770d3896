"""One turn on a Responses WebSocket: a ``response.create`` message's body through the same steps as an HTTP
request (decode, route, response store, translate), one upstream attempt after another over HTTP with SSE
(``upstream_http``), and each Responses stream event back as one message (``send``). Errors are Responses
error events: ``{"type": "error", "status": N, "error": {...}}`` before anything streamed (the shape Codex
reads for HTTP failures on its socket), the translator's ``error`` + ``response.failed`` after.

Like an HTTP turn, each turn that reached an upstream (or failed trying) is one row in the usage ledger
(``dragoman_ledger``), and the reply goes through the same filters: tool names renamed back
(``dragoman_mcp_prefix``) before translation, configured keys masked after.

``generate: false`` (Codex's prewarm) is answered here without the upstream: ``response.created`` and
``response.completed`` with no output, kept in the connection's store so the next turn can continue it."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from dragoman.errors import TranslationError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm import outbound
from dragoman.mitm.flowstate import FlowState
from dragoman.mitm.guards.client_auth import CLIENT_METADATA_KEY
from dragoman.mitm.relay.upstream_http import UpstreamConnectError
from dragoman.mitm.relay.upstream_http import open_request
from dragoman.mitm.relay.upstream_http import trust_from_options
from dragoman.protocols import Protocol
from dragoman.protocols.registry import get_codec
from dragoman.routing.router import Candidate
from dragoman.routing.spec import Limits
from dragoman.sse.decoder import SSEDecoder
from dragoman.state.memory import MemoryStore
from dragoman.translate.mcp_names import McpNameStream
from dragoman.translate.plan import Plan
from dragoman.translate.request import ClientRequest
from dragoman.translate.request import decode_client_request
from dragoman.translate.request import encode_upstream_request
from dragoman.translate.response import translate_error
from dragoman.translate.stream import PassThrough
from dragoman.translate.stream import StreamTranslator
from dragoman.translate.usage import PassThroughUsage

logger = logging.getLogger(__name__)

RESPONSES = Protocol.OPENAI_RESPONSES
Send = Callable[[bytes], None]
#: statuses after which the next attempt is tried (nothing reached the client yet)
_RETRY = frozenset({408, 429, 500, 502, 503, 504, 529})


def error_message(info: ErrorInfo) -> bytes:
    """A Responses error event as Codex reads it on the socket (the HTTP status in ``status``)."""
    err = get_codec(RESPONSES).encode_error(info).get("error", {})
    return orjson.dumps({"type": "error", "status": info.http_status, "error": err})


class Turn:
    """Runs one ``response.create`` for the addon (``translate``: the Translate addon, read for routes,
    options and the response store)."""

    def __init__(self, translate: Any, flow: Any, local: MemoryStore, headers: list[tuple[str, str]], send: Send):
        self.translate = translate
        self.flow = flow
        self.local = local
        self.headers = headers
        self.send = send

    async def run(self, body: dict[str, Any]) -> None:
        try:
            await self._run(body)
        except Exception as e:  # noqa: BLE001 - one bad turn must not end the connection
            logger.exception("flow %s: WebSocket turn failed", self.flow.id)
            self.send(error_message(ErrorInfo(ErrorKind.API_ERROR, f"Dragoman failed: {type(e).__name__}", 500)))

    async def _run(self, body: dict[str, Any]) -> None:
        generate = body.pop("generate", True)
        body.pop("type", None)
        body["stream"] = True
        try:
            cr = decode_client_request(orjson.dumps(body), RESPONSES)
        except TranslationError as e:
            self.send(error_message(e.to_error_info()))
            return
        router = self.translate.routing.router
        found = router.route(cr.client_model) if router is not None else None
        if found is None:
            self.send(error_message(ErrorInfo(ErrorKind.NOT_FOUND, f"no route for model {cr.client_model!r}", 404)))
            return
        candidates = router.candidates(found, cr.client_model)
        prepared = self.translate.responses.prepare(self.flow, cr, candidates, self.translate.routed, self.local)
        if isinstance(prepared, ErrorInfo):
            self.send(error_message(prepared))
            return
        if generate is False:
            self._prewarm(prepared)
            return
        await self._attempts(prepared, candidates, found.match)

    def _prewarm(self, cr: ClientRequest) -> None:
        rid = "resp_" + uuid.uuid4().hex
        obj = {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": cr.client_model,
            "output": [],
            "usage": {
                "input_tokens": 0,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 0,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 0,
            },
        }
        ticket = cr.state_ticket
        if ticket is not None:
            ticket.keep(obj, "")
        created = {**obj, "status": "in_progress", "usage": None}
        self.send(orjson.dumps({"type": "response.created", "sequence_number": 0, "response": created}))
        self.send(orjson.dumps({"type": "response.completed", "sequence_number": 1, "response": obj}))

    async def _attempts(self, cr: ClientRequest, candidates: list[Candidate], route: str) -> None:
        config = self.translate.routing.config
        limits: Limits = config.limits if config is not None else Limits()
        last: bytes | None = None
        failed: tuple[FlowState, int] | None = None  # the last attempt that reached an upstream and failed
        tried: list[dict[str, Any]] = []  # one entry per attempt (``FlowState.attempts``)
        for n, cand in enumerate(candidates):
            up = cand.upstream
            plan = Plan(RESPONSES, up.protocol)
            tctx = self.translate._new_context(up, self.flow, cand.model)  # noqa: SLF001 - the addon's own context rules
            try:
                payload = encode_upstream_request(cr, plan, tctx, cand.model)
            except TranslationError as e:
                self.send(error_message(e.to_error_info()))
                return
            if up.url is None:
                last = error_message(ErrorInfo(ErrorKind.API_ERROR, f"upstream {up.name} has no base URL", 502))
                continue
            key = up.keys[0].value if up.keys else None
            own = key is None
            headers = outbound.relayed_headers(self.headers, up.protocol, key if not own else self._own_key(), not own)
            headers.append(("accept", "text/event-stream"))
            try:
                resp = await open_request(
                    up.url,
                    outbound.endpoint_path(up.url, up.protocol),
                    headers,
                    payload,
                    connect_timeout=limits.connect_timeout,
                    first_byte_timeout=limits.first_byte_timeout,
                    trust=trust_from_options(),
                )
            except UpstreamConnectError as e:
                logger.warning("flow %s: WebSocket turn: %s: %s", self.flow.id, up.name, logsafe(e))
                tried.append({"upstream": up.name, "model": cand.model, "status": None, "class": "connect"})
                last = error_message(ErrorInfo(ErrorKind.API_ERROR, f"upstream connection failed: {e}", 502))
                failed = (self._state(cr, plan, tctx, cand, route, tried), 502)
                continue
            state = self._state(cr, plan, tctx, cand, route, tried)
            tried.append({"upstream": up.name, "model": cand.model, "status": resp.status})
            try:
                if not 200 <= resp.status < 300:
                    raw = await resp.read()
                    hdrs = {k.lower(): v for k, v in resp.headers}
                    status, _, info = translate_error(resp.status, raw, plan, hdrs)
                    last, failed = error_message(info), (state, resp.status)
                    if status in _RETRY and n + 1 < len(candidates):
                        continue
                    break
                ok = await self._stream(state, resp)
                self._record(state, resp.status, failed=not ok)
                return
            finally:
                resp.close()
        if failed is not None:
            self._record(failed[0], failed[1], failed=True)
        if last is not None:
            self.send(last)

    def _state(
        self, cr: ClientRequest, plan: Plan, tctx: Any, cand: Candidate, route: str, tried: list[dict[str, Any]]
    ) -> FlowState:
        state = FlowState(plan, tctx, cr.client_model, cand.model, True)
        state.client_name = str(self.flow.metadata.get(CLIENT_METADATA_KEY, ""))
        if self.translate.routed:
            state.route, state.upstream_name = route, cand.upstream.name
        state.ticket = cr.state_ticket
        state.attempts = tried
        return state

    def _record(self, state: FlowState, status: int, failed: bool) -> None:
        """One ledger row for the turn, as an HTTP flow writes one (``mitm.usage``)."""
        book = getattr(self.translate, "usage", None)
        if book is None or not book.on:
            return
        try:
            book.record(self.flow, state, status, failed)
        except Exception:  # noqa: BLE001 - the ledger must never end a turn
            logger.exception("flow %s: WebSocket turn: usage ledger write failed", self.flow.id)

    def _own_key(self) -> str | None:
        return outbound.client_key(_Headers(self.headers))  # type: ignore[arg-type]

    def _translator(self, state: FlowState) -> Any:
        """The stream's translator with the same taps as an HTTP stream (``inbound.install_stream``): usage
        read as it passes when the ledger is on, tool names renamed back before translation."""
        plan = state.plan
        track = bool(getattr(getattr(self.translate, "usage", None), "on", False))
        names = state.ctx.extra.get("mcp_names")
        if names:
            state.renamer = McpNameStream(names)
        if plan.identity:
            if track:
                state.usage_tap = PassThroughUsage(plan.upstream, state.ctx, self.translate.max_sse_event)
            return PassThrough()
        decoder = get_codec(plan.upstream).stream_decoder(state.ctx)
        translator = StreamTranslator(
            decoder, get_codec(plan.client).stream_encoder(state.ctx), self.translate.max_sse_event, state.ctx.dropped
        )
        if track:  # the translator keeps the usage its upstream events carried
            state.usage_tap = translator
        return translator

    async def _stream(self, state: FlowState, resp: Any) -> bool:
        """The answer, event by event; False when it ended in an error."""
        translator = state.translator = self._translator(state)
        beside = state.usage_tap if isinstance(state.usage_tap, PassThroughUsage) else None
        keys = getattr(self.translate, "keys", None)
        masker = keys.stream() if keys else None
        events = SSEDecoder()
        idle = float(self.translate.idle_timeout) or None
        ticket = state.ticket
        while True:
            try:
                chunk = await asyncio.wait_for(resp.next_chunk(), idle)
            except (TimeoutError, ConnectionError, OSError) as e:
                timed_out = isinstance(e, TimeoutError)
                info = ErrorInfo(
                    ErrorKind.TIMEOUT if timed_out else ErrorKind.API_ERROR,
                    "upstream sent nothing in time" if timed_out else f"upstream connection failed mid-stream: {e}",
                    504 if timed_out else 502,
                )
                out = translator.fail(info) if hasattr(translator, "fail") else b""
                self._emit(events, out or error_message(info), raw=not out)
                return False
            if chunk is not None:
                out = self._feed(state, translator, beside, chunk)
            else:
                out = b""
                if state.renamer is not None:
                    rest, state.renamer = state.renamer.close(), None
                    out = self._feed(state, translator, beside, rest)
                out += translator.close() if hasattr(translator, "close") else b""
                if ticket is not None:
                    ticket.offer_stream(state, b"")  # stored before the end of the answer reaches the client
            if masker is not None:
                out = masker.feed(out) if chunk is not None else masker.feed(out) + masker.flush()
            self._emit(events, out)
            if chunk is None:
                return getattr(translator, "error_info", None) is None

    @staticmethod
    def _feed(state: FlowState, translator: Any, beside: Any, data: bytes) -> bytes:
        if data and state.renamer is not None:
            data = state.renamer.feed(data)
        if not data:
            return b""
        if beside is not None:
            beside.feed(data)
        if state.ticket is not None:
            state.ticket.offer_stream(state, data)
        return translator.feed(data)

    def _emit(self, events: SSEDecoder, out: bytes, raw: bool = False) -> None:
        if raw:
            self.send(out)
            return
        if out:
            for ev in events.feed(out):
                if ev.data and ev.data != "[DONE]":
                    self.send(ev.data.encode())


class _Headers:
    """The few lookups ``outbound.client_key`` makes, over a header list."""

    def __init__(self, headers: list[tuple[str, str]]) -> None:
        self._h = {k.lower(): v for k, v in headers}

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._h.get(name.lower(), default)
