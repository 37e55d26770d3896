"""Upstream faults during a streamed response: the idle watchdog and the last error frame.

mitmproxy calls the stream callable only when upstream bytes arrive, and when the upstream connection
dies mid-body (reset, close without the terminating chunk, our own idle close) it calls the ``error``
hook and then closes the client connection without a terminating chunk: the client sees a cut
connection, never the error in its own protocol. Measured on 11.0.2 and 12.2.3, the hook runs BEFORE
mitmproxy closes the client side, so for a plain-HTTP/1.1 client the addon can finish the chunked
body itself from the hook: one chunk holding the error frame, then ``0\\r\\n\\r\\n``. (A TLS or HTTP/2
client connection is framed inside mitmproxy's layers: such flows go through the relay, see ``relay``.)
Before any answer reached a plain-HTTP/1.1 client (refused connection, a whole answer cut mid-body), the
hook writes a whole JSON 502 instead and kills the flow, so mitmproxy adds no HTML page of its own.

``final_error_frame`` and ``error_answer`` build those answers in the client's protocol (the flow's translator,
or its protocol's error body). ``IdleWatchdog``: one event-loop timer per streamed flow; when no upstream byte arrived for ``timeout``
seconds it marks the flow timed out and closes the upstream socket, which makes mitmproxy run the
``error`` hook, where the frame is delivered as above. Only upstream bytes reset the timer (upstream
keepalive comments do: that upstream is alive); Dragoman never sends keepalives of its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from mitmproxy import ctx
from mitmproxy import http
from mitmproxy.net.http import status_codes

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm.flowstate import FlowState
from dragoman.mitm.guards.cors import answer_header_lines
from dragoman.translate.response import error_body

logger = logging.getLogger(__name__)


def _handler(flow: http.HTTPFlow) -> Any:
    """mitmproxy's connection handler of the flow's client connection (private API, 11.0.2 and 12.2.3)."""
    try:
        proxyserver = ctx.master.addons.get("proxyserver")
        return proxyserver.connections.get(flow.client_conn.id) if proxyserver is not None else None
    except Exception:  # noqa: BLE001 - an internal API that may change: degrade to "not possible"
        return None


def _writer(flow: http.HTTPFlow, conn: Any) -> Any:
    """The asyncio stream writer of ``conn`` (the flow's client or server connection), or None."""
    handler = _handler(flow)
    io = handler.transports.get(conn) if handler is not None else None
    return getattr(io, "writer", None)


def close_server_connection(flow: http.HTTPFlow) -> bool:
    """Close the upstream socket of ``flow``; mitmproxy then sees the connection end mid-body."""
    writer = _writer(flow, flow.server_conn)
    if writer is None:
        return False
    try:
        writer.close()
    except Exception:  # noqa: BLE001
        logger.debug("flow %s: closing the upstream connection failed", flow.id, exc_info=True)
        return False
    return True


def deliver_final_frame(flow: http.HTTPFlow, frame: bytes) -> bool:
    """Finish a streamed HTTP/1.1 chunked body to a plain-HTTP client with ``frame`` and the last chunk.

    Returns False (nothing written) when that is not possible: a TLS or HTTP/2 client connection, a
    response not sent chunked, or no live connection.
    """
    resp = flow.response
    if resp is None or flow.client_conn.tls or not resp.http_version.startswith("HTTP/1"):
        return False
    if resp.headers.get("transfer-encoding", "").lower() != "chunked":
        return False
    writer = _writer(flow, flow.client_conn)
    if writer is None or not hasattr(writer, "is_closing") or writer.is_closing():
        return False
    data = (b"%x\r\n%s\r\n" % (len(frame), frame) if frame else b"") + b"0\r\n\r\n"
    try:
        writer.write(data)
    except Exception:  # noqa: BLE001
        logger.debug("flow %s: writing the final error frame failed", flow.id, exc_info=True)
        return False
    return True


def deliver_error_answer(flow: http.HTTPFlow, status: int, body: bytes) -> bool:
    """From the ``error`` hook, before any response reached a plain-HTTP/1.1 client: write a whole JSON
    answer (``connection: close``) to the client and kill the flow, so mitmproxy sends no HTML error page
    of its own after it (a killed flow's error carries no status) and closes the connection.

    Returns False (nothing written) for a TLS or HTTP/2 client or no live connection.
    """
    if flow.client_conn.tls or not flow.request.http_version.startswith("HTTP/1") or not flow.killable:
        return False
    writer = _writer(flow, flow.client_conn)
    if writer is None or not hasattr(writer, "is_closing") or writer.is_closing():
        return False
    reason = status_codes.RESPONSES.get(status, "")
    cors_lines = "".join(f"{k}: {v}\r\n" for k, v in answer_header_lines(flow))  # a browser must read it too
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n{cors_lines}"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    try:
        writer.write(head.encode() + body)
    except Exception:  # noqa: BLE001
        logger.debug("flow %s: writing the error answer failed", flow.id, exc_info=True)
        return False
    flow.kill()  # mitmproxy tells a kill by the error message: it must stay Error.KILLED_MESSAGE
    return True


class IdleWatchdog:
    """Closes the upstream connection of a streamed flow after ``timeout`` seconds without upstream bytes.

    One timer on the event loop (``call_later``), moved on when it fires early: no task and no coroutine per
    flow (a task's set-up was ~30 µs of a streamed flow's time to first byte in mitmdump, issue 31). The stream
    callable sets ``last`` on every chunk."""

    __slots__ = ("flow", "timeout", "last", "timed_out", "_timer", "_loop")

    def __init__(self, flow: http.HTTPFlow, timeout: float) -> None:
        self.flow = flow
        self.timeout = timeout
        self.last = time.monotonic()
        self.timed_out = False
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> IdleWatchdog:
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:  # no running loop (unit tests with taddons): nothing to watch
            return self
        self._timer = self._loop.call_later(self.timeout, self._check)
        return self

    def touch(self) -> None:
        self.last = time.monotonic()

    def cancel(self) -> None:
        timer = self._timer
        self._timer = None
        self.flow = None  # type: ignore[assignment]  # release the flow at once
        if timer is not None:
            timer.cancel()

    def _check(self) -> None:
        self._timer = None
        flow = self.flow
        if flow is None or self._loop is None:
            return
        wait = self.last + self.timeout - time.monotonic()
        if wait > 0:
            self._timer = self._loop.call_later(wait, self._check)
            return
        self.timed_out = True
        logger.warning(
            "flow %s: no upstream bytes for %g s (dragoman_idle_timeout): closing the upstream connection",
            flow.id,
            self.timeout,
        )
        if not close_server_connection(flow):
            flow.kill()


def final_error_frame(flow: http.HTTPFlow, state: FlowState, message: str, timed_out: bool, idle_timeout: int) -> bool:
    """The upstream died (or was closed for idling) mid-stream: finish the client's body with one error
    event in its protocol where mitmproxy lets us (plain-HTTP/1.1 clients, see ``dragoman.mitm.answer.faults``)."""
    if timed_out:
        info = ErrorInfo(
            kind=ErrorKind.TIMEOUT,
            message=f"upstream sent nothing for {idle_timeout} s (dragoman_idle_timeout); connection closed",
            status=504,
        )
    else:
        info = ErrorInfo(
            kind=ErrorKind.API_ERROR, message=f"upstream connection failed mid-stream: {message}", status=502
        )
    try:
        frame = state.translator.fail(info)
    except Exception:  # noqa: BLE001
        logger.exception("flow %s: encoding the final error frame failed", flow.id)
        return False
    if not frame or not deliver_final_frame(flow, frame):
        return False  # pass-through (no frame of our own) or a client connection we cannot write to
    state.sent += len(frame)
    logger.warning(
        "flow %s: %s after %d bytes to the client; ended the client's stream with an error event",
        flow.id,
        "idle timeout" if timed_out else f"connection failed mid-stream ({logsafe(message)})",
        state.sent,
    )
    return True


def error_answer(flow: http.HTTPFlow, state: FlowState, message: str) -> bool:
    """The upstream failed before any answer reached the client (refused, reset, dropped mid-body of a
    whole answer) on the direct path: answer a 502 with a JSON error in the client's protocol where mitmproxy
    lets us (a plain-HTTP/1.1 client, see ``dragoman.mitm.answer.faults``), instead of mitmproxy's HTML page."""
    info = ErrorInfo(kind=ErrorKind.API_ERROR, message=f"upstream connection failed: {message}", status=502)
    try:
        body = error_body(info, state.plan.client)
    except Exception:  # noqa: BLE001
        logger.exception("flow %s: encoding the error answer failed", flow.id)
        return False
    if not deliver_error_answer(flow, 502, body):
        return False
    logger.warning("flow %s: connection failed (%s); answered 502 with a JSON error", flow.id, logsafe(message))
    return True
