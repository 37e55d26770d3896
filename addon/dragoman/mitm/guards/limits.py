"""``BodyGate``: the request-body caps, checked before anything reads the body (Translate's first half).

Listed first among Dragoman's addons, for the POSTs Dragoman answers (an API endpoint or ``count_tokens``
in its scope, see ``hosts.in_scope``):

requestheaders -> a ``Content-Length`` beyond ``dragoman_max_body`` is refused before the body is read:
                  the request goes to the relay (``relay.FixedAnswer``), which answers 413 in the client's
                  shape, while mitmproxy streams the client's body into a sink that keeps nothing.
                  A chunked body to a translated endpoint is collected under the cap instead (``held``).
request        -> a request head beyond what the relay reads (``http1.HEAD_LIMIT``) is answered 431 in the
                  client's shape, naming the limit; a body beyond ``dragoman_max_body`` (collected, or read by mitmproxy when it could not be
                  held: HTTP/2 without a length, a replay), or a ``Content-Encoding`` body inflating beyond ``dragoman_max_body`` or
                  ``dragoman_max_inflate_ratio`` (``inflate``), is answered 413 in the client's shape. A
                  compressed body within the caps is replaced by its inflated bytes and ``Content-Encoding``
                  dropped, so no later ``request.content`` decodes it again without a bound.
"""

from __future__ import annotations

import logging
from typing import Any

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy.utils import human

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm import hosts
from dragoman.mitm import outbound
from dragoman.mitm.guards.inflate import BadEncoding
from dragoman.mitm.guards.inflate import TooLarge
from dragoman.mitm.guards.inflate import inflate
from dragoman.mitm.relay import headers as hdr
from dragoman.mitm.relay import http1
from dragoman.mitm.relay.held import HeldBodies
from dragoman.mitm.relay.relay import FixedAnswer
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.translate.response import error_body

logger = logging.getLogger(__name__)

JSON_CT = "application/json"
COUNT_TOKENS_SUFFIX = "/messages/count_tokens"
#: flow.metadata mark of a request refused by the gate (the status it got)
REFUSED_KEY = "dragoman_refused"


def parse_size(name: str, value: str) -> int:
    """A size option (``64m``, ``512k``, bytes) as bytes > 0; ``OptionsError`` naming the option."""
    try:
        size = human.parse_size(value.strip())
    except ValueError:
        size = None
    if size is None or size <= 0:
        raise exceptions.OptionsError(f"Invalid {name} {value!r}: give a size > 0 in bytes or with k/m/g (e.g. 64m)")
    return size


def _head_over(flow: http.HTTPFlow) -> int:
    """The size of the flow's request head when it is over ``http1.HEAD_LIMIT`` (what the relay reads), else 0."""
    data = flow.request.data  # the start line's bytes as they go (no decoding)
    start = len(data.method) + len(data.path) + len(data.http_version) + 2
    size = http1.head_size(start, data.headers.fields)
    return size if size > http1.HEAD_LIMIT else 0


def _discard(data: bytes) -> list[bytes]:
    """The request-body stream of a refused request: nothing is kept, nothing is sent."""
    return []


