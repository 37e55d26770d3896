"""``Replayer``: serve recorded exchanges through the live path (``dragoman_replay=PATH``).

A matching request is not answered from the recording directly: it goes through ``Translate`` as usual
(``dragoman_target`` is set per flow to the recorded upstream's protocol) and is then sent to an
in-process HTTP/1.1 upstream on 127.0.0.1 that plays the recorded upstream response with its original
chunk boundaries and timing. So the stream callable and the translator run exactly as they did live, and
an exchange recorded with one upstream protocol replays to a client of any protocol. No network, no key.

Two halves, because hooks run in list order:
* ``Replayer.before`` (BEFORE Translate) matches the client's request (``keys.request_key``, then the
  protocol-neutral ``keys.conversation_key``) and sets the per-flow target;
* ``Replayer`` (AFTER Translate) points the translated request at the in-process upstream.

An unmatched request gets a 404 in the client's own error shape (``dragoman_replay_unmatched=error``),
goes to the real upstream (``forward``), or gets the next recorded exchange in order (``next``, for demos).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm.flowstate import TARGET_OVERRIDE_KEY
from dragoman.mitm.recording import files as store
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.record.keys import DEFAULT_IGNORE
from dragoman.record.keys import conversation_key
from dragoman.record.keys import request_key
from dragoman.record.model import Exchange
from dragoman.record.redact import Redactor
from dragoman.translate.response import error_body

logger = logging.getLogger(__name__)

TOKEN_HEADER = "x-dragoman-replay"
REPLAY_METADATA_KEY = "dragoman_replay"
UNMATCHED = ["error", "forward", "next"]
#: recorded upstream headers we do not replay (framing is ours)
HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


def parse_speed(value: str) -> float:
    """``"1"`` -> 1.0 (original timing), ``"2"`` twice as fast, ``"0"`` as fast as possible."""
    try:
        speed = float(value)
    except ValueError as e:
        raise ValueError(f"not a number: {value!r}") from e
    if speed < 0 or speed != speed or speed == float("inf"):
        raise ValueError(f"must be a finite number >= 0, got {value!r}")
    return speed


class _Entry:
    __slots__ = ("path", "exchange")

    def __init__(self, path: Path, exchange: Exchange) -> None:
        self.path = path
        self.exchange = exchange


class ReplayIndex:
    """Exchanges by exact key and by conversation key; repeated keys are served in recorded order, and the
    last one again once they are used up."""

    def __init__(self, entries: list[_Entry], ignore: Sequence[str], redact: Sequence[str] = ()) -> None:
        self.entries = entries
        self.ignore = list(ignore)
        self.redactor = Redactor(redact)
        self.exact: dict[str, list[_Entry]] = {}
        self.conversation: dict[str, list[_Entry]] = {}
        self.cursors: dict[str, int] = {}
        self.next_any = 0
        for e in entries:
            ex = e.exchange
            body = ex.client_request.body.parsed()
            self.exact.setdefault(request_key(ex.client_protocol, body, self.ignore), []).append(e)
            ck = conversation_key(ex.client_protocol, body)
            if ck is not None:
                self.conversation.setdefault(ck, []).append(e)

    def _take(self, key: str, found: list[_Entry]) -> _Entry:
        i = self.cursors.get(key, 0)
        self.cursors[key] = i + 1
        return found[min(i, len(found) - 1)]

    def match(self, protocol: str, body: Any) -> tuple[_Entry, str] | None:
        body = self.redactor.json(body)
        key = request_key(protocol, body, self.ignore)
        found = self.exact.get(key)
        if found:
            return self._take("x" + key, found), "exact"
        ck = conversation_key(protocol, body)
        if ck is not None and ck in self.conversation:
            return self._take("c" + ck, self.conversation[ck]), "conversation"
        return None

    def take_next(self) -> _Entry | None:
        if not self.entries:
            return None
        e = self.entries[self.next_any % len(self.entries)]
        self.next_any += 1
        return e


class ReplayerBefore:
    """The half of the Replayer that runs before Translate (see the module docstring)."""

    def __init__(self, owner: Replayer) -> None:
        self.owner = owner

    def request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        """Nothing to await while no replay is on (the chain's ``request`` then stays synchronous: no coroutine
        per flow); a replayed POST to an LLM endpoint is matched in ``_replay``."""
        if self.owner.index is None or flow.response is not None or flow.error is not None:
            return None
        protocol = detect(flow.request.path)
        if protocol is None or flow.request.method != "POST":
            return None
        return self._replay(flow, protocol)

    async def _replay(self, flow: http.HTTPFlow, protocol: Protocol) -> None:
        rp = self.owner
        assert rp.index is not None
        await rp.ensure_server()
        raw = flow.request.get_content(strict=False) or b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        found = rp.index.match(protocol.value, body)
        how = found[1] if found else ""
        entry = found[0] if found else None
        if entry is None:
            if rp.unmatched == "forward":
                logger.info("flow %s: no recorded exchange matches; forwarded upstream", flow.id)
                return
            if rp.unmatched == "next":
                entry, how = rp.index.take_next(), "next"
        if entry is None:
            info = ErrorInfo(
                kind=ErrorKind.NOT_FOUND,
                message=f"Dragoman replay: no recorded exchange in {rp.source} matches this {protocol.value} request",
                status=404,
            )
            flow.response = http.Response.make(404, error_body(info, protocol), {"content-type": "application/json"})
            logger.warning("flow %s: no recorded exchange matches this %s request", flow.id, protocol.value)
            return
        ex = entry.exchange
        upstream = ex.upstream_protocol or ex.client_protocol or protocol.value
        flow.metadata[TARGET_OVERRIDE_KEY] = upstream
        flow.metadata[REPLAY_METADATA_KEY] = {"exchange": str(entry.path), "match": how}
        token = secrets.token_hex(12)
        rp.tokens[token] = ex
        rp.flow_tokens[flow.id] = token
        logger.info(
            "flow %s: replaying %s (%s match, upstream %s)", flow.id, logsafe(entry.path.name), how, logsafe(upstream)
        )


class Replayer:
    """Replay recorded exchanges (``dragoman_replay``); list ``replayer.before`` before Translate, this after."""

    def __init__(self) -> None:
        self.before = ReplayerBefore(self)
        self.index: ReplayIndex | None = None
        self.source = ""
        self.speed = 1.0
        self.unmatched = "error"
        self.tokens: dict[str, Exchange] = {}
        self.flow_tokens: dict[str, str] = {}
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self._lock: asyncio.Lock | None = None

    # -- options

    def load(self, loader: Any) -> None:
        loader.add_option(
            "dragoman_replay",
            str,
            "",
            "Replay recorded exchanges: a recording file or a folder of them (searched recursively). Matching "
            "requests are answered by playing the recorded upstream response, with its original chunks and "
            "timing, through the translator (to a client of any protocol). No network or key needed.",
        )
        loader.add_option(
            "dragoman_replay_speed",
            str,
            "1",
            "Replay timing: 1 = the recorded timing, 2 = twice as fast, 0 = as fast as possible.",
        )
        loader.add_option(
            "dragoman_replay_ignore",
            Sequence[str],
            list(DEFAULT_IGNORE),
            "Client request body fields ignored when matching a request to a recording (dotted paths from the "
            "top, e.g. metadata.user_id). Setting this option replaces the default list.",
        )
        loader.add_option(
            "dragoman_replay_max_mb",
            int,
            512,
            "The largest recording file replay loads, in MiB; a larger one is refused (named in the log) and the "
            "others still replay.",
        )
        loader.add_option(
            "dragoman_replay_unmatched",
            str,
            "error",
            "A request no recording matches: error = a 404 in the client's error shape; forward = send it to "
            "the real upstream; next = serve the next recorded exchange in order (demos).",
            choices=UNMATCHED,
        )

    def configure(self, updated: set[str]) -> None:
        if "dragoman_replay_speed" in updated:
            try:
                self.speed = parse_speed(ctx.options.dragoman_replay_speed)
            except ValueError as e:
                raise exceptions.OptionsError(f"Invalid dragoman_replay_speed: {e}") from e
        if "dragoman_replay_unmatched" in updated:
            value = ctx.options.dragoman_replay_unmatched
            if value not in UNMATCHED:
                raise exceptions.OptionsError(
                    f"Invalid dragoman_replay_unmatched {value!r}: choose one of {', '.join(UNMATCHED)}"
                )
            self.unmatched = value
        if "dragoman_replay_max_mb" in updated and ctx.options.dragoman_replay_max_mb <= 0:
            raise exceptions.OptionsError("Invalid dragoman_replay_max_mb: a number of MiB > 0")
        if updated & {"dragoman_replay", "dragoman_replay_ignore", "dragoman_redact", "dragoman_replay_max_mb"}:
            value = ctx.options.dragoman_replay.strip()
            if not value:
                self.index = None
                return
            path = Path(value).expanduser()
            try:
                loaded, notes = store.load_playable(path, int(ctx.options.dragoman_replay_max_mb) << 20)
            except (OSError, ValueError) as e:
                raise exceptions.OptionsError(f"Cannot load dragoman_replay {value!r}: {e}") from e
            for note in notes:  # a refused or fixed recording, named (the others still replay)
                logger.warning("replay: %s", logsafe(note))
            entries = [_Entry(p, ex) for p, ex in loaded if ex.upstream_response is not None or ex.error is not None]
            if not entries:
                why = "; ".join(n for n in notes if ": refused: " in n)[:2000]
                raise exceptions.OptionsError(
                    f"Cannot load dragoman_replay {value!r}: no recorded exchanges found" + (f" ({why})" if why else "")
                )
            redact = list(getattr(ctx.options, "dragoman_redact", []) or [])
            self.index = ReplayIndex(entries, ctx.options.dragoman_replay_ignore, redact)
            self.source = path.name
            logger.info("replaying %d recorded exchanges from %s", len(entries), path)
            if getattr(ctx.options, "connection_strategy", "lazy") != "lazy":
                # eager mode connects to the (absent) upstream before any hook runs: replay needs lazy
                logger.info("replay: setting connection_strategy=lazy (no upstream connection before a request)")
                ctx.options.update(connection_strategy="lazy")

    async def running(self) -> None:
        if self.index is not None:
            await self.ensure_server()

    def done(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    # -- hooks (after Translate)

    def request(self, flow: http.HTTPFlow) -> None:
        token = self.flow_tokens.pop(flow.id, None)
        if token is None:
            return
        if flow.response is not None or flow.error is not None:
            self.tokens.pop(token, None)  # Translate answered by itself (e.g. an invalid request)
            return
        req = flow.request
        req.scheme = "http"
        req.host = "127.0.0.1"
        req.port = self.port
        req.headers[TOKEN_HEADER] = token

    def error(self, flow: http.HTTPFlow) -> None:
        # the token moved to the request header in ``request``: a flow that failed before the replay server
        # read it (e.g. the client went away) would leave its exchange in ``tokens`` for ever
        token = self.flow_tokens.pop(flow.id, None) or flow.request.headers.get(TOKEN_HEADER)
        if token is not None:
            self.tokens.pop(token, None)

    # -- the in-process upstream

    async def ensure_server(self) -> None:
        if self.server is not None:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.server is None:
                self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
                self.port = self.server.sockets[0].getsockname()[1]
                logger.debug("replay upstream listening on 127.0.0.1:%d", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            headers = _parse_headers(head)
            await _read_body(reader, headers)
            ex = self.tokens.pop(headers.get(TOKEN_HEADER, ""), None)
            if ex is None:
                body = b'{"error":{"type":"api_error","message":"Dragoman replay: unknown replay token"}}'
                writer.write(
                    b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\nconnection: close\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(body), body)
                )
                await writer.drain()
                return
            await self._play(ex, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            logger.debug("replay upstream: connection ended: %s", e)
        except Exception:  # noqa: BLE001 - a replay bug must not kill the server
            logger.exception("replay upstream failed")
        finally:
            writer.close()

    async def _play(self, ex: Exchange, writer: asyncio.StreamWriter) -> None:
        resp = ex.upstream_response
        if resp is None:
            return  # recorded connection failure: close without answering
        loop = asyncio.get_running_loop()
        speed = self.speed
        if speed and resp.headers_delay:
            await asyncio.sleep(resp.headers_delay / speed)
        lines = [f"HTTP/1.1 {resp.status} {resp.reason or 'OK'}"]
        lines += [f"{k}: {v}" for k, v in resp.headers if k.lower() not in HOP_HEADERS]
        lines.append("connection: close")
        if resp.chunks is None:
            body = resp.body.raw()
            lines.append(f"content-length: {len(body)}")
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await writer.drain()
            return
        lines.append("transfer-encoding: chunked")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        start = loop.time()
        for data, t in resp.chunk_bytes():
            if speed:
                wait = start + t / speed - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
            if data:
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
        if resp.truncated:
            return  # the upstream died mid-stream when recorded: end the same way, without the last chunk
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _parse_headers(head: bytes) -> dict[str, str]:
    out = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep:
            out[name.strip().lower()] = value.strip()
    return out


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        out = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return bytes(out)
            out += await reader.readexactly(size)
            await reader.readexactly(2)
    length = int(headers.get("content-length") or 0)
    return await reader.readexactly(length) if length else b""
