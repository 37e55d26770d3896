"""A minimal asyncio HTTP/1.1 client for the relay's upstream attempts (framing in ``http1``).

One connection per attempt; TLS verified as mitmproxy verifies its own upstream connections: against
``ssl_verify_upstream_trusted_ca``/``_confdir`` when set, else certifi's roots; not at all with ``insecure``. ``open`` returns once
the response headers are in (bounded by the connect and first-byte timeouts), so the caller can classify a
failure before any byte reaches the client; the body is then read chunk by chunk as it arrives.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

import certifi

from dragoman.mitm.relay import http1
from dragoman.routing.url import UpstreamURL

READ_SIZE = 65536
#: an error body is read for classification and the client's message, never beyond this
ERROR_BODY_LIMIT = 1 << 20


class UpstreamConnectError(Exception):
    """No usable response headers: refused, reset, TLS failure, timeout, broken HTTP."""


@dataclass(frozen=True, slots=True)
class Trust:
    """How upstream certificates are checked (mitmproxy's ``ssl_insecure`` and ``ssl_verify_upstream_trusted_*``)."""

    insecure: bool = False
    cafile: str | None = None
    capath: str | None = None


#: a request body larger than this is written in pieces of this size
WRITE_PIECE = 1 << 20
_contexts: dict[Trust, ssl.SSLContext] = {}


def tls_context(trust: Trust) -> ssl.SSLContext:
    ctx = _contexts.get(trust)
    if ctx is None:
        if trust.cafile or trust.capath:
            ctx = ssl.create_default_context(cafile=trust.cafile or None, capath=trust.capath or None)
        else:
            ctx = ssl.create_default_context(cafile=certifi.where())
        if trust.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["http/1.1"])
        _contexts[trust] = ctx
    return ctx


@dataclass(slots=True)
class UpstreamResponse:
    status: int
    headers: list[tuple[str, str]]
    _body: http1.BodyReader
    _writer: asyncio.StreamWriter

    def header(self, name: str) -> str | None:
        return http1.header(self.headers, name.lower())

    async def next_chunk(self) -> bytes | None:
        """The next piece of the body as it arrives, None at its end. Raises ``ConnectionError`` if the upstream
        ends it early or breaks the framing."""
        return await self._body.next()

    async def read(self, limit: int = ERROR_BODY_LIMIT) -> bytes:
        """The whole body (up to ``limit``); whatever arrived if the upstream fails mid-body."""
        out = bytearray()
        try:
            while len(out) < limit and (chunk := await self.next_chunk()) is not None:
                out += chunk
        except (ConnectionError, OSError):
            pass
        return bytes(out[:limit])

    def close(self) -> None:
        try:
            self._writer.close()
        except Exception:  # noqa: BLE001 - closing a dead transport
            pass


async def open_request(
    url: UpstreamURL,
    path: str,
    headers: list[tuple[str, str]],
    body: bytes,
    *,
    connect_timeout: float,
    first_byte_timeout: float,
    trust: Trust = Trust(),
) -> UpstreamResponse:
    """POST-like request; returns at the response headers. Raises ``UpstreamConnectError``."""
    try:
        tls = tls_context(trust) if url.scheme == "https" else None
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                url.host, url.port, ssl=tls, server_hostname=url.host if tls else None, limit=http1.MAX_HEAD
            ),
            connect_timeout,
        )
    except TimeoutError as e:
        raise UpstreamConnectError(f"no connection to {url.origin} within {connect_timeout:.0f} s") from e
    except (OSError, ssl.SSLError) as e:
        raise UpstreamConnectError(f"cannot connect to {url.origin}: {e}") from e
    host = url.host if url.port in (80, 443) else f"{url.host}:{url.port}"
    all_headers = [("host", host), *headers, ("content-length", str(len(body)))]
    try:
        head = http1.encode_head(f"POST {path} HTTP/1.1", all_headers)
        if len(body) <= WRITE_PIECE:
            writer.write(head + body)
        else:
            # a large body in pieces, each drained: no copy of it in the transport's buffer (nor head + body)
            writer.write(head)
            view = memoryview(body)
            for i in range(0, len(body), WRITE_PIECE):
                writer.write(view[i : i + WRITE_PIECE])
                await writer.drain()
        await writer.drain()
        status, headers_out = await asyncio.wait_for(_response_head(reader), first_byte_timeout)
        body_reader = http1.BodyReader(reader, headers_out, has_body=status not in (204, 304))
    except TimeoutError as e:
        writer.close()
        raise UpstreamConnectError(f"{url.origin} sent no response headers within {first_byte_timeout:.0f} s") from e
    except (OSError, ssl.SSLError, ConnectionError, ValueError) as e:
        writer.close()
        raise UpstreamConnectError(f"{url.origin}: {type(e).__name__}: {e}") from e
    return UpstreamResponse(status, headers_out, body_reader, writer)


async def _response_head(reader: asyncio.StreamReader) -> tuple[int, list[tuple[str, str]]]:
    while True:
        head = await http1.read_head(reader)
        if head is None:
            raise ConnectionError("the upstream closed the connection before answering")
        start, headers = head
        version, _, rest = start.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise http1.FramingError(f"not an HTTP/1.1 status line: {start[:80]!r}")
        status = int(code)
        if 100 <= status < 200:
            continue  # 100 Continue and friends
        return status, headers
