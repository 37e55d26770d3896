"""A minimal asyncio HTTP/1.1 client for the relay's upstream attempts (h11, which mitmproxy ships).

One connection per attempt; TLS verified against certifi's roots unless ``insecure``. ``open`` returns once
the response headers are in (bounded by the connect and first-byte timeouts), so the caller can classify a
failure before any byte reaches the client; the body is then read chunk by chunk as it arrives.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

import certifi
import h11

from dragoman.routing.url import UpstreamURL

READ_SIZE = 65536
#: an error body is read for classification and the client's message, never beyond this
ERROR_BODY_LIMIT = 1 << 20


class UpstreamConnectError(Exception):
    """No usable response headers: refused, reset, TLS failure, timeout, broken HTTP."""


_contexts: dict[bool, ssl.SSLContext] = {}


def tls_context(insecure: bool) -> ssl.SSLContext:
    ctx = _contexts.get(insecure)
    if ctx is None:
        ctx = ssl.create_default_context(cafile=certifi.where())
        if insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["http/1.1"])
        _contexts[insecure] = ctx
    return ctx


@dataclass(slots=True)
class UpstreamResponse:
    status: int
    headers: list[tuple[str, str]]
    _conn: h11.Connection
    _reader: asyncio.StreamReader
    _writer: asyncio.StreamWriter

    def header(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return None

    async def next_chunk(self) -> bytes | None:
        """The next piece of the body as it arrives, None at its end. Raises ``ConnectionError`` if the upstream
        ends it early or breaks the framing."""
        try:
            while True:
                event = self._conn.next_event()
                if event is h11.NEED_DATA:
                    self._conn.receive_data(await self._reader.read(READ_SIZE))
                    continue
                if isinstance(event, h11.Data):
                    if event.data:
                        return bytes(event.data)
                    continue
                if isinstance(event, h11.EndOfMessage):
                    return None
                raise ConnectionError(f"unexpected {type(event).__name__} in the response body")
        except h11.RemoteProtocolError as e:
            raise ConnectionError(f"the upstream broke the response body: {e}") from e

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
    insecure: bool = False,
) -> UpstreamResponse:
    """POST-like request; returns at the response headers. Raises ``UpstreamConnectError``."""
    tls = tls_context(insecure) if url.scheme == "https" else None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(url.host, url.port, ssl=tls, server_hostname=url.host if tls else None),
            connect_timeout,
        )
    except TimeoutError as e:
        raise UpstreamConnectError(f"no connection to {url.origin} within {connect_timeout:.0f} s") from e
    except (OSError, ssl.SSLError) as e:
        raise UpstreamConnectError(f"cannot connect to {url.origin}: {e}") from e
    conn = h11.Connection(h11.CLIENT)
    host = url.host if url.port in (80, 443) else f"{url.host}:{url.port}"
    all_headers = [("host", host), *headers, ("content-length", str(len(body)))]
    try:
        writer.write(conn.send(h11.Request(method="POST", target=path, headers=all_headers)))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        event = await asyncio.wait_for(_response_headers(conn, reader), first_byte_timeout)
    except TimeoutError as e:
        writer.close()
        raise UpstreamConnectError(f"{url.origin} sent no response headers within {first_byte_timeout:.0f} s") from e
    except (OSError, ssl.SSLError, h11.ProtocolError, ConnectionError) as e:
        writer.close()
        raise UpstreamConnectError(f"{url.origin}: {type(e).__name__}: {e}") from e
    headers_out = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in event.headers]
    return UpstreamResponse(event.status_code, headers_out, conn, reader, writer)


async def _response_headers(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Response:
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(READ_SIZE)
            if not data and conn.their_state is h11.SEND_RESPONSE:
                raise ConnectionError("the upstream closed the connection before answering")
            conn.receive_data(data)
            continue
        if isinstance(event, h11.InformationalResponse):
            continue
        if isinstance(event, h11.Response):
            return event
        raise ConnectionError(f"unexpected {type(event).__name__} instead of response headers")
