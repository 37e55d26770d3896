"""The shipped recordings (``recordings/``) for tests: loading, and what a client of any protocol receives
when an exchange is replayed (the live path's translation, run sans-I/O).

``EXCHANGES``: every ``(path, Exchange)`` under ``recordings/``, in path order. ``replay_output(ex, client)``:
the status and body a client of protocol ``client`` gets when ``ex`` is replayed (identity plans pass the
upstream bytes through, like ``Translate``); call it inside ``deterministic()`` so clock-based ``created``
values and ids minted when the upstream has none are stable.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from dragoman.errors import TranslationError
from dragoman.mitm.recording import files as store
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.record.model import Exchange
from dragoman.translate.plan import Plan
from dragoman.translate.request import translate_request
from dragoman.translate.response import UpstreamErrorInBody
from dragoman.translate.response import error_body
from dragoman.translate.response import translate_error
from dragoman.translate.response import translate_response
from dragoman.translate.stream import StreamTranslator

logger = logging.getLogger(__name__)

RECORDINGS = Path(__file__).resolve().parents[1] / "recordings"
EXCHANGES: list[tuple[Path, Exchange]] = store.load_exchanges(RECORDINGS)
SESSIONS = sorted({p.parent.name for p, _ in EXCHANGES})
CLOCK = 1_700_000_000.0


def exchange_id(path: Path) -> str:
    """``<session>/<NNN>`` (a short pytest id)."""
    return f"{path.parent.name}/{path.name[:3]}"


class _FakeUUID:
    def __init__(self, n: int) -> None:
        self.hex = f"{n:032x}"


@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    """Frozen clock and counter-based ids for the encoders (``uuid.uuid4``, ``secrets.token_hex``),
    restarted per ``with``: production output is unchanged, only what it draws from the clock and the
    random source is pinned."""
    counter = itertools.count(1)
    with (
        mock.patch("time.time", lambda: CLOCK),
        mock.patch("uuid.uuid4", lambda: _FakeUUID(next(counter))),
        mock.patch("secrets.token_hex", lambda n=16: f"{next(counter):0{2 * n}x}"),
    ):
        yield


@dataclass(frozen=True, slots=True)
class Output:
    """What the client gets: the status, the body, and whether the body is an SSE stream."""

    status: int
    body: bytes
    stream: bool


def client_context(ex: Exchange) -> Context:
    """The context a replayed flow has: the recorded client request decoded into the IR (no model map)."""
    ctx = Context()
    client = Protocol(ex.client_protocol)
    upstream = Protocol(ex.upstream_protocol or ex.client_protocol)
    translate_request(ex.client_request.body.raw(), Plan(client, upstream), ctx)
    return ctx


def replay_output(ex: Exchange, client: Protocol, pieces: list[bytes] | None = None) -> Output:
    """What ``Translate`` serves a ``client`` when ``ex``'s upstream response is replayed over ``pieces``
    (default: the recorded chunks). Mirrors ``Translate.responseheaders``/``_translate_whole``."""
    resp = ex.upstream_response
    if resp is None:
        raise ValueError("the exchange has no upstream response (a recorded connection failure)")
    plan = Plan(client, Protocol(ex.upstream_protocol or ex.client_protocol))
    body = resp.body.raw()
    ok = 200 <= resp.status < 300
    sse = (resp.header("content-type") or "").lower().startswith("text/event-stream") or resp.chunks is not None
    if plan.identity:
        return Output(resp.status, body, ok and sse)
    ctx = client_context(ex)
    if not ok:
        status, out, _ = translate_error(resp.status, body, plan, dict(resp.headers))
        return Output(status, out, False)
    if sse:
        if pieces is None:
            pieces = [c for c, _ in resp.chunk_bytes()]
        tr = StreamTranslator(get_codec(plan.upstream).stream_decoder(ctx), get_codec(plan.client).stream_encoder(ctx))
        out = bytearray()
        for p in pieces:
            out += tr.feed(p)
        if not resp.truncated:  # a cut upstream: the client got what was translated before the cut
            out += tr.close()
        return Output(resp.status, bytes(out), True)
    try:
        return Output(resp.status, translate_response(body, plan, ctx), False)
    except UpstreamErrorInBody as e:
        return Output(e.info.http_status, error_body(e.info, plan.client), False)
    except TranslationError as e:
        info = e.to_error_info()
        return Output(info.http_status, error_body(info, plan.client), False)
