"""mitmproxy addon for the benchmark's reference path: stream SSE through a callable that splits the
body into SSE events and re-emits them unchanged (the floor any event-by-event translator sits on).

Run: ``mitmdump -s bench/passthrough_addon.py --mode reverse:http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import logging

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


class PassThroughSSE:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is None:
            return
        if "text/event-stream" in flow.response.headers.get("content-type", ""):
            flow.response.stream = SSESplit()
        else:
            flow.response.stream = True


addons = [PassThroughSSE()]
