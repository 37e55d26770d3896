"""``HeldBodies``: a request body without a length up front (chunked, or HTTP/2 without content-length),
collected under ``dragoman_max_body`` instead of by mitmproxy without a bound.

mitmproxy reads a request body whole before the ``request`` hook, and its only bound is the global
``body_size_limit``. For a body of unknown length to an endpoint Dragoman translates, the gate instead asks
mitmproxy to stream it (``request.stream``) into a collector that keeps at most ``max_body`` bytes (and
nothing once beyond). Streaming makes mitmproxy open the upstream connection at once, so the request is
pointed at the relay first, under a token whose answer is decided once the body is complete:

requestheaders -> ``hold``: the relay token (a 500 placeholder), the collector, the original destination kept
request (first) -> ``restore``: destination and body back on the flow, for every addon after the gate; a body
                   beyond the cap is refused 413 by the gate
Translate       -> a held flow always goes through the relay, under the held token (``token``)
request (last)  -> ``settle``: an answer some addon set (a 413, a 401, a 400) becomes the relay's answer
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from mitmproxy import http

from dragoman.mitm.relay.relay import FixedAnswer
from dragoman.mitm.relay.relay import Relay

JSON_CT = "application/json"
_UNHANDLED = FixedAnswer(
    500,
    [("content-type", JSON_CT)],
    b'{"error":{"type":"api_error","message":"Dragoman held this request but nothing answered it"}}',
)


@dataclass(slots=True)
class _Held:
    token: str
    limit: int
    scheme: str
    host: str
    port: int
    path: str
    host_header: str | None
    buf: bytearray = field(default_factory=bytearray)
    size: int = 0
    over: bool = False

    def collect(self, data: bytes) -> list[bytes]:
        """The request-body stream: keep up to ``limit`` bytes, send nothing on."""
        if data and not self.over:
            self.size += len(data)
            if self.size > self.limit:
                self.over = True
                self.buf = bytearray()  # what was kept goes at once
            else:
                self.buf += data
        return []


class HeldBodies:
    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.held: dict[str, _Held] = {}

    def hold(self, flow: http.HTTPFlow, limit: int) -> None:
        req = flow.request
        held = _Held(self.relay.register(_UNHANDLED), limit, req.scheme, req.host, req.port, req.path, req.host_header)
        self.held[flow.id] = held
        req.scheme, req.host, req.port = "http", "127.0.0.1", self.relay.port
        req.path = "/" + held.token
        req.stream = held.collect

    def restore(self, flow: http.HTTPFlow) -> _Held | None:
        """The original destination and the collected body back on the flow (None: not held)."""
        held = self.held.get(flow.id)
        if held is None:
            return None
        req = flow.request
        req.stream = False
        req.scheme, req.host, req.port, req.path = held.scheme, held.host, held.port, held.path
        req.host_header = held.host_header
        # transfer-encoding stays: mitmproxy ends the relay's chunked body by it once every hook has run
        req.content = b"" if held.over else bytes(held.buf)
        held.buf = bytearray()
        return held

    def token(self, flow: http.HTTPFlow) -> str | None:
        held = self.held.get(flow.id)
        return held.token if held is not None else None

    def settle(self, flow: http.HTTPFlow) -> None:
        """After every addon's ``request``: an answer one of them set goes out through the relay (the
        connection mitmproxy holds for this flow), which sends it back as this flow's response."""
        held = self.held.pop(flow.id, None)
        if held is None:
            return
        # the relay reads a chunked body: mitmproxy sends its last chunk by what the request says now
        flow.request.headers.pop("content-length", None)
        flow.request.headers["transfer-encoding"] = "chunked"
        resp = flow.response
        if resp is not None:
            self.relay.jobs[held.token] = FixedAnswer(
                resp.status_code, [(k, v) for k, v in resp.headers.items(multi=True)], resp.content or b""
            )
            flow.response = None

    def forget(self, flow: http.HTTPFlow) -> None:
        held = self.held.pop(flow.id, None)
        if held is not None:
            self.relay.forget(held.token)
