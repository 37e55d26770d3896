"""What the Recorder knows about one flow (``Pending``) and the ``Exchange`` built from it, redacted.

A streamed exchange's bodies are in spool files (``record_spool``): the Exchange gets placeholders where they
go, and ``write_exchange`` (run on the Recorder's writer thread) streams them into the file.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from mitmproxy import http

from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.mitm.recording import files as store
from dragoman.mitm.recording.spool import CHUNKS_MARK
from dragoman.mitm.recording.spool import CHUNKS_PAIR
from dragoman.mitm.recording.spool import BodySpool
from dragoman.mitm.recording.spool import ChunkLog
from dragoman.mitm.recording.spool import assemble
from dragoman.mitm.recording.spool import body_pieces
from dragoman.mitm.recording.spool import chunk_pieces
from dragoman.mitm.recording.spool import indent_before
from dragoman.record.model import Body
from dragoman.record.model import Exchange
from dragoman.record.model import HttpRequest
from dragoman.record.model import HttpResponse
from dragoman.record.redact import Redactor


@dataclass(slots=True)
class Pending:
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
    #: streamed: the raw upstream body and what the client got, spooled; the upstream chunks' offsets/times
    up: BodySpool | None = None
    client: BodySpool | None = None
    log: ChunkLog | None = None
    #: -w: the raw upstream chunks, kept for the saved flow's metadata
    saved_chunks: list[bytes] | None = None
    red: Redactor | None = None
    upstream_body: bytes | None = None
    ended: bool = False

    def discard(self) -> None:
        for s in (self.up, self.client, self.log):
            if s is not None:
                s.discard()


@dataclass(slots=True)
class Spooled:
    """A streamed exchange's spool files and the placeholders their contents replace."""

    up: BodySpool
    log: ChunkLog
    client: BodySpool | None
    up_mark: str
    client_mark: str


def headers_of(h: http.Headers) -> list[tuple[str, str]]:
    return [(k, v) for k, v in h.items(multi=True)]


def snapshot_request(req: http.Request, parse_json: bool = True) -> HttpRequest:
    return HttpRequest(
        method=req.method,
        url=req.pretty_url,
        http_version=req.http_version,
        headers=headers_of(req.headers),
        body=Body.of(req.get_content(strict=False), parse_json=parse_json),
    )


def redact_request(red: Redactor, req: HttpRequest) -> HttpRequest:
    headers = red.headers(req.headers)
    url = red.url(req.url)
    body = req.body
    if body.json_ is not None:
        body = Body(json=red.json(body.json_))
    elif body.text:
        parsed = body.parsed()
        body = Body(json=red.json(parsed)) if parsed is not None else Body.of(red.body_bytes(body.raw()))
    return req.model_copy(update={"headers": headers, "url": url, "body": body})


def redactor_for(p: Pending, names: list[str], known: Iterable[str] = ()) -> Redactor:
    """The flow's Redactor, with every secret known so far (``known``: the keys Dragoman holds; both requests,
    the upstream response headers)."""
    if p.red is None:
        p.red = Redactor(names)
    p.red.add_secrets(known)
    redact_request(p.red, p.client_request)
    if p.upstream_request is not None:
        redact_request(p.red, p.upstream_request)
    p.red.headers(p.upstream_headers)
    return p.red


def _spooled_body(spool: BodySpool, mark: str) -> Body:
    spool.close()
    if not spool.size:
        return Body(text="")
    return Body(text=mark) if spool.utf8 else Body(b64=mark)


def _upstream_response(p: Pending, red: Redactor, error: str | None, sp: Spooled | None) -> HttpResponse | None:
    if p.upstream_status is None:
        return None
    if sp is not None:
        body = _spooled_body(sp.up, sp.up_mark)
        sp.log.close()
        chunks: list[tuple[int, float]] | None = [CHUNKS_PAIR] if sp.log.count else []
    else:
        body, chunks = Body.of(red.body_bytes(p.upstream_body or b"")), None
    return HttpResponse(
        status=p.upstream_status,
        reason=p.upstream_reason,
        http_version=p.upstream_version,
        headers=red.headers(p.upstream_headers),
        body=body,
        headers_delay=round(p.headers_delay, 6),
        chunks=chunks,
        truncated=error is not None or (sp is not None and not p.ended),
    )


def build_exchange(
    flow: http.HTTPFlow, p: Pending, error: str | None, names: list[str], known: Iterable[str] = ()
) -> tuple[Exchange, Redactor, Spooled | None]:
    red = redactor_for(p, names, known)
    meta = flow.metadata.get(METADATA_KEY) or {}
    client_protocol = meta.get("client") or p.client_protocol
    sp = None
    if p.up is not None and p.log is not None and p.up.path is not None:
        token = secrets.token_hex(8)
        sp = Spooled(p.up, p.log, p.client, f"@@dragoman-spool-{token}-up@@", f"@@dragoman-spool-{token}-client@@")
    client_resp = None
    if flow.response is not None:
        resp = flow.response
        if sp is not None and sp.client is not None:
            body = _spooled_body(sp.client, sp.client_mark)
        else:
            body = Body.of(red.body_bytes(resp.raw_content or b""))
        client_resp = HttpResponse(
            status=resp.status_code,
            reason=resp.reason,
            http_version=resp.http_version,
            headers=red.headers(headers_of(resp.headers)),
            body=body,
        )
    ex = Exchange(
        seq=p.seq,
        started=p.started,
        flow_id=flow.id,
        client_protocol=client_protocol,
        upstream_protocol=meta.get("target") or client_protocol,
        client_model=meta.get("client_model"),
        upstream_model=meta.get("upstream_model"),
        stream=bool(meta.get("stream", False)) or p.up is not None,
        dropped=list(meta.get("dropped") or []),
        client_request=redact_request(red, p.client_request),
        upstream_request=redact_request(red, p.upstream_request) if p.upstream_request else None,
        upstream_response=_upstream_response(p, red, error, sp),
        client_response=client_resp,
        error=error,
        route=meta.get("route"),
        upstream=meta.get("upstream"),
        attempts=meta.get("attempts"),
        client_name=meta.get("client_name"),
    )
    return ex, red, sp


def write_exchange(path: Path, ex: Exchange, red: Redactor, sp: Spooled | None) -> None:
    """Serialise and write one exchange (on the writer thread); a streamed one's bodies from its spools."""
    try:
        text = red.text(ex.to_json())
        if sp is None:
            store.write_atomic(path, text)
            return
        marks: list[tuple[str, Any]] = []
        if sp.up_mark in text:
            assert sp.up.path is not None
            marks.append((sp.up_mark, body_pieces(sp.up.path, sp.up.utf8, red.mask())))
        up_at = text.find(sp.up_mark)
        if CHUNKS_MARK in text[max(up_at, 0) :]:
            assert sp.log.path is not None
            marks.append((CHUNKS_MARK, chunk_pieces(sp.log.path, indent_before(text, CHUNKS_MARK, max(up_at, 0)))))
        if sp.client is not None and sp.client.path is not None and sp.client_mark in text:
            marks.append((sp.client_mark, body_pieces(sp.client.path, sp.client.utf8, red.mask())))
        store.write_atomic(path, assemble(text, marks))
    finally:
        if sp is not None:
            for s in (sp.up, sp.client, sp.log):
                if s is not None:
                    s.discard()
