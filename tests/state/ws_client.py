"""A small blocking WebSocket client on wsproto (a mitmproxy dependency on every supported version): what
Codex does on its Responses socket, for tests."""

from __future__ import annotations

import json
import socket
from typing import Any

import wsproto
from wsproto.events import AcceptConnection
from wsproto.events import CloseConnection
from wsproto.events import RejectConnection
from wsproto.events import RejectData
from wsproto.events import Request
from wsproto.events import TextMessage


class WsClient:
    def __init__(self, port: int, path: str = "/v1/responses", key: str = "client-key-a", timeout: float = 30) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        self.status: int | None = None
        self._text = ""
        self._pending: list[Any] = []
        headers = [(b"authorization", f"Bearer {key}".encode()), (b"openai-beta", b"responses_websockets=2026-02-06")]
        self.sock.sendall(self.ws.send(Request(host=f"127.0.0.1:{port}", target=path, extra_headers=headers)))
        while self.status is None:
            for ev in self._read():
                if isinstance(ev, AcceptConnection):
                    self.status = 101
                elif isinstance(ev, RejectConnection):
                    self.status = ev.status_code

    def _read(self) -> list[Any]:
        data = self.sock.recv(65536)
        self.ws.receive_data(data or None)
        return [ev for ev in self.ws.events() if not isinstance(ev, RejectData)]

    def send(self, obj: dict[str, Any]) -> None:
        self.sock.sendall(self.ws.send(TextMessage(json.dumps(obj))))

    def messages(self) -> Any:
        """Each message as a dict, as it arrives."""
        while True:
            if not self._pending:
                self._pending = self._read()
                if not self._pending and self.ws.state.name != "OPEN":
                    return
            ev = self._pending.pop(0)
            if isinstance(ev, TextMessage):
                self._text += ev.data
                if ev.message_finished:
                    text, self._text = self._text, ""
                    yield json.loads(text)
            elif isinstance(ev, CloseConnection):
                return

    def turn(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Send one ``response.create``; the events until ``response.completed`` / ``failed`` / ``error``."""
        self.send({"type": "response.create", **body})
        out = []
        for msg in self.messages():
            out.append(msg)
            if msg.get("type") in ("response.completed", "response.failed", "response.incomplete", "error"):
                if msg.get("type") != "error" or "status" in msg:
                    break
        return out

    def close(self) -> None:
        try:
            self.sock.sendall(self.ws.send(CloseConnection(code=1000)))
        except Exception:  # noqa: BLE001
            pass
        self.sock.close()
