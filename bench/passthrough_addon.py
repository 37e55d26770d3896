"""mitmproxy addon for the benchmark's reference path: stream SSE through a callable that splits the
body into SSE events and re-emits them unchanged (the floor any event-by-event translator sits on).

Its listening sockets get the same backlog as Dragoman's default (``dragoman_listen_backlog``, 4096; mitmproxy's
own is 100), so that a burst of connections measures the per-flow work of both, not the kernel dropping the
pass-through's SYNs (retried after 1, 2, 4 s).

Run: ``mitmdump -s bench/passthrough_addon.py --mode reverse:http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from mitmproxy import ctx
from mitmproxy import http

logger = logging.getLogger(__name__)


class SSESplit:
    """Buffers bytes, emits complete events (up to the last blank line, LF or CRLF) as ONE bytes."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def __call__(self, data: bytes) -> bytes | list:
        if not data:  # end of stream: flush the rest (may be called twice on HTTP/2)
            rest, self._buf = self._buf, b""
            return rest
        buf = self._buf + data if self._buf else data
        lf = buf.rfind(b"\n\n")
        crlf = buf.rfind(b"\r\n\r\n")
        cut = max(lf + 2 if lf >= 0 else -1, crlf + 4 if crlf >= 0 else -1)
        if cut < 0:
            self._buf = buf
            return []  # never b"" for a data chunk (that would end the chunked response)
        self._buf = buf[cut:]
        out = buf[:cut]
        return out


BACKLOG = 4096


def _widen() -> int:
    widened = 0
    for instance in getattr(ctx.master.addons.get("proxyserver"), "servers", None) or ():
        for server in getattr(instance, "_servers", None) or ():
            for tsock in getattr(server, "sockets", None) or ():
                with socket.socket(fileno=os.dup(tsock.fileno())) as sock:
                    if sock.type == socket.SOCK_STREAM:
                        sock.listen(BACKLOG)
                        widened += 1
    return widened


async def _widen_soon() -> None:
    for _ in range(50):  # mitmproxy's servers start after ``running``: widen what listens, for 5 s
        _widen()
        await asyncio.sleep(0.1)


class PassThroughSSE:
    def running(self) -> None:
        self._widening = asyncio.get_running_loop().create_task(_widen_soon())

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is None:
            return
        if "text/event-stream" in flow.response.headers.get("content-type", ""):
            flow.response.stream = SSESplit()
        else:
            flow.response.stream = True


addons = [PassThroughSSE()]
