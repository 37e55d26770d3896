"""The response store's hooks in the addon (``dragoman.state`` holds the store and its rules).

``ResponsesState.prepare`` runs in ``Translate.request`` for a Responses client once the route is known:
a ``previous_response_id`` is expanded from the store into the whole history (unknown, expired or another
client key's id: 404 in the Responses error shape), or passes through untouched when every attempt goes to
the Responses upstream that answered the previous turn (it keeps the state itself). The request then
carries a ``Ticket``; the stream callable and the response hook hand it the finished response object, and
it is stored before the client sees the end of the answer (the next turn may come at once, elsewhere).

Nothing is stored for ``store: false``, and nothing toward a single Responses upstream (no routes file): it
keeps its own state and answers ``GET /v1/responses/{id}`` itself.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import orjson
from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy.utils import human

from dragoman.errors import TranslationError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm.guards.client_auth import CLIENT_METADATA_KEY
from dragoman.mitm.outbound import client_key
from dragoman.protocols import Protocol
from dragoman.protocols.openai_responses.request_decode import EXTRA_ECHO
from dragoman.routing.router import Candidate
from dragoman.state import DEFAULT_STORE
from dragoman.state import ResponseStore
from dragoman.state import StoredResponse
from dragoman.state import StoreError
from dragoman.state import capture
from dragoman.state import open_store
from dragoman.state import record
from dragoman.translate.request import ClientRequest
from dragoman.translate.request import decode_client_request

logger = logging.getLogger(__name__)

OFF = "off"
#: the options ``configure_responses`` reads (declared in ``options.declare_sharing``)
RESPONSES_OPTIONS = frozenset({"dragoman_responses_store", "dragoman_responses_ttl", "dragoman_responses_max_size"})
ENV = "DRAGOMAN_RESPONSES_STORE"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s`` or plain seconds. Raises ``ValueError``."""
    m = _DURATION.match(text.lower())
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration above 0 (e.g. 30d, 12h, 3600)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def store_spec(option: str) -> str | None:
    spec = option.strip() or os.environ.get(ENV, "").strip() or DEFAULT_STORE
    return None if spec.lower() == OFF else spec


def owner(flow: http.HTTPFlow) -> str:
    """Who the flow's stored responses belong to (``record.owner_of``): read before any key is moved."""
    return record.owner_of(str(flow.metadata.get(CLIENT_METADATA_KEY, "")), client_key(flow.request.headers))


def not_found(rid: str, param: str | None = "previous_response_id") -> ErrorInfo:
    what = "Previous response" if param == "previous_response_id" else "Response"
    return ErrorInfo(
        kind=ErrorKind.NOT_FOUND,
        message=f"{what} with id '{rid}' not found.",
        status=404,
        code="previous_response_not_found" if param == "previous_response_id" else None,
        param=param,
    )


def unavailable(e: StoreError) -> ErrorInfo:
    return ErrorInfo(kind=ErrorKind.API_ERROR, message=f"Dragoman's response store failed: {e}", status=503)


@dataclass(slots=True)
class Ticket:
    """What storing one answer needs, made when its request was read; ``offer`` stores once."""

    store: ResponseStore | None
    owner: str
    input: list[Any]
    previous: str | None
    chain: list[str] = field(default_factory=list)
    tap: capture.CompletedTap | None = None
    done: bool = False
    #: a WebSocket connection's own store, written too
    local: ResponseStore | None = None

    def offer_stream(self, state: Any, data: bytes) -> None:
        """Called by the stream callable for each chunk, before its translation goes to the client."""
        if self.done:
            return
        if state.plan.identity:
            if self.tap is None:
                self.tap = capture.CompletedTap()
            found = self.tap.feed(data)
        else:
            found = capture.snapshot(getattr(state.translator, "encoder", None))
        if found is not None:
            self.keep(found, state.upstream_name)

    def offer_whole(self, state: Any, body: bytes) -> None:
        if not self.done:
            found = capture.whole(body)
            if found is not None:
                self.keep(found, state.upstream_name)

    def keep(self, response: dict[str, Any], upstream: str) -> None:
        self.done = True
        rec = StoredResponse(
            id=response["id"],
            owner=self.owner,
            upstream=upstream,
            created=time.time(),
            input=self.input,
            response=record.snapshot(response, self.previous, self.store is not None),
            previous=self.previous,
            chain=self.chain,
        )
        try:
            if self.local is not None:
                self.local.put(rec)
            if self.store is not None:
                self.store.put(rec)
        except Exception as e:  # noqa: BLE001 - storing must never break the answer
            logger.warning("response store: %s not stored: %s", logsafe(rec.id), logsafe(e))
        else:
            logger.debug("response store: stored %s (%d input items)", logsafe(rec.id), len(self.input))


