"""``ResponsesSocket``: the Responses API over WebSocket (what Codex opens first on ``/v1/responses``, and on
``chatgpt.com/backend-api/codex/responses`` when intercepting), for any upstream protocol. Registered
before ``Endpoints`` (which otherwise refuses the upgrade with 426).

request            an upgrade on a Responses path goes to the loopback peer (``ws_sink``) instead: mitmproxy
                   completes the handshake through it; the client's headers (its key) stay here, for the turns
websocket_message  a client message is dropped (never reaches the peer) and read: ``response.create`` runs a
                   turn (``ws_turn``, one at a time per connection, in order); each event of the answer is
                   injected toward the client as one text message. ``response.processed`` is an ack: ignored
websocket_end      the connection's state (its own ``store: false`` responses) is released

The upstream side stays HTTP with SSE. Only the last message stays in ``flow.websocket.messages`` (the addons
after this one read it), so a long session's memory stays flat.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import orjson
from mitmproxy import ctx
from mitmproxy import http

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.mitm import hosts
from dragoman.mitm.endpoints import is_websocket_upgrade
from dragoman.mitm.outbound import CREDENTIAL_HEADERS
from dragoman.mitm.responses.ws_sink import WsSink
from dragoman.mitm.responses.ws_turn import Turn
from dragoman.mitm.responses.ws_turn import error_message
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.state.memory import MemoryStore

logger = logging.getLogger(__name__)

#: flow.metadata key marking a Responses WebSocket Dragoman serves (saved with -w)
METADATA_KEY = "dragoman_websocket"


@dataclass
class Connection:
    headers: list[tuple[str, str]]
    local: MemoryStore = field(default_factory=MemoryStore)
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None


class ResponsesSocket:
    def __init__(self) -> None:
        self.sink = WsSink()
        self.connections: dict[str, Connection] = {}
        self._start: asyncio.Task[None] | None = None

    def running(self) -> None:
        # started as a task: awaiting it here would let requests in before the addons after this one
        # (the Translate addon's relay) finish starting; an upgrade before it is up is refused (426)
        self._start = asyncio.get_running_loop().create_task(self.sink.start())

    def done(self) -> None:
        self.sink.stop()
        for conn in self.connections.values():
            if conn.worker is not None:
                conn.worker.cancel()
        self.connections.clear()

    @staticmethod
    def _translate() -> Any:
        translate = ctx.master.addons.get("translate") if hasattr(ctx, "master") else None
        if translate is None or translate.routing.router is None:
            return None
        return translate

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None or flow.is_replay or not self.sink.port:
            return
        req = flow.request
        if req.method != "GET" or not is_websocket_upgrade(req) or not hosts.in_scope(flow):
            return
        if detect(hosts.bare_path(req.path)) is not Protocol.OPENAI_RESPONSES or self._translate() is None:
            return
        self.connections[flow.id] = Connection(headers=list(req.headers.items(multi=True)))
        for name in CREDENTIAL_HEADERS:  # the turns send them on; the loopback peer never sees them
            req.headers.pop(name, None)
        req.headers.pop("sec-websocket-extensions", None)  # no compression between mitmproxy and the peer
        req.scheme, req.host, req.port = "http", "127.0.0.1", self.sink.port
        req.path = "/dragoman-websocket"  # not a Responses path: Endpoints leaves it alone
        flow.metadata[METADATA_KEY] = True
        logger.info("flow %s: Responses WebSocket accepted; turns are translated per response.create", flow.id)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        conn = self.connections.get(flow.id)
        if conn is None or flow.websocket is None or not flow.websocket.messages:
            return
        # only the last message is kept (addons after this one read it): memory stays flat over a long session
        del flow.websocket.messages[:-1]
        message = flow.websocket.messages[-1]
        if not message.from_client:
            return
        message.drop()
        try:
            body = orjson.loads(message.content)
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            self._send(flow, error_message(ErrorInfo(ErrorKind.INVALID_REQUEST, "message is not a JSON object", 400)))
            return
        kind = body.get("type")
        if kind == "response.processed":
            return
        if kind != "response.create":
            info = ErrorInfo(ErrorKind.INVALID_REQUEST, f"unsupported message type {kind!r}", 400, param="type")
            self._send(flow, error_message(info))
            return
        conn.queue.put_nowait(body)
        if conn.worker is None:
            conn.worker = asyncio.get_running_loop().create_task(self._work(flow, conn))

    async def _work(self, flow: http.HTTPFlow, conn: Connection) -> None:
        while True:
            body = await conn.queue.get()
            if body is None:
                return
            translate = self._translate()
            if translate is None:
                self._send(flow, error_message(ErrorInfo(ErrorKind.API_ERROR, "Dragoman is off", 503)))
                continue
            await Turn(translate, flow, conn.local, conn.headers, lambda data: self._send(flow, data)).run(body)

    @staticmethod
    def _send(flow: http.HTTPFlow, data: bytes) -> None:
        if flow.websocket is None or flow.websocket.timestamp_end is not None:
            return
        ctx.master.commands.call("inject.websocket", flow, True, data, True)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        conn = self.connections.pop(flow.id, None)
        if conn is not None:
            conn.queue.put_nowait(None)
            if conn.worker is not None and not conn.worker.done():
                conn.worker.cancel()
            conn.local.close()
