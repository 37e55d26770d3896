"""``Recorder``: writes every LLM API exchange to ``DIR/<session>/NNN-<slug>.json`` (``dragoman_record``).

It has two halves because it must see a flow on both sides of ``Translate`` (hooks run in list order):

* ``Recorder.before`` (listed BEFORE Translate) keeps the client's request as received, the upstream
  response headers and, for whole bodies, the upstream body before Translate rewrites them;
* ``Recorder`` (listed AFTER Translate) keeps the request as sent upstream, wraps the stream callable
  Translate installed so it sees the raw upstream chunks (with arrival times) and what the client got,
  and writes the exchange in ``response``/``error``.

Secrets are redacted (``dragoman.record.redact``). A write failure is logged as an ERROR and then, like
mitmproxy's own ``save.py``, ends mitmdump (exit code 1): traffic that the user asked to record must not
go through unrecorded.

When flows are saved with ``-w`` (``save_stream_file``), the response hook also sets the streamed flow's
``raw_content`` to the bytes the client got and ``flow.metadata["dragoman_upstream_chunks"]`` to the raw
upstream chunks, so ``mitmdump -r`` / mitmweb show both sides of a streamed translation.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import Any

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http

from dragoman.mitm import store
from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.protocols import detect
from dragoman.record.model import Body
from dragoman.record.model import Exchange
from dragoman.record.model import HttpRequest
from dragoman.record.model import HttpResponse
from dragoman.record.redact import Redactor

logger = logging.getLogger(__name__)

UPSTREAM_CHUNKS_KEY = "dragoman_upstream_chunks"


@dataclass(slots=True)
class _Pending:
    """What is known about one flow so far."""

    seq: int
    started: str
    client_protocol: str
    client_request: HttpRequest
    upstream_request: HttpRequest | None = None
    upstream_status: int | None = None
    upstream_reason: str = ""
    upstream_version: str = "HTTP/1.1"
    upstream_headers: list[tuple[str, str]] = field(default_factory=list)
    headers_delay: float = 0.0
    t_headers: float = 0.0
    #: raw upstream chunks and their arrival (seconds after the headers); None: not streamed
    chunks: list[tuple[bytes, float]] | None = None
    client_out: bytearray | None = None
    upstream_body: bytes | None = None
    ended: bool = False


def _headers(h: http.Headers) -> list[tuple[str, str]]:
    return [(k, v) for k, v in h.items(multi=True)]


def _snapshot_request(req: http.Request, parse_json: bool = True) -> HttpRequest:
    return HttpRequest(
        method=req.method,
        url=req.pretty_url,
        http_version=req.http_version,
        headers=_headers(req.headers),
        body=Body.of(req.get_content(strict=False), parse_json=parse_json),
    )


class RecorderBefore:
    """The half of the Recorder that runs before Translate (see the module docstring)."""

    def __init__(self, owner: Recorder) -> None:
        self.owner = owner

    def request(self, flow: http.HTTPFlow) -> None:
        rec = self.owner
        if not rec.active or flow.response is not None or flow.error is not None:
            return
        protocol = detect(flow.request.path)
        if protocol is None:
            return
        rec.seq += 1
        rec.pending[flow.id] = _Pending(
            seq=rec.seq,
            started=datetime.now(UTC).isoformat(timespec="milliseconds"),
            client_protocol=protocol.value,
            client_request=_snapshot_request(flow.request),
        )

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        p = self.owner.pending.get(flow.id)
        if p is None or flow.response is None:
            return
        resp = flow.response
        p.upstream_status = resp.status_code
        p.upstream_reason = resp.reason
        p.upstream_version = resp.http_version
        p.upstream_headers = _headers(resp.headers)
        p.t_headers = time.monotonic()
        if resp.timestamp_start and flow.request.timestamp_end:
            p.headers_delay = max(0.0, resp.timestamp_start - flow.request.timestamp_end)

    def response(self, flow: http.HTTPFlow) -> None:
        p = self.owner.pending.get(flow.id)
        if p is None or flow.response is None or p.chunks is not None:
            return
        if p.upstream_status is not None:
            p.upstream_body = flow.response.raw_content or b""


class Recorder:
    """Record exchanges (``dragoman_record``); list ``recorder.before`` before Translate and this after it."""

    def __init__(self) -> None:
        self.before = RecorderBefore(self)
        self.root: Path | None = None
        self.session_dir: Path | None = None
        self.session_name = ""
        self.redact_names: list[str] = []
        self.pending: dict[str, _Pending] = {}
        self.seq = 0
        self.written = 0

    @property
    def active(self) -> bool:
        return self.root is not None or self._saving()

    @staticmethod
    def _saving() -> bool:
        return bool(getattr(ctx.options, "save_stream_file", None))

    # -- options

    def load(self, loader: Any) -> None:
        loader.add_option(
            "dragoman_record",
            str,
            "",
            "Record every LLM API exchange (translated or passed through) under DIR/<session>/NNN-<slug>.json: "
            "the client's request, the request sent upstream, the upstream response with its original chunks "
            "and timing, the client's response. Secrets are redacted. Empty: do not record.",
        )
        loader.add_option(
            "dragoman_record_session",
            str,
            "",
            "Name of the session folder under dragoman_record (a suffix -2, -3... is added if it exists). "
            "Empty: the start time, YYYYMMDD-HHMMSS.",
        )
        loader.add_option(
            "dragoman_redact",
            Sequence[str],
            [],
            "More header, query parameter or JSON body field names to redact in recordings (a bare name matches "
            "a body field at any depth, a.b.c a path from the top). Credential names (authorization, cookie, "
            "x-api-key, api_key, access_token, client_secret, password, *_api_key, ...: the list in "
            "dragoman.record.secret_names) are always redacted.",
        )

    def configure(self, updated: set[str]) -> None:
        if "dragoman_redact" in updated:
            self.redact_names = [n for n in ctx.options.dragoman_redact if n.strip()]
        if "dragoman_record" in updated or "dragoman_record_session" in updated:
            value = ctx.options.dragoman_record.strip()
            if not value:
                self.root = None
                self.session_dir = None
                return
            root = Path(value).expanduser()
            try:
                store.check_writable(root)
            except OSError as e:
                raise exceptions.OptionsError(f"Cannot record to dragoman_record {value!r}: {e}") from e
            name = ctx.options.dragoman_record_session.strip() or datetime.now().strftime("%Y%m%d-%H%M%S")
            if "/" in name or name in (".", ".."):
                raise exceptions.OptionsError(f"Invalid dragoman_record_session {name!r}: a folder name, not a path")
            self.root = root
            self.session_name = name
            self.session_dir = None  # created at the first write
            self.seq = 0
            logger.info("recording exchanges under %s/%s", root, name)

    # -- hooks (after Translate)

    def request(self, flow: http.HTTPFlow) -> None:
        p = self.pending.get(flow.id)
        if p is None or flow.response is not None:
            return
        p.upstream_request = _snapshot_request(flow.request)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        p = self.pending.get(flow.id)
        if p is None or flow.response is None:
            return
        inner = flow.response.stream
        if not inner:
            return
        p.chunks = []
        p.client_out = bytearray()
        flow.response.stream = self._tee(p, inner)

    @staticmethod
    def _tee(p: _Pending, inner: Any):
        chunks = p.chunks
        client_out = p.client_out
        assert chunks is not None and client_out is not None
        t0 = p.t_headers or time.monotonic()

        def on_chunk(data: bytes) -> Any:
            if data:
                chunks.append((data, time.monotonic() - t0))
            else:
                p.ended = True
            out = data if inner is True else inner(data)
            if isinstance(out, (bytes, bytearray)):
                client_out.extend(out)
            elif out:
                out = list(out)
                for piece in out:
                    client_out.extend(piece)
            return out

        return on_chunk

    def response(self, flow: http.HTTPFlow) -> None:
        p = self.pending.pop(flow.id, None)
        if p is None:
            return
        if p.chunks is not None and flow.response is not None and self._saving():
            # -w: make the saved flow carry both sides of the streamed response
            if flow.response.raw_content is None:
                flow.response.raw_content = bytes(p.client_out or b"")
            flow.metadata[UPSTREAM_CHUNKS_KEY] = [c for c, _ in p.chunks]
        if (flow.metadata.get(METADATA_KEY) or {}).get("attempts"):
            # routed: Translate's response hook has put the answering attempt's request back on the flow
            # (a relayed flow went to 127.0.0.1 first)
            p.upstream_request = _snapshot_request(flow.request)
        self._finish(flow, p, None)

    def error(self, flow: http.HTTPFlow) -> None:
        p = self.pending.pop(flow.id, None)
        if p is None:
            return
        self._finish(flow, p, flow.error.msg if flow.error else "unknown error")

    def done(self) -> None:
        self.pending.clear()

    # -- writing

    def _finish(self, flow: http.HTTPFlow, p: _Pending, error: str | None) -> None:
        if self.root is None:
            return
        ex, red = self._exchange(flow, p, error)
        try:
            self._write(ex, red)
        except OSError as e:
            # mitmproxy save.py's policy: never let traffic through unrecorded; crash visibly.
            logger.error("cannot write the recording of flow %s to %s: %s; stopping", flow.id, self.root, e)
            sys.stderr.write(f"Dragoman: cannot write the recording to {self.root}: {e}\n")
            sys.exit(1)

    def _exchange(self, flow: http.HTTPFlow, p: _Pending, error: str | None) -> tuple[Exchange, Redactor]:
        red = Redactor(self.redact_names)
        meta = flow.metadata.get(METADATA_KEY) or {}
        client_protocol = meta.get("client") or p.client_protocol
        client_req = self._redact_request(red, p.client_request)
        upstream_req = self._redact_request(red, p.upstream_request) if p.upstream_request else None
        upstream_resp = None
        if p.upstream_status is not None:
            if p.chunks is not None:
                raw = b"".join(c for c, _ in p.chunks)
                offsets, pos = [], 0
                for c, t in p.chunks:
                    offsets.append((pos, round(t, 6)))
                    pos += len(c)
                chunks: list[tuple[int, float]] | None = offsets
            else:
                raw = p.upstream_body or b""
                chunks = None
            upstream_resp = HttpResponse(
                status=p.upstream_status,
                reason=p.upstream_reason,
                http_version=p.upstream_version,
                headers=red.headers(p.upstream_headers),
                body=Body.of(red.body_bytes(raw)),
                headers_delay=round(p.headers_delay, 6),
                chunks=chunks,
                truncated=error is not None or (p.chunks is not None and not p.ended),
            )
        client_resp = None
        if flow.response is not None:
            resp = flow.response
            body = bytes(p.client_out) if p.client_out is not None else (resp.raw_content or b"")
            client_resp = HttpResponse(
                status=resp.status_code,
                reason=resp.reason,
                http_version=resp.http_version,
                headers=red.headers(_headers(resp.headers)),
                body=Body.of(red.body_bytes(body)),
            )
        upstream_protocol = meta.get("target") or client_protocol
        ex = Exchange(
            seq=p.seq,
            started=p.started,
            flow_id=flow.id,
            client_protocol=client_protocol,
            upstream_protocol=upstream_protocol,
            client_model=meta.get("client_model"),
            upstream_model=meta.get("upstream_model"),
            stream=bool(meta.get("stream", False)) or p.chunks is not None,
            dropped=list(meta.get("dropped") or []),
            client_request=client_req,
            upstream_request=upstream_req,
            upstream_response=upstream_resp,
            client_response=client_resp,
            error=error,
            route=meta.get("route"),
            upstream=meta.get("upstream"),
            attempts=meta.get("attempts"),
            client_name=meta.get("client_name"),
        )
        return ex, red

    @staticmethod
    def _redact_request(red: Redactor, req: HttpRequest) -> HttpRequest:
        headers = red.headers(req.headers)
        url = red.url(req.url)
        body = req.body
        if body.json_ is not None:
            body = Body(json=red.json(body.json_))
        elif body.text:
            parsed = body.parsed()
            body = Body(json=red.json(parsed)) if parsed is not None else Body.of(red.body_bytes(body.raw()))
        return req.model_copy(update={"headers": headers, "url": url, "body": body})

    def _write(self, ex: Exchange, red: Redactor) -> Path:
        assert self.root is not None
        if self.session_dir is None:
            self.session_dir = store.new_session_dir(self.root, self.session_name)
        name = store.exchange_filename(ex.seq, ex.client_protocol, "to", ex.upstream_protocol, ex.upstream_model)
        path = self.session_dir / name
        store.write_atomic(path, red.text(ex.to_json()))
        self.written += 1
        logger.debug("recorded %s", path)
        return path
