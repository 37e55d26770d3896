"""A raw-socket scripted upstream for fault tests (127.0.0.1, one thread per connection, stops itself).

Each request is answered by ``script(req) -> list of actions``: ``bytes`` (sent as-is), ``("sleep", s)``,
``"reset"`` (RST via SO_LINGER 0), ``"close"``, ``"wait_closed"`` (stall until the peer hangs up), ``("until_closed", interval, chunk)`` (send ``chunk``
every ``interval`` s until the peer is gone; the time the close was seen is recorded).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from dataclasses import dataclass
from dataclasses import field
from typing import Any


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    closed_at: float | None = None
    events: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_head(extra: str = "") -> bytes:
    return (
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n" + extra + "\r\n"
    ).encode()


def response(status: int, body: bytes, ctype: str = "application/json", extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


class RawUpstream:
    def __init__(self, script) -> None:
        self.script = script
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = conn.recv(65536)
                    if not d:
                        return
                    buf += d
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length") or 0)
                while len(buf) < n:
                    d = conn.recv(65536)
                    if not d:
                        return
                    buf += d
                body, buf = buf[:n], buf[n:]
                seen = Seen(method, path, headers, body)
                with self.lock:
                    self.seen.append(seen)
                if not self._run(conn, seen, self.script(seen)):
                    return
        except OSError:
            return
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def _run(self, conn: socket.socket, seen: Seen, actions: list) -> bool:
        for a in actions:
            if isinstance(a, bytes):
                conn.sendall(a)
            elif a == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
                return False
            elif a == "close":
                conn.close()
                return False
            elif a == "wait_closed":  # send nothing more; record when the peer hangs up
                conn.settimeout(60)
                try:
                    while conn.recv(65536):
                        pass
                except OSError:
                    pass
                seen.closed_at = time.monotonic()
                return False
            elif a[0] == "sleep":
                time.sleep(a[1])
            elif a[0] == "until_closed":
                _, interval, data = a
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    try:
                        conn.sendall(data)
                    except OSError:
                        seen.closed_at = time.monotonic()
                        return False
                    time.sleep(interval)
                return False
        return True

    def stop(self) -> None:
        self._stop = True
        self.sock.close()

    def __enter__(self) -> RawUpstream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
