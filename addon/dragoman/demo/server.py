"""The fake upstream's HTTP/1.1 server: asyncio, keep-alive, 127.0.0.1 (``FakeUpstream``; ``main`` is the CLI).

Endpoints (the protocol is chosen by the path; the query string is ignored):
  POST .../v1/messages        Anthropic Messages
  POST .../chat/completions   OpenAI Chat Completions
  POST .../responses          OpenAI Responses
  POST .../models/M:generateContent, :streamGenerateContent   Gemini
  GET / HEAD any path         health check (200 "ok", text/plain)

The scenario is chosen per request by the header ``x-fake-scenario``, else by the model name when it is a
scenario name, else by the server default; ``FakeUpstream(answer=...)`` replaces that choice by one callable
that sees every request (its headers and body) and picks the reply itself; ``FakeUpstream(routes=...)`` adds
endpoints by exact path (any method, query ignored, e.g. ``GET /v1/models``), each a callable from the recorded
request to a ``Reply``, consulted before everything else. A reply with a JSON body is sent with ``content-length``; a
streamed reply as ``text/event-stream`` with chunked transfer encoding, ONE SSE event per HTTP chunk,
written as soon as it is produced (``delay`` seconds apart; ``stall`` and ``drop`` faults act where the
scenario marked them). Every POST is recorded (``FakeUpstream.requests``) and, when ``log_path`` is set,
appended to that file as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import sys
import threading
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path
from typing import Any

from dragoman.demo import anthropic
from dragoman.demo.scenarios import SCENARIOS
from dragoman.demo.wire import ANTHROPIC
from dragoman.demo.wire import LAST_CHUNK
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from dragoman.demo.wire import Scenario
from dragoman.demo.wire import chunk
from dragoman.demo.wire import detect_protocol

logger = logging.getLogger(__name__)

_LIMIT = 1 << 20  # the longest request head / chunk-size line accepted


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""
    protocol: str | None = None


#: an extra endpoint of ``FakeUpstream(routes=...)``: the recorded request -> the reply
Route = Callable[[RecordedRequest], Reply]


@dataclass
class _Incoming:
    method: str
    path: str
    version: str
    headers: dict[str, str]
    raw: bytes = b""

    @property
    def keep_alive(self) -> bool:
        conn = self.headers.get("connection", "").lower()
        return conn != "close" and (self.version != "HTTP/1.0" or conn == "keep-alive")


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"date: {formatdate(usegmt=True)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class FakeUpstream:
    """``with FakeUpstream() as up: up.url`` runs the server in a daemon thread on 127.0.0.1.

    ``scenario`` is the default scenario's name; ``scenarios`` adds to (or overrides) the registry;
    ``stall`` is the pause of the ``stall`` fault, ``delay`` the pause between streamed events;
    ``record=False`` keeps no request log (the benchmark); ``answer``, when given, answers every POST to a
    model endpoint (no scenario choice by header or model); ``backlog`` is the listen queue (hundreds of
    clients connecting at once need more than a small one).
    """

    def __init__(
        self,
        port: int = 0,
        scenario: str = "text",
        stall: float = 2.0,
        delay: float = 0.0,
        host: str = "127.0.0.1",
        *,
        scenarios: Mapping[str, Scenario] | None = None,
        log_path: Path | None = None,
        record: bool = True,
        answer: Scenario | None = None,
        backlog: int = 512,
        routes: Mapping[str, Route] | None = None,
    ) -> None:
        self.scenarios: dict[str, Scenario] = {**SCENARIOS, **(scenarios or {})}
        if scenario not in self.scenarios:
            raise ValueError(f"unknown scenario {scenario!r}; choose one of {', '.join(self.scenarios)}")
        self.scenario = scenario
        self.stall = stall
        self.delay = delay
        self.log_path = log_path
        self.record = record
        self.answer = answer
        self.routes: dict[str, Route] = dict(routes or {})
        self.requests: list[RecordedRequest] = []
        self.lock = threading.Lock()
        self._sock = socket.create_server((host, port), backlog=backlog)
        self._backlog = backlog
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- running ----------------------------------------------------------------------------------------

    def start(self) -> FakeUpstream:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="fake-upstream", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fake upstream did not start")
        return self

    def serve_forever(self, announce: str = "") -> None:
        """Serve in this thread until ``stop()`` (from another thread) or Ctrl-C; ``announce``: a line printed
        once the loop serves (a signal from then on stops it cleanly: whoever waits for the line may send one)."""
        self._run(None, announce)

    def stop(self) -> None:
        loop, done = self._loop, self._done
        if loop is not None and done is not None:
            try:
                loop.call_soon_threadsafe(done.set)
            except RuntimeError:  # the loop has already ended
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event | None, announce: str = "") -> None:
        try:
            asyncio.run(self._serve(ready, announce))
        finally:
            self._sock.close()

    async def _serve(self, ready: threading.Event | None, announce: str = "") -> None:
        self._loop = asyncio.get_running_loop()
        self._done = asyncio.Event()
        # asyncio listens again on the socket it is given, with its own default of 100 unless told
        server = await asyncio.start_server(self._connection, sock=self._sock, limit=_LIMIT, backlog=self._backlog)
        if ready is not None:
            ready.set()
        if announce:
            print(announce, flush=True)
        try:
            await self._done.wait()
        finally:
            server.close()  # open connections end when asyncio.run cancels their tasks

    # -- one connection -----------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._exchange(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            logger.debug("fake upstream: connection ended: %r", e)
        except asyncio.CancelledError:
            # the server is stopping with this connection open (a client idle between requests): end the task
            # quietly, or asyncio's stream callback prints the cancellation as a traceback on stderr
            logger.debug("fake upstream: connection closed at shutdown")
        finally:
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; False: the connection ends."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # the client closed between requests
        incoming = _parse_head(head)
        if incoming is None:
            writer.write(_plain(400, b"bad request", close=True))
            return False
        if incoming.headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        incoming.raw = await _read_body(reader, incoming.headers)
        logger.debug("fake upstream: %s %s", incoming.method, incoming.path)
        route = self.routes.get(incoming.path.split("?", 1)[0])
        if route is not None:
            self._answer_route(route, incoming, writer)
        elif incoming.method in ("GET", "HEAD"):
            writer.write(_plain(200, b"" if incoming.method == "HEAD" else b"ok"))
        elif incoming.method != "POST":
            writer.write(_plain(501, b"unsupported method"))
        elif not await self._post(incoming, writer):
            return False
        await writer.drain()
        return incoming.keep_alive

    def _answer_route(self, route: Route, incoming: _Incoming, writer: asyncio.StreamWriter) -> None:
        try:
            body = json.loads(incoming.raw) if incoming.raw else None
        except ValueError:
            body = None
        rec = RecordedRequest(incoming.method, incoming.path, incoming.headers, body, incoming.raw)
        self._record(rec)
        reply = route(rec)
        if reply.body is not None:
            writer.write(_bytes(reply.status, reply.body, reply.headers))
        else:
            writer.write(_json(reply.status, reply.json_body, reply.headers))

    async def _post(self, incoming: _Incoming, writer: asyncio.StreamWriter) -> bool:
        try:
            body = json.loads(incoming.raw) if incoming.raw else None
        except ValueError:
            body = None
        protocol = detect_protocol(incoming.path)
        self._record(RecordedRequest("POST", incoming.path, incoming.headers, body, incoming.raw, protocol))
        if protocol is None or not isinstance(body, dict):
            msg = "fake upstream: unknown path or bad body"
            writer.write(_json(404 if protocol is None else 400, _invalid(msg)))
            return True
        problem = anthropic.request_problem(body) if protocol == ANTHROPIC else None
        if problem is not None:
            writer.write(_json(400, anthropic.error_body("invalid_request_error", problem)))
            return True
        request = Request.of(protocol, body, incoming.headers, incoming.path)
        name = "answer"
        scenario = self.answer
        if scenario is None:
            name = incoming.headers.get("x-fake-scenario") or (
                request.model if request.model in self.scenarios else self.scenario
            )
            scenario = self.scenarios.get(name)
        if scenario is None:
            writer.write(_json(400, _invalid(f"fake upstream: unknown scenario {name!r}")))
            return True
        try:
            reply = scenario(request)
        except Exception as e:  # noqa: BLE001 - a broken scenario answers 500, the server keeps running
            logger.exception("fake upstream: scenario %s failed", name)
            writer.write(_json(500, _invalid(f"fake upstream: scenario failed: {e!r}")))
            return True
        if reply.hangup:
            return False
        if reply.json_body is not None:
            writer.write(_json(reply.status, reply.json_body, reply.headers))
            return True
        if reply.body is not None:
            writer.write(_bytes(reply.status, reply.body, reply.headers))
            return True
        stall = float(incoming.headers.get("x-fake-stall") or self.stall)
        return await self._stream(reply, writer, stall)

    async def _stream(self, reply: Reply, writer: asyncio.StreamWriter, stall: float) -> bool:
        """Write a streamed reply; False: the scenario dropped the connection."""
        headers = {
            **reply.headers,
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "transfer-encoding": "chunked",
        }
        writer.write(_head(reply.status, headers))
        if reply.framed is not None:
            writer.write(reply.framed)
            return True
        await writer.drain()
        for i, data in enumerate(reply.events):
            if reply.drop_after is not None and i >= reply.drop_after:
                await writer.drain()
                return False  # no terminating chunk: the connection closes mid-body
            writer.write(chunk(data))
            await writer.drain()
            if reply.stall_after == i:
                await asyncio.sleep(stall)
            elif self.delay:
                await asyncio.sleep(self.delay)
        writer.write(LAST_CHUNK)
        return True

    def _record(self, rec: RecordedRequest) -> None:
        if not self.record:
            return
        with self.lock:
            self.requests.append(rec)
            path = self.log_path
        if path is not None:
            line = {"method": rec.method, "path": rec.path, "protocol": rec.protocol, "headers": rec.headers}
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps({**line, "body": rec.body}) + "\n")


# -- HTTP/1.1 bits ------------------------------------------------------------------------------------------


def _parse_head(head: bytes) -> _Incoming | None:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    method, path, version = parts
    if path.startswith("//"):  # as http.server does: never a scheme-relative path
        path = "/" + path.lstrip("/")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return _Incoming(method, path, version, headers)


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16):
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
            pass
        return b"".join(parts)
    n = int(headers.get("content-length") or 0)
    return await reader.readexactly(n) if n else b""


def _invalid(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error"}}


def _json(status: int, obj: Any, headers: Mapping[str, str] | None = None) -> bytes:
    data = json.dumps(obj).encode()
    extra = {"content-type": "application/json", "content-length": str(len(data))}
    return _head(status, {**(headers or {}), **extra}) + data


def _bytes(status: int, data: bytes, headers: Mapping[str, str]) -> bytes:
    return _head(status, {"content-type": "application/json", **headers, "content-length": str(len(data))}) + data


def _plain(status: int, data: bytes, close: bool = False) -> bytes:
    extra = {"connection": "close"} if close else {}
    return _head(status, {"content-type": "text/plain", "content-length": str(len(data)), **extra}) + data


# -- the command line ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="dragoman fake-upstream", description="Run the scriptable fake LLM upstream on 127.0.0.1."
    )
    ap.add_argument("--port", type=int, default=8765, help="port to listen on (0: any free port); default 8765")
    ap.add_argument(
        "--scenario",
        default="text",
        choices=list(SCENARIOS),
        help="default scenario (header x-fake-scenario overrides)",
    )
    ap.add_argument(
        "--stall", type=float, default=2.0, help="seconds the 'stall' scenario pauses after its first text delta"
    )
    ap.add_argument("--delay", type=float, default=0.05, help="seconds between streamed events (default 0.05)")
    args = ap.parse_args(argv)
    fake: FakeUpstream | None = None
    # one protected range from before the constructor (which listens before it returns) to the end: a signal
    # may arrive at any point once the port is open, also between the constructor's return and the next line
    try:
        try:
            fake = FakeUpstream(port=args.port, scenario=args.scenario, stall=args.stall, delay=args.delay)
        except OSError as e:
            print(f"dragoman fake-upstream: cannot listen on 127.0.0.1:{args.port}: {e.strerror or e}", file=sys.stderr)
            return 1
        fake.serve_forever(f"fake upstream listening on {fake.url} (scenario {fake.scenario}; Ctrl-C to stop)")
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP under the command line's ``stop_on_signals``
        pass
    finally:
        if fake is not None:
            fake.stop()
    return 0
