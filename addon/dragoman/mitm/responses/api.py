"""``ResponsesApi``: the Responses API's stateful calls, answered from Dragoman's response store
(``dragoman.state``) whatever protocol the upstream speaks. Registered before ``Translate``.

GET    .../responses/{id}               the stored response object (as the client saw it in ``response.completed``)
DELETE .../responses/{id}               ``{"id", "object": "response.deleted", "deleted": true}``
GET    .../responses/{id}/input_items   the turn's input items, paginated as the API does (``after``,
                                        ``before``, ``limit`` 1-100 default 20, ``order`` asc/desc default desc)

An id that is unknown, expired or another client key's is 404 in the Responses error shape. Left alone
(forwarded as before): with the store off, and with a single Responses upstream (no routes file), which
keeps its own state and answers these calls itself.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import parse_qs

import orjson
from mitmproxy import ctx
from mitmproxy import http

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm import hosts
from dragoman.mitm.endpoints import is_websocket_upgrade
from dragoman.mitm.responses import state as responses_state
from dragoman.protocols import Protocol
from dragoman.state import ResponseStore
from dragoman.state import StoreError
from dragoman.state import record
from dragoman.translate.response import error_body

logger = logging.getLogger(__name__)

JSON_CT = "application/json"
#: flow.metadata key naming what ResponsesApi did with a flow (saved with -w)
METADATA_KEY = "dragoman_responses_api"
_PATH = re.compile(r"(?:^|/)responses/([A-Za-z0-9_\-.:]+)(/input_items)?$")
_NOT_IDS = frozenset({"compact", "input_tokens"})


def parse_path(path: str) -> tuple[str, bool] | None:
    """``(id, input_items)`` for a stateful Responses path, else None."""
    m = _PATH.search(hosts.bare_path(path))
    if m is None or m.group(1) in _NOT_IDS:
        return None
    return m.group(1), m.group(2) is not None


class ResponsesApi:
    """GET/DELETE ``/v1/responses/{id}`` and ``input_items`` from the store (see the module docstring)."""

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None or flow.is_replay:
            return
        req = flow.request
        if req.method not in ("GET", "DELETE") or not hosts.in_scope(flow):
            return
        found = parse_path(req.path)
        if found is None or is_websocket_upgrade(req):
            return
        store = self._store()
        if store is None:
            return
        rid, items = found
        if items and req.method != "GET":
            return
        try:
            self._answer(flow, store, rid, items)
        except StoreError as e:
            info = ErrorInfo(kind=ErrorKind.API_ERROR, message=f"Dragoman's response store failed: {e}", status=503)
            self._reply(flow, 503, error_body(info, Protocol.OPENAI_RESPONSES), "store-error")

    def _answer(self, flow: http.HTTPFlow, store: ResponseStore, rid: str, items: bool) -> None:
        who = responses_state.owner(flow)
        if flow.request.method == "DELETE":
            if store.delete(rid, who):
                body = {"id": rid, "object": "response.deleted", "deleted": True}
                self._reply(flow, 200, orjson.dumps(body), "deleted")
            else:
                self._not_found(flow, rid)
            return
        rec = store.get(rid, who)
        if rec is None:
            self._not_found(flow, rid)
            return
        if not items:
            self._reply(flow, 200, orjson.dumps(rec.response), "get")
            return
        query = _query(flow.request.path)
        try:
            limit = int(query.get("limit", "20"))
        except ValueError:
            limit = 0
        order = query.get("order", "desc")
        if not 1 <= limit <= 100 or order not in ("asc", "desc"):
            info = ErrorInfo(
                kind=ErrorKind.INVALID_REQUEST,
                message="limit must be 1-100 and order asc or desc",
                status=400,
                param="limit" if not 1 <= limit <= 100 else "order",
            )
            self._reply(flow, 400, error_body(info, Protocol.OPENAI_RESPONSES), "input_items")
            return
        listed = record.page(
            record.with_ids(rec), after=query.get("after"), before=query.get("before"), limit=limit, order=order
        )
        self._reply(flow, 200, orjson.dumps(listed), "input_items")

    def _not_found(self, flow: http.HTTPFlow, rid: str) -> None:
        info = responses_state.not_found(rid, None)
        self._reply(flow, 404, error_body(info, Protocol.OPENAI_RESPONSES), "not-found")

    @staticmethod
    def _reply(flow: http.HTTPFlow, status: int, body: bytes, what: str) -> None:
        flow.response = http.Response.make(status, body, {"content-type": JSON_CT})
        flow.metadata[METADATA_KEY] = what
        logger.debug(
            "flow %s: %s %s answered from the response store (%d)",
            flow.id,
            flow.request.method,
            logsafe(flow.request.path),
            status,
        )

    @staticmethod
    def _store() -> ResponseStore | None:
        """The store, when Dragoman answers these calls (not for a single Responses upstream)."""
        translate: Any = ctx.master.addons.get("translate") if hasattr(ctx, "master") else None
        state = getattr(translate, "responses", None)
        store = getattr(state, "store", None)
        if store is None:
            return None
        if not translate.routed and translate.target is Protocol.OPENAI_RESPONSES:
            return None
        if translate.routing.config is None:
            return None  # Dragoman is off
        return store


def _query(path: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(path.partition("?")[2]).items() if v}
