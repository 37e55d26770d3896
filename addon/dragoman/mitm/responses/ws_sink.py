"""The loopback WebSocket peer behind a Responses WebSocket flow: mitmproxy's WebSocket layer needs a server
on the other side, and this one accepts the upgrade (101, no extension) and then stays silent, reading and
discarding until mitmproxy closes it. Every answer the client gets is injected by ``socket``;
nothing the client sends reaches this peer (the addon drops those messages)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging

logger = logging.getLogger(__name__)

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_HEAD = 64 * 1024


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()  # noqa: S324 - RFC 6455


class WsSink:
    def __init__(self) -> None:
        self.port = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
            self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > _MAX_HEAD:
                return
            key = ""
            for line in head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "sec-websocket-key":
                    key = value.strip()
            if not key:
                writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                return
            writer.write(
                b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                b"sec-websocket-accept: " + accept_key(key).encode() + b"\r\n\r\n"
            )
            await writer.drain()
            while await reader.read(65536):
                pass
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, OSError):
            pass
        finally:
            writer.close()