class ResponsesState:
    """The response store in force (``dragoman_responses_store``) and the request-side rules."""

    def __init__(self) -> None:
        self.store: ResponseStore | None = None
        self._opened: tuple[str | None, float, int] | None = None

    def open(self, option: str, ttl: float, max_bytes: int) -> None:
        """Raises ``StoreError`` (the caller makes it an ``OptionsError``)."""
        spec = store_spec(option)
        wanted = (spec, ttl, max_bytes)
        if wanted == self._opened:
            return
        new = open_store(spec, ttl=ttl, max_bytes=max_bytes) if spec is not None else None
        self.close()
        self.store, self._opened = new, wanted
        if new is not None:
            logger.info("response store: %s", new.describe())

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        self._opened = None

    def prepare(
        self,
        flow: http.HTTPFlow,
        cr: ClientRequest,
        candidates: list[Candidate],
        routed: bool,
        local: ResponseStore | None = None,
    ) -> ClientRequest | ErrorInfo:
        """The request to translate (expanded when it continues a stored response), or the error to answer.
        ``local``: a WebSocket connection's own store (its ``store: false`` responses), read first and
        always written."""
        store = self.store
        obj = cr.obj
        prev = obj.get("previous_response_id")
        prev = prev if isinstance(prev, str) and prev else None
        all_responses = all(c.upstream.protocol is Protocol.OPENAI_RESPONSES for c in candidates)
        if local is None and (store is None or (all_responses and not routed)):
            return cr  # no store, or a single Responses upstream keeping its own state
        who = owner(flow)
        chain: list[StoredResponse] = []
        if prev is not None:
            try:
                found = _chain([s for s in (local, store) if s is not None], prev, who)
            except StoreError as e:
                return unavailable(e)
            if found is None:
                if all_responses:
                    return cr  # perhaps the upstream's own: it answers (or 404s) itself
                return not_found(prev)
            chain = found
            names = {c.upstream.name for c in candidates}
            if not (local is None and all_responses and routed and names == {chain[-1].upstream}):
                try:
                    cr = self._expanded(cr, chain)
                except TranslationError as e:
                    return e.to_error_info()
                logger.debug("flow %s: previous_response_id %s expanded (%d turns)", flow.id, logsafe(prev), len(chain))
        keep = obj.get("store") is not False and store is not None
        if not keep and local is None:
            return cr
        echo = cr.request.extra.setdefault(EXTRA_ECHO, {})
        echo["store"] = keep
        if prev is not None:
            echo["previous_response_id"] = prev
        cr.state_ticket = Ticket(
            store if keep else None, who, record.input_items(obj.get("input")), prev, [r.id for r in chain], local=local
        )
        return cr

    @staticmethod
    def _expanded(cr: ClientRequest, chain: list[StoredResponse]) -> ClientRequest:
        body = record.expand(cr.obj, chain)
        return decode_client_request(orjson.dumps(body), Protocol.OPENAI_RESPONSES)


def _chain(stores: list[ResponseStore], prev: str, who: str) -> list[StoredResponse] | None:
    for s in stores:
        found = s.chain(prev, who)
        if found is not None:
            return found
    return None


def configure_responses(state: ResponsesState) -> None:
    """Open the store the options name. Raises ``OptionsError`` naming the bad option."""
    opts = ctx.options
    try:
        ttl = parse_duration(opts.dragoman_responses_ttl)
    except ValueError as e:
        raise exceptions.OptionsError(f"Invalid dragoman_responses_ttl: {e}") from e
    try:
        max_bytes = human.parse_size(opts.dragoman_responses_max_size) or 0
    except ValueError as e:
        raise exceptions.OptionsError(f"Invalid dragoman_responses_max_size: {e}") from e
    if max_bytes <= 0:
        raise exceptions.OptionsError("Invalid dragoman_responses_max_size: give a size above 0 (e.g. 1g)")
    try:
        state.open(opts.dragoman_responses_store, ttl, max_bytes)
    except StoreError as e:
        raise exceptions.OptionsError(f"Cannot use dragoman_responses_store: {e}") from e