class BodyGate:
    """Request-body caps for the flows Dragoman answers; ``owner`` is the Translate addon (its relay, its
    options ``max_body`` and ``max_inflate_ratio``)."""

    def __init__(self, owner: Any) -> None:
        self.owner = owner
        self.held = HeldBodies(owner.relay)
        #: the last half, listed after every other addon (``held.settle``)
        self.after = GateAfter(self)

    def _shape(self, flow: http.HTTPFlow) -> Protocol | None:
        """The client's protocol when this is a POST Dragoman answers, else None (not gated)."""
        owner = self.owner
        if owner.routing.config is None or flow.request.method != "POST" or flow.is_replay:
            return None
        if not hosts.in_scope(flow) and not owner.matches(flow):  # dragoman_match may reach beyond the scope
            return None
        path = hosts.bare_path(flow.request.path)
        shape = detect(path)
        if shape is None and path.endswith(COUNT_TOKENS_SUFFIX):
            shape = Protocol.ANTHROPIC_MESSAGES
        return shape

    # -- hooks

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        shape = self._shape(flow)
        if shape is None or flow.response is not None:
            return
        if _head_over(flow):
            return  # refused 431 in ``request``: such a head cannot go to the relay (not held, not refused unread)
        try:
            declared = int((hdr.get(flow.request.headers, b"content-length", "0") or "").strip() or 0)
        except ValueError:
            return  # mitmproxy refuses a malformed length itself
        limit = self.owner.max_body
        if declared > limit:
            self._refuse_unread(flow, shape, f"request body of {declared} bytes is larger than {limit} bytes")
        elif self._holdable(flow):
            self.held.hold(flow, limit)

    def _holdable(self, flow: http.HTTPFlow) -> bool:
        """A chunked body to an endpoint Translate handles, while the relay runs and no replay is on."""
        headers = flow.request.headers
        te = hdr.get(headers, b"transfer-encoding", "") or ""
        if "chunked" not in te.lower() or hdr.has(headers, b"content-length"):
            return False
        replayer = ctx.master.addons.get("replayer")
        if not self.owner.relay.port or (replayer is not None and bool(getattr(replayer, "source", False))):
            return False
        return detect(flow.request.path) is not None and bool(self.owner.matches(flow))

    def request(self, flow: http.HTTPFlow) -> None:
        held = self.held.restore(flow)
        if flow.response is not None or flow.error is not None:
            return
        shape = self._shape(flow)
        if shape is None:
            return
        size = _head_over(flow)
        if size:
            message = f"request head of {size} bytes ({len(flow.request.headers)} headers) is larger than "
            self._refuse(flow, shape, 431, message + f"Dragoman's limit of {http1.HEAD_LIMIT} bytes")
            return
        if held is not None and held.over:
            self._refuse(flow, shape, 413, f"request body larger than {held.limit} bytes (read as it came, not kept)")
            return
        req = flow.request
        raw = req.raw_content
        if raw is None:
            return
        limit = self.owner.max_body
        if len(raw) > limit:
            self._refuse(flow, shape, 413, f"request body of {len(raw)} bytes is larger than {limit} bytes")
            return
        encoding = (hdr.get(req.headers, b"content-encoding", "") or "").strip()
        if not encoding or encoding.lower() in ("identity", "none"):
            return
        try:
            body = inflate(raw, encoding, limit, self.owner.max_inflate_ratio)
        except TooLarge as e:
            self._refuse(flow, shape, 413, f"{e} (dragoman_max_body, dragoman_max_inflate_ratio)")
            return
        except BadEncoding as e:
            self._refuse(flow, shape, 400, str(e))
            return
        del req.headers["content-encoding"]
        req.content = body

    def error(self, flow: http.HTTPFlow) -> None:
        self.held.forget(flow)

    # -- answers

    def _refuse(self, flow: http.HTTPFlow, shape: Protocol, status: int, message: str) -> None:
        kind = ErrorKind.REQUEST_TOO_LARGE if status == 413 else ErrorKind.INVALID_REQUEST
        info = ErrorInfo(kind=kind, message=message, status=status)
        flow.response = http.Response.make(status, error_body(info, shape), {"content-type": JSON_CT})
        flow.metadata[REFUSED_KEY] = status
        logger.warning("flow %s: %s request refused with %d: %s", flow.id, shape.value, status, logsafe(message))

    def _refuse_unread(self, flow: http.HTTPFlow, shape: Protocol, message: str) -> None:
        """413 before the body is read: the relay answers it, the body streams into ``_discard``."""
        relay = self.owner.relay
        if not relay.port:  # no running relay (unit tests): mitmproxy reads the body, then the answer is sent
            self._refuse(flow, shape, 413, message)
            return
        info = ErrorInfo(kind=ErrorKind.REQUEST_TOO_LARGE, message=message + " (dragoman_max_body)", status=413)
        token = relay.register(FixedAnswer(413, [("content-type", JSON_CT)], error_body(info, shape)))
        req = flow.request
        for name in (*outbound.AUTH_HEADERS, "cookie", "transfer-encoding", "content-encoding"):
            req.headers.pop(name, None)
        req.scheme, req.host, req.port = "http", "127.0.0.1", relay.port
        req.path = "/" + token
        req.headers["content-length"] = "0"
        req.stream = _discard
        flow.metadata[REFUSED_KEY] = 413
        logger.warning(
            "flow %s: %s request refused with 413 before its body: %s", flow.id, shape.value, logsafe(info.message)
        )


class GateAfter:
    """The gate's last half: an answer set for a held flow goes out through its relay connection."""

    def __init__(self, gate: BodyGate) -> None:
        self.gate = gate

    def request(self, flow: http.HTTPFlow) -> None:
        self.gate.held.settle(flow)
