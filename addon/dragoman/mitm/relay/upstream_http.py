"""A minimal asyncio HTTP/1.1 client for the relay's upstream attempts (framing in ``http1``).

TLS verified as mitmproxy verifies its own upstream connections: against ``ssl_verify_upstream_trusted_ca``/
``_confdir`` when set, else certifi's roots; not at all with ``insecure``. ``open`` returns once the response
headers are in (bounded by the connect and first-byte timeouts), so the caller can classify a failure before any
byte reaches the client; the body is then read chunk by chunk as it arrives.

Connections are kept alive (issue 31: a new connection per attempt was most of the relay's cost per short
request): an answer read to its end (length or chunked framing, no ``connection: close``, HTTP/1.1) gives its
connection back to an idle pool per origin and trust, at most ``POOL_SIZE`` each, reused within ``POOL_IDLE``
seconds (below the 5 s keep-alive of common servers: uvicorn, Node). A reused connection the server closed in
the meantime (no byte of an answer) is replaced by a new one once, for the same request; an answer cut short
closes its connection. ``close_idle`` drops them all (the relay's ``stop``).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass

import certifi
from mitmproxy import ctx

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


def trust_from_options() -> Trust:
    """The relay checks upstream certificates as mitmproxy does (its ``ssl_*`` options)."""
    opts = ctx.options
    return Trust(
        bool(getattr(opts, "ssl_insecure", False)),
        getattr(opts, "ssl_verify_upstream_trusted_ca", None),
        getattr(opts, "ssl_verify_upstream_trusted_confdir", None),
    )


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


#: idle connections kept per origin and trust, and how long one may idle before it is dropped
POOL_SIZE = 32
POOL_IDLE = 2.0
_Key = tuple[str, str, int, Trust]
_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_idle: dict[_Key, list[tuple[float, asyncio.AbstractEventLoop, _Conn]]] = {}


def _take(key: _Key) -> _Conn | None:
    conns = _idle.get(key)
    if not conns:
        return None
    loop = asyncio.get_running_loop()
    now = time.monotonic()
    while conns:
        since, owner, (reader, writer) = conns.pop()
        if owner is loop and now - since < POOL_IDLE and not writer.is_closing() and not reader.at_eof():
            return reader, writer
        writer.close()
    return None


def _give_back(key: _Key, conn: _Conn) -> None:
    conns = _idle.setdefault(key, [])
    if len(conns) >= POOL_SIZE:
        conn[1].close()
        return
    conns.append((time.monotonic(), asyncio.get_running_loop(), conn))


def close_idle() -> None:
    """Close every idle connection (at shutdown)."""
    for conns in _idle.values():
        for _, _, (_, writer) in conns:
            writer.close()
    _idle.clear()


@dataclass(slots=True)
class UpstreamResponse:
    status: int
    headers: list[tuple[str, str]]
    _body: http1.BodyReader
    _writer: asyncio.StreamWriter
    _reader: asyncio.StreamReader
    #: where the connection goes back once the body is read to its end (None: closed instead)
    _pool_key: _Key | None

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
        """Done with the answer: its connection goes back to the pool when the body was read to its end."""
        if self._pool_key is not None and self._body.reusable():
            key, self._pool_key = self._pool_key, None
            if not self._writer.is_closing():
                _give_back(key, (self._reader, self._writer))
                return
        self._pool_key = None
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
    host = url.host if url.port in (80, 443) else f"{url.host}:{url.port}"
    all_headers = [("host", host), *headers, ("content-length", str(len(body)))]
    try:
        head = http1.encode_head(f"POST {path} HTTP/1.1", all_headers)
    except ValueError as e:
        raise UpstreamConnectError(f"{url.origin}: {type(e).__name__}: {e}") from e
    key: _Key = (url.scheme, url.host, url.port, trust)

    async def ask(conn: _Conn) -> UpstreamResponse:
        """One exchange on ``conn``; ``_Stale`` (no byte of an answer) is left to the caller."""
        try:
            return await _exchange(conn, key, head, body, first_byte_timeout)
        except _Stale:
            raise
        except TimeoutError as e:
            raise UpstreamConnectError(
                f"{url.origin} sent no response headers within {first_byte_timeout:.0f} s"
            ) from e
        except (OSError, ssl.SSLError, ConnectionError, ValueError) as e:
            raise UpstreamConnectError(f"{url.origin}: {type(e).__name__}: {e}") from e

    reused = _take(key)
    if reused is not None:
        try:
            return await ask(reused)
        except _Stale:
            pass  # the server closed it while idle: the same request on a new connection
    try:
        tls = tls_context(trust) if url.scheme == "https" else None
        conn = await asyncio.wait_for(
            asyncio.open_connection(
                url.host, url.port, ssl=tls, server_hostname=url.host if tls else None, limit=http1.MAX_HEAD
            ),
            connect_timeout,
        )
    except TimeoutError as e:
        raise UpstreamConnectError(f"no connection to {url.origin} within {connect_timeout:.0f} s") from e
    except (OSError, ssl.SSLError) as e:
        raise UpstreamConnectError(f"cannot connect to {url.origin}: {e}") from e
    try:
        return await ask(conn)
    except _Stale as e:
        raise UpstreamConnectError(f"{url.origin}: ConnectionError: {e}") from e


class _Stale(ConnectionError):
    """The connection ended before any byte of an answer."""


async def _exchange(conn: _Conn, key: _Key, head: bytes, body: bytes, first_byte_timeout: float) -> UpstreamResponse:
    """Send one request on ``conn`` and read the answer's head; the connection is closed on any failure."""
    reader, writer = conn
    try:
        try:
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
        except (ConnectionResetError, BrokenPipeError) as e:
            raise _Stale(str(e) or type(e).__name__) from e
        status, version, headers_out = await asyncio.wait_for(_response_head(reader), first_byte_timeout)
        body_reader = http1.BodyReader(reader, headers_out, has_body=status not in (204, 304))
    except BaseException:
        writer.close()
        raise
    keep = version == "HTTP/1.1" and "close" not in (http1.header(headers_out, "connection") or "").lower()
    return UpstreamResponse(status, headers_out, body_reader, writer, reader, key if keep else None)


async def _response_head(reader: asyncio.StreamReader) -> tuple[int, str, list[tuple[str, str]]]:
    first = True
    while True:
        try:
            head = await http1.read_head(reader)
        except (ConnectionResetError, BrokenPipeError) as e:
            if first:
                raise _Stale(str(e) or type(e).__name__) from e
            raise
        if head is None:
            if first:
                raise _Stale("the upstream closed the connection before answering")
            raise ConnectionError("the upstream closed the connection before answering")
        first = False
        start, headers = head
        version, _, rest = start.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise http1.FramingError(f"not an HTTP/1.1 status line: {start[:80]!r}")
        status = int(code)
        if 100 <= status < 200:
            continue  # 100 Continue and friends
        return status, version, headers
