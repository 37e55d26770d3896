"""Shared pieces of the fuzz tests: base streams per protocol, deterministic ids, translators, checks.

Base streams come from the fake upstream's reply builders (text, thinking, parallel tools, in-band
error) plus a few real corpus recordings per protocol. ``deterministic()`` freezes the clock and the
random ids the encoders mint so two runs of the same input can be compared byte for byte.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterator
from functools import cache
from unittest import mock

from dragoman import demo as fu
from dragoman.ir.request import Message
from dragoman.ir.request import Request
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.stream import StreamTranslator
from validators import Summary
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr

PROTOCOLS = (Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES)
PAIRS = [(u, c) for u in PROTOCOLS for c in PROTOCOLS]
PAIR_IDS = [f"{u.value}->{c.value}" for u, c in PAIRS]
VALIDATE = {
    Protocol.ANTHROPIC_MESSAGES: va.validate_stream,
    Protocol.OPENAI_CHAT: vc.validate_stream,
    Protocol.OPENAI_RESPONSES: vr.validate_stream,
}
SCENARIOS = ("text", "thinking", "tools", "midstream_error")


def fake_stream(proto: Protocol, scenario: str) -> bytes:
    if proto is Protocol.ANTHROPIC_MESSAGES:
        reply = fu.anthropic_reply(scenario, "m", True)
    elif proto is Protocol.OPENAI_CHAT:
        reply = fu.chat_reply(scenario, "m", True, True)
    else:
        reply = fu.responses_reply(scenario, "m", True)
    return b"".join(reply.events)


@cache
def base_streams(proto: Protocol) -> tuple[bytes, ...]:
    out = [fake_stream(proto, s) for s in SCENARIOS]
    try:
        from corpus_loader import samples

        real = [s.body for s in samples(proto.value, stream=True, ok=True) if len(s.body) < 40_000]
    except Exception:  # noqa: BLE001 - the corpus is optional for the fuzz targets
        real = []
    out += real[:6]
    return tuple(out)


def request_for(client: Protocol) -> Request:
    return Request(model="m", messages=[Message(role="user")], stream=True, include_usage=True)


def make_translator(upstream: Protocol, client: Protocol, strict: bool = False) -> StreamTranslator:
    ctx = Context(request=request_for(client), strict=strict)
    return StreamTranslator(get_codec(upstream).stream_decoder(ctx), get_codec(client).stream_encoder(ctx))


class _FakeUUID:
    def __init__(self, n: int) -> None:
        self.hex = f"{n:032x}"


@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    """Frozen clock and counter-based ids inside the encoders (restarted per ``with``)."""
    counter = itertools.count(1)
    with (
        mock.patch("time.time", lambda: 1_700_000_000.0),
        mock.patch("uuid.uuid4", lambda: _FakeUUID(next(counter))),
        mock.patch("secrets.token_hex", lambda n=16: f"{next(counter):0{2 * n}x}"),
    ):
        yield


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def translate(upstream: Protocol, client: Protocol, pieces: list[bytes], strict: bool = False) -> bytes:
    """Feed ``pieces`` and close; any exception out of feed/close fails the test (it propagates), and so
    does an unexpected (non-``TranslationError``) exception the translator had to catch and log."""
    errors = _Errors()
    log = logging.getLogger("dragoman")
    log.addHandler(errors)
    try:
        with deterministic():
            t = make_translator(upstream, client, strict)
            out = bytearray()
            for p in pieces:
                out += t.feed(p)
            out += t.close()
            assert t.close() == b"", "close() is not idempotent"
    finally:
        log.removeHandler(errors)
    assert not errors.records, "unexpected exception inside the translator: " + "; ".join(
        f"{r.getMessage()} {r.exc_info[1]!r}" if r.exc_info else r.getMessage() for r in errors.records
    )
    return bytes(out)


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    cuts = sorted({c for c in cuts if 0 < c < len(data)})
    pieces, prev = [], 0
    for c in cuts:
        pieces.append(data[prev:c])
        prev = c
    pieces.append(data[prev:])
    return pieces


def check_client_stream(client: Protocol, out: bytes) -> Summary:
    """The client's bytes are a complete, valid stream or end with exactly one error (strict validators)."""
    s = VALIDATE[client](out, strict=True)
    assert s.error is not None or s.stop_reason is not None, "stream neither completed nor failed"
    return s
