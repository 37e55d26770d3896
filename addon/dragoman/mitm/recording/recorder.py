"""``Recorder``: writes every LLM API exchange to ``DIR/<session>/NNN-<slug>.json`` (``dragoman_record``).

It has two halves because it must see a flow on both sides of ``Translate`` (hooks run in list order):

* ``Recorder.before`` (listed BEFORE Translate) keeps the client's request as received, the upstream
  response headers and, for whole bodies, the upstream body before Translate rewrites them;
* ``Recorder`` (listed AFTER Translate) keeps the request as sent upstream, wraps the stream callable
  Translate installed so it sees the raw upstream chunks (with arrival times) and what the client got,
  and writes the exchange in ``response``/``error``.

Secrets are redacted (``dragoman.record.redact``). A streamed body goes to a spool file as it arrives
(secrets masked on the way in), never into memory, and each exchange is serialised and written on one
background thread (``record_writer``), so a long stream neither grows mitmdump nor holds up other flows
(``record_spool``, ``make bench-record``). A write failure is logged as an ERROR and then, like
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
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import Any

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http

from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.mitm.flowstate import detach_stream
from dragoman.mitm.flowstate import inner_code
from dragoman.mitm.guards.scrub import known_keys
from dragoman.mitm.recording import files as store
from dragoman.mitm.recording.build import Pending
from dragoman.mitm.recording.build import build_exchange
from dragoman.mitm.recording.build import headers_of
from dragoman.mitm.recording.build import redactor_for
from dragoman.mitm.recording.build import snapshot_request
from dragoman.mitm.recording.build import write_exchange
from dragoman.mitm.recording.spool import BodySpool
from dragoman.mitm.recording.spool import ChunkLog
from dragoman.mitm.recording.writer import RecordWriter
from dragoman.protocols import detect

logger = logging.getLogger(__name__)

UPSTREAM_CHUNKS_KEY = "dragoman_upstream_chunks"


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
        rec.pending[flow.id] = Pending(
            seq=rec.seq,
            started=datetime.now(UTC).isoformat(timespec="milliseconds"),
            client_protocol=protocol.value,
            client_request=snapshot_request(flow.request),
        )

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        p = self.owner.pending.get(flow.id)
        if p is None or flow.response is None:
            return
        resp = flow.response
        p.upstream_status = resp.status_code
        p.upstream_reason = resp.reason
        p.upstream_version = resp.http_version
        p.upstream_headers = headers_of(resp.headers)
        p.t_headers = time.monotonic()
        if resp.timestamp_start and flow.request.timestamp_end:
            p.headers_delay = max(0.0, resp.timestamp_start - flow.request.timestamp_end)

    def response(self, flow: http.HTTPFlow) -> None:
        p = self.owner.pending.get(flow.id)
        if p is None or flow.response is None or p.up is not None:
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
        self.pending: dict[str, Pending] = {}
        self.seq = 0
        self.written = 0
        self.writer = RecordWriter(self._write_failed)
        #: mitmproxy's ``save_stream_file`` is set (None: not configured yet, read it each time)
        self._save_stream: bool | None = None

    @property
    def active(self) -> bool:
        return self.root is not None or self._saving()

    def _saving(self) -> bool:
        if self._save_stream is not None:
            return self._save_stream
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
        if "save_stream_file" in updated or self._save_stream is None:
            # mitmproxy's option, read by every flow's hooks (``active``): known from the first configure on (a
            # host without mitmproxy's ``save`` addon has no such option: never saving)
            self._save_stream = bool(getattr(ctx.options, "save_stream_file", None))
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
        p.upstream_request = snapshot_request(flow.request)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        p = self.pending.get(flow.id)
        if p is None or flow.response is None:
            return
        inner = flow.response.stream
        if not inner:
            return
        # every secret known before the first chunk (the keys Dragoman holds included) is masked in it
        red = redactor_for(p, self.redact_names, _known_keys())
        folder = self._session_dir() if self.root is not None else None
        saving = self._saving()

        def spool(side: str) -> Path | None:
            return folder / f".spool-{p.seq:03d}-{flow.id}.{side}" if folder is not None else None

        try:
            p.up = BodySpool(spool("up"), red.mask())
            p.client = BodySpool(spool("client"), red.mask(), keep=saving)
            p.log = ChunkLog(spool("chunks"))
        except OSError as e:
            p.discard()
            self._write_failed(e)
            return
        p.saved_chunks = [] if saving else None
        flow.response.stream = self._tee(p, inner)

    @staticmethod
    def _tee(p: Pending, inner: Any):
        up, client, log, saved = p.up, p.client, p.log, p.saved_chunks
        assert up is not None and client is not None and log is not None
        t0 = p.t_headers or time.monotonic()

        def on_chunk(data: bytes) -> Any:
            if data:
                log.add(up.size, time.monotonic() - t0)
                up.write(data)
                if saved is not None:
                    saved.append(data)
            else:
                p.ended = True
            out = data if inner is True else inner(data)
            if isinstance(out, (bytes, bytearray)):
                client.write(bytes(out))
            elif out:
                out = list(out)
                for piece in out:
                    client.write(piece)
            return out

        return on_chunk

    def response(self, flow: http.HTTPFlow) -> None:
        p = self.pending.pop(flow.id, None)
        if p is None:
            return
        detach_stream(flow, _TEE_CODES)  # the tee and the stream it wraps go now, not with the flow
        if p.saved_chunks is not None and flow.response is not None:
            # -w: make the saved flow carry both sides of the streamed response
            if flow.response.raw_content is None and p.client is not None:
                flow.response.raw_content = bytes(p.client.memory or b"")
            flow.metadata[UPSTREAM_CHUNKS_KEY] = p.saved_chunks
        if (flow.metadata.get(METADATA_KEY) or {}).get("attempts"):
            # routed: Translate's response hook has put the answering attempt's request back on the flow
            # (a relayed flow went to 127.0.0.1 first)
            p.upstream_request = snapshot_request(flow.request)
        self._finish(flow, p, None)

    def error(self, flow: http.HTTPFlow) -> None:
        p = self.pending.pop(flow.id, None)
        if p is None:
            return
        detach_stream(flow, _TEE_CODES)
        self._finish(flow, p, flow.error.msg if flow.error else "unknown error")

    def done(self) -> None:
        self.writer.close()
        for p in self.pending.values():
            p.discard()
        self.pending.clear()

    def wait(self) -> None:
        """Until every exchange handed to the writer thread is on disk (tests; ``done`` at shutdown)."""
        self.writer.wait()

    # -- writing

    def _session_dir(self) -> Path:
        assert self.root is not None
        if self.session_dir is None:
            self.session_dir = store.new_session_dir(self.root, self.session_name)
            self.session_dir.mkdir(parents=True, exist_ok=True)
        return self.session_dir

    def _finish(self, flow: http.HTTPFlow, p: Pending, error: str | None) -> None:
        if self.root is None:
            p.discard()
            return
        try:
            ex, red, sp = build_exchange(flow, p, error, self.redact_names, _known_keys())
        except Exception:
            p.discard()
            raise
        name = store.exchange_filename(ex.seq, ex.client_protocol, "to", ex.upstream_protocol, ex.upstream_model)
        path = self._session_dir() / name

        def job() -> None:
            write_exchange(path, ex, red, sp)
            self.written += 1
            logger.debug("recorded %s", path)

        self.writer.submit(job)

    def _write_failed(self, e: OSError) -> None:
        # mitmproxy save.py's policy: never let traffic through unrecorded; crash visibly.
        logger.error("cannot write a recording to %s: %s; stopping", self.root, e)
        sys.stderr.write(f"Dragoman: cannot write the recording to {self.root}: {e}\n")
        sys.exit(1)


#: the code of the recorder's tee (``flowstate.detach_stream`` drops it at the flow's end)
_TEE_CODES = frozenset({inner_code(Recorder._tee, "on_chunk")})


def _known_keys() -> list[str]:
    """The keys Dragoman holds (configured upstream keys, client keys): masked in every body a recording keeps."""
    return [k.decode("utf-8", "surrogateescape") for k in known_keys().secrets]
