"""``Relay``: the in-process upstream dispatcher that makes failover possible before the first byte.

mitmproxy commits a flow to one server connection, so a 429 or a refused connection could only reach the
client. A routed flow with more than one possible attempt is therefore pointed at this HTTP/1.1 server on
127.0.0.1 (started in ``running``), with a one-time token as its path. The relay runs the flow's attempts
(``dragoman.routing.attempts``) with its own client (``upstream_http``), reads failed answers whole to
classify them, and hands mitmproxy the first good answer as it arrives, chunk by chunk: the addon's
``responseheaders``/stream callable then translate it exactly as on the direct path, for the protocol of
the upstream that answered (the job's ``commit`` sets it before the headers leave).

Once the headers of a 2xx answer have been sent there is no retry. When a streamed body then fails (reset,
early end, ``idle_timeout`` without a byte) the relay ends its own body cleanly after noting the failure
in the job, so the stream callable closes the client's stream with one error event in the client's
protocol, whatever the client's transport (HTTP/1.1, TLS, HTTP/2). A whole (JSON) answer is read in full
before its headers leave, so a failure there becomes a clean 502 error body.

A request that is not streamed needs no loopback hop at all: ``whole_answer`` runs the same attempts in the
addon's ``request`` hook and returns the answer, which the addon sets as the flow's response (mitmproxy then
never connects upstream for it). Only streamed answers, and bodies held by the gate, go through the server.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from http import HTTPStatus

from dragoman.logsafe import logsafe
from dragoman.mitm.keymask import KeyMask
from dragoman.mitm.relay import http1
from dragoman.mitm.relay.upstream_http import ERROR_BODY_LIMIT
from dragoman.mitm.relay.upstream_http import Trust
from dragoman.mitm.relay.upstream_http import UpstreamConnectError
from dragoman.mitm.relay.upstream_http import UpstreamResponse
from dragoman.mitm.relay.upstream_http import close_idle
from dragoman.mitm.relay.upstream_http import open_request
from dragoman.routing.attempts import Attempt
from dragoman.routing.attempts import Attempts
from dragoman.routing.classify import ErrorClass
from dragoman.routing.classify import classify
from dragoman.routing.classify import retry_after
from dragoman.routing.url import UpstreamURL

logger = logging.getLogger(__name__)

#: upstream response headers the relay does not pass on (framing is its own; ``content-encoding`` passes, as
#: the body is passed on as it came: the addon decodes it, incrementally for gzip/deflate SSE)
HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})
#: the longest whole (non-SSE) answer the relay holds before passing it on
WHOLE_BODY_LIMIT = 256 << 20


@dataclass(slots=True)
class Prepared:
    """One attempt, ready to send: where, and what (translated body, headers with the attempt's key)."""

    url: UpstreamURL
    path: str
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(slots=True)
class Failure:
    """An answer read whole (translated by the addon): the one the client gets when no attempt succeeded, or
    the 2xx answer of a request that is not streamed (``whole_answer``)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(slots=True)
class FixedAnswer:
    """A job answered by Dragoman itself, without any upstream (a request refused before its body was read)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(slots=True)
class RelayJob:
    flow_id: str
    attempts: Attempts
    #: translate the request for an attempt and set its key (called once per attempt)
    prepare: Callable[[Attempt], Prepared]
    #: the attempt whose answer goes to the client (the winner or the last one tried; None: none was possible)
    commit: Callable[[Attempt | None], None]
    #: an error answer in the committed attempt's upstream protocol (status, message, retry-after seconds)
    error_answer: Callable[[int, str, float | None], Failure]
    #: called when a streamed body fails after its headers left (message, timed_out)
    on_stream_failure: Callable[[str, bool], None]
    connect_timeout: float
    first_byte_timeout: float
    idle_timeout: float  # 0: none
    trust: Trust = Trust()
    #: end a failed stream with a clean end of body (False for byte pass-through: cut it, as the upstream did)
    clean_end: bool = True
    clock: Callable[[], float] = time.monotonic
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Relay:
    def __init__(self) -> None:
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.jobs: dict[str, RelayJob | FixedAnswer] = {}
        self._starting: asyncio.Lock | None = None
        #: the configured keys, masked in the error excerpts kept in logs and in the flow's attempts
        self.keys = KeyMask()

    async def start(self) -> None:
        if self.server is not None:
            return
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self.server is None:
                self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=http1.MAX_HEAD)
                self.port = self.server.sockets[0].getsockname()[1]
                logger.debug("relay listening on 127.0.0.1:%d", self.port)

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self.jobs.clear()
        close_idle()

    def register(self, job: RelayJob | FixedAnswer) -> str:
        token = secrets.token_urlsafe(18)
        self.jobs[token] = job
        return token

    def forget(self, token: str) -> None:
        self.jobs.pop(token, None)

    # -- serving mitmproxy's side

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """mitmproxy's connection: requests one after the other (keep-alive), each answered in full."""
        try:
            while True:
                head = await http1.read_head(reader)
                if head is None:
                    return
                start, headers = head
                await http1.BodyReader(reader, headers).drain(0)  # the job holds what to send upstream
                target = start.split(" ")[1] if start.count(" ") >= 2 else ""
                job = self.jobs.pop(target.lstrip("/"), None)
                if job is None:
                    body = b'{"error":"unknown relay token"}'
                    await _send_whole(writer, 404, [("content-type", "application/json")], body)
                    continue
                if isinstance(job, FixedAnswer):
                    await _send_whole(writer, job.status, job.headers, job.body)
                    continue
                try:
                    await self._run(job, writer)
                finally:
                    job.done.set()
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            return  # mitmproxy is shutting down: nothing to report
        finally:
            writer.close()

    async def _run(self, job: RelayJob, writer: asyncio.StreamWriter) -> None:
        answer = await self.attempt(job)
        if isinstance(answer, Failure):
            await _send_whole(writer, answer.status, answer.headers, answer.body)
        else:
            await self._deliver(job, answer, writer)

    async def whole_answer(self, job: RelayJob) -> Failure:
        """A job whose answer is read whole (a request that is not streamed), run in the caller's task: the
        answer of the first attempt that answered, or the failure to send, as status, headers, body (no
        loopback hop: the addon sets it as the flow's response; issue 31)."""
        try:
            resp = await self.attempt(job)
            if isinstance(resp, Failure):
                return resp
            try:
                return await self._read_whole(job, resp)
            finally:
                resp.close()
        finally:
            job.done.set()

    async def attempt(self, job: RelayJob) -> UpstreamResponse | Failure:
        """Try the job's attempts in order: the open answer of the first that answered 2xx (the job committed to
        it), or the answer to send when none did."""
        attempts = job.attempts
        last: Attempt | None = None
        failure: Failure | None = None
        while (att := attempts.next(job.clock())) is not None:
            last = att
            try:
                prep = job.prepare(att)
            except Exception as e:  # noqa: BLE001 - a request this upstream's protocol cannot carry: try the next
                status = getattr(e, "status_hint", None) or 400
                detail = f"cannot translate the request for {att.candidate}: {e}"
                attempts.failed(att, ErrorClass.UPSTREAM, job.clock(), None, None, detail)
                self._log_attempt(job, att, None, ErrorClass.UPSTREAM, detail)
                job.commit(att)
                failure = job.error_answer(status if 400 <= status < 600 else 400, str(e), None)
                continue
            try:
                resp = await open_request(
                    prep.url,
                    prep.path,
                    prep.headers,
                    prep.body,
                    connect_timeout=job.connect_timeout,
                    first_byte_timeout=job.first_byte_timeout,
                    trust=job.trust,
                )
            except UpstreamConnectError as e:
                attempts.failed(att, ErrorClass.UPSTREAM, job.clock(), None, None, str(e))
                self._log_attempt(job, att, None, ErrorClass.UPSTREAM, str(e))
                failure = None
                continue
            if 200 <= resp.status < 300:
                attempts.succeeded(att, job.clock(), resp.status)
                self._log_attempt(job, att, resp.status, None, "")
                job.commit(att)
                return resp
            body = await resp.read(ERROR_BODY_LIMIT)
            resp.close()
            cls = classify(resp.status, body)
            headers = dict(resp.headers)
            excerpt = _excerpt(self.keys.mask(body))
            attempts.failed(att, cls, job.clock(), resp.status, retry_after(headers, time.time()), excerpt)
            self._log_attempt(job, att, resp.status, cls, excerpt)
            failure = Failure(resp.status, _pass_headers(resp.headers), body)
            if cls is ErrorClass.REQUEST:
                break
        job.commit(last)
        return failure if failure is not None else self._no_answer(job, last)

    def _no_answer(self, job: RelayJob, last: Attempt | None) -> Failure:
        attempts = job.attempts
        if last is None:
            wait = attempts.resting_for(job.clock())
            why = "; ".join(attempts.skipped) or "no upstream could be tried"
            return job.error_answer(429, f"no upstream key is available: {why}", wait)
        detail = attempts.outcomes[-1].detail if attempts.outcomes else ""
        return job.error_answer(502, f"upstream unreachable after {len(attempts.outcomes)} attempt(s): {detail}", None)

    def _log_attempt(
        self, job: RelayJob, att: Attempt, status: int | None, cls: ErrorClass | None, detail: str
    ) -> None:
        outcome = job.attempts.outcomes[-1]
        what = f"status {status}" if status is not None else "no answer"
        if cls is None:
            # a first attempt that answered is said by the flow's own line ("via NAME"): one line per flow
            (logger.debug if att.number == 1 else logger.info)(
                "flow %s: attempt %d %s: %s in %.3f s",
                job.flow_id,
                att.number,
                logsafe(att.label()),
                what,
                outcome.seconds,
            )
        else:
            logger.info(
                "flow %s: attempt %d %s: %s, %s-bound in %.3f s%s",
                job.flow_id,
                att.number,
                logsafe(att.label()),
                what,
                cls.value,
                outcome.seconds,
                f" ({logsafe(detail)})" if detail else "",
            )

    async def _deliver(self, job: RelayJob, resp: UpstreamResponse, writer: asyncio.StreamWriter) -> None:
        try:
            ctype = (resp.header("content-type") or "").lower()
            if not ctype.startswith("text/event-stream"):
                await self._deliver_whole(job, resp, writer)
            else:
                await self._deliver_stream(job, resp, writer)
        finally:
            resp.close()

    async def _deliver_whole(self, job: RelayJob, resp: UpstreamResponse, writer: asyncio.StreamWriter) -> None:
        answer = await self._read_whole(job, resp)
        await _send_whole(writer, answer.status, answer.headers, answer.body)

    async def _read_whole(self, job: RelayJob, resp: UpstreamResponse) -> Failure:
        """The whole body of an answer (bounded, each piece within the idle timeout), or the error to send."""
        out = bytearray()
        try:
            while (chunk := await _next(resp, job.idle_timeout)) is not None:
                out += chunk
                if len(out) > WHOLE_BODY_LIMIT:
                    raise ConnectionError(f"answer larger than {WHOLE_BODY_LIMIT} bytes")
        except TimeoutError:
            return job.error_answer(
                504,
                f"upstream sent nothing for {job.idle_timeout:g} s mid-answer (dragoman_idle_timeout); connection closed",
                None,
            )
        except (ConnectionError, OSError) as e:
            return job.error_answer(502, f"upstream connection failed mid-answer: {e}", None)
        return Failure(resp.status, _pass_headers(resp.headers), bytes(out))

    async def _deliver_stream(self, job: RelayJob, resp: UpstreamResponse, writer: asyncio.StreamWriter) -> None:
        headers = [*_pass_headers(resp.headers), ("transfer-encoding", "chunked")]
        writer.write(http1.encode_head(f"HTTP/1.1 {resp.status} {_reason(resp.status)}", headers))
        await writer.drain()
        idle = job.idle_timeout
        loop = asyncio.get_running_loop()
        try:
            # one timer for the whole body, moved on per piece (a wait_for per event would cost a task each);
            # it runs only while waiting for the upstream, never while mitmproxy's side is slow to take bytes
            async with asyncio.timeout(loop.time() + idle if idle > 0 else None) as window:
                while (piece := await resp.next_chunk()) is not None:
                    window.reschedule(None)
                    writer.write(http1.chunk(piece))
                    await writer.drain()
                    if idle > 0:
                        window.reschedule(loop.time() + idle)
        except TimeoutError:
            job.on_stream_failure(
                f"upstream sent nothing for {job.idle_timeout:g} s (dragoman_idle_timeout); connection closed", True
            )
        except (ConnectionError, OSError) as e:
            if writer.is_closing():
                raise  # mitmproxy's side went away (client gone, or its own idle close)
            job.on_stream_failure(f"upstream connection failed mid-stream: {e}", False)
        else:
            writer.write(http1.LAST_CHUNK)
            await writer.drain()
            return
        if not job.clean_end:
            raise ConnectionError("upstream stream failed: cut, as the upstream did")
        writer.write(http1.LAST_CHUNK)
        await writer.drain()


async def _next(resp: UpstreamResponse, idle: float) -> bytes | None:
    if idle > 0:
        return await asyncio.wait_for(resp.next_chunk(), idle)
    return await resp.next_chunk()


async def _send_whole(writer: asyncio.StreamWriter, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
    headers = [*[(k, v) for k, v in headers if k.lower() not in HOP_HEADERS], ("content-length", str(len(body)))]
    writer.write(http1.encode_head(f"HTTP/1.1 {status} {_reason(status)}", headers) + body)
    await writer.drain()


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def _pass_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k not in HOP_HEADERS]


def _excerpt(body: bytes) -> str:
    text = body[:200].decode("utf-8", "replace").replace("\n", " ").strip()
    return text
