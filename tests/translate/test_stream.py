"""StreamTranslator state machine, with tiny fake codecs (no protocol code involved)."""

from __future__ import annotations

import pytest

from conftest import chunkings
from conftest import run_stream
from dragoman.errors import TranslatorStateError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import StreamError
from dragoman.ir.events import TextDelta
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamDecoder
from dragoman.protocols.base import StreamEncoder
from dragoman.protocols.registry import get_codec
from dragoman.translate.stream import PassThrough
from dragoman.translate.stream import Phase
from dragoman.translate.stream import StreamTranslator
from dragoman.translate.stream import ended_early


class FakeDecoder(StreamDecoder):
    """``data: start`` / ``data: t:<text>`` / ``data: end`` / ``data: err`` / ``data: boom`` / ``data: bad``."""

    def __init__(self) -> None:
        self.done = False
        self.started = False

    def feed(self, ev):
        d = ev.data
        if d == "start":
            self.started = True
            return [MessageStart(id="m", model="x"), BlockStart(0, BlockKind.TEXT)]
        if d.startswith("t:"):
            return [TextDelta(0, d[2:])]
        if d == "end":
            self.done = True
            return [BlockStop(0), MessageDelta(StopReason.END_TURN), MessageStop()]
        if d == "err":
            return [TextDelta(0, "partial"), StreamError(ErrorInfo(ErrorKind.OVERLOADED, "Overloaded", status=529))]
        if d == "boom":
            raise ValueError("kaput")
        raise UpstreamProtocolError(f"can't handle {d!r} in phase STREAMING")

    def close(self):
        if not self.done:
            raise ended_early("STREAMING" if self.started else "WAITING")
        return []


class FakeEncoder(StreamEncoder):
    def __init__(self) -> None:
        self.errors: list[ErrorInfo] = []
        self.closed = 0

    def encode(self, ev) -> bytes:
        if isinstance(ev, TextDelta):
            return f"T({ev.text})".encode()
        return f"{type(ev).__name__};".encode()

    def error(self, err: ErrorInfo) -> bytes:
        self.errors.append(err)
        return f"ERROR[{err.kind.value}:{err.http_status}:{err.message}]".encode()

    def close(self) -> bytes:
        self.closed += 1
        return b"CLOSE"


def make():
    enc = FakeEncoder()
    return StreamTranslator(FakeDecoder(), enc), enc


GOOD = "data: start\n\ndata: t:héllo\n\ndata: t:€\n\ndata: end\n\n".encode()
GOOD_OUT = "MessageStart;BlockStart;T(héllo)T(€)BlockStop;MessageDelta;MessageStop;CLOSE".encode()


@pytest.mark.parametrize("label,pieces", chunkings(GOOD))
def test_good_stream_every_chunking(label, pieces):
    tr, enc = make()
    assert run_stream(tr, pieces) == GOOD_OUT
    assert tr.phase is Phase.CLOSED and enc.errors == [] and tr.events_in == 4


def test_phases():
    tr, _ = make()
    assert tr.phase is Phase.WAITING
    tr.feed(b"data: start\n\n")
    assert tr.phase is Phase.STREAMING
    tr.feed(b"data: end\n\n")
    assert tr.phase is Phase.DONE
    tr.close()
    assert tr.phase is Phase.CLOSED


def test_empty_feed_is_noop():
    tr, _ = make()
    assert tr.feed(b"") == b"" and tr.phase is Phase.WAITING


def test_inband_error_one_frame_then_drain():
    tr, enc = make()
    out = tr.feed(b"data: start\n\ndata: err\n\ndata: t:after\n\n")
    assert out == b"MessageStart;BlockStart;T(partial)ERROR[overloaded:529:Overloaded]"
    assert tr.phase is Phase.ERROR and tr.error_info.message == "Overloaded"
    assert tr.feed(b"data: t:more\n\ndata: end\n\n") == b""  # drained
    assert tr.close() == b"" and tr.phase is Phase.CLOSED
    assert len(enc.errors) == 1 and enc.closed == 0


def test_protocol_violation_becomes_error_frame():
    tr, enc = make()
    out = tr.feed(b"data: start\n\ndata: ???\n\n")
    assert out.startswith(b"MessageStart;BlockStart;ERROR[upstream_protocol:502:can't handle")
    assert tr.phase is Phase.ERROR and len(enc.errors) == 1


def test_unexpected_exception_becomes_error_frame(caplog):
    tr, enc = make()
    out = tr.feed(b"data: boom\n\n")
    assert out == b"ERROR[api_error:500:Dragoman failed to translate the upstream stream: ValueError: kaput]"
    assert tr.phase is Phase.ERROR
    assert "unexpected error" in caplog.text


def test_ended_early_on_close():
    tr, enc = make()
    tr.feed(b"data: start\n\ndata: t:x\n\n")
    out = tr.close()
    assert out.startswith(
        b"ERROR[upstream_protocol:502:upstream stream ended before its terminal event (in phase STREAMING)"
    )
    assert tr.phase is Phase.CLOSED and enc.closed == 0 and len(enc.errors) == 1


def test_close_flushes_unterminated_event():
    tr, _ = make()
    assert tr.feed(b"data: start\n\ndata: end") == b"MessageStart;BlockStart;"
    assert tr.close() == b"BlockStop;MessageDelta;MessageStop;CLOSE"


def test_error_in_unterminated_last_event():
    tr, enc = make()
    tr.feed(b"data: start\n\ndata: err")
    assert tr.close() == b"T(partial)ERROR[overloaded:529:Overloaded]"
    assert tr.phase is Phase.CLOSED and len(enc.errors) == 1


def test_close_idempotent_and_feed_after_close_raises():
    tr, enc = make()
    tr.feed(GOOD)
    assert tr.close() == b"CLOSE"
    assert tr.close() == b""
    assert enc.closed == 1
    with pytest.raises(TranslatorStateError):
        tr.feed(b"data: t:x\n\n")


def test_feed_after_close_raises_even_after_error():
    tr, _ = make()
    tr.feed(b"data: boom\n\n")
    tr.close()
    with pytest.raises(TranslatorStateError):
        tr.feed(b"x")


def test_fail_external_fault():
    tr, enc = make()
    tr.feed(b"data: start\n\n")
    out = tr.fail(ErrorInfo(ErrorKind.TIMEOUT, "idle timeout"))
    assert out == b"ERROR[timeout:504:idle timeout]" and tr.phase is Phase.CLOSED
    assert tr.fail(ErrorInfo(ErrorKind.TIMEOUT, "again")) == b""
    assert len(enc.errors) == 1


def test_fail_after_error_sends_nothing():
    tr, enc = make()
    tr.feed(b"data: err\n\n")
    assert tr.fail(ErrorInfo(ErrorKind.TIMEOUT, "x")) == b""
    assert len(enc.errors) == 1


def test_encoder_failing_on_error_frame_is_swallowed(caplog):
    class BadEncoder(FakeEncoder):
        def error(self, err):
            raise RuntimeError("cannot frame")

    tr = StreamTranslator(FakeDecoder(), BadEncoder())
    assert tr.feed(b"data: boom\n\n") == b""
    assert tr.phase is Phase.ERROR
    assert "failed to encode an error frame" in caplog.text


def test_encoder_exception_in_close():
    class BadClose(FakeEncoder):
        def close(self):
            raise UpstreamProtocolError("cannot close")

    enc = BadClose()
    tr = StreamTranslator(FakeDecoder(), enc)
    tr.feed(GOOD)
    assert tr.close() == b"ERROR[upstream_protocol:502:cannot close]"
    assert tr.phase is Phase.CLOSED


def test_passthrough():
    p = PassThrough()
    assert p.feed(b"abc") == b"abc"
    assert p.fail(ErrorInfo(ErrorKind.API_ERROR, "x")) == b""
    assert p.close() == b"" and p.phase is Phase.CLOSED


# -- usage: what the upstream's events reported, kept by the translator (the usage ledger reads it)

CHAT_USAGE = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"content":" there"},"finish_reason":"stop"}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,'
    b'"prompt_tokens_details":{"cached_tokens":4}}}\n\n'
    b"data: [DONE]\n\n"
)
ANTHROPIC_USAGE = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant",'
    b'"model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":11,"cache_read_input_tokens":4,'
    b'"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text",'
    b'"text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
    b'"text":"hi"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
    b'"usage":{"output_tokens":7}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


@pytest.mark.parametrize(
    "upstream, client, body, input_tokens",
    [
        ("openai-chat", "anthropic", CHAT_USAGE, 11),
        # the IR's input count holds the cached tokens; Anthropic's ``input_tokens`` does not (11 + 4)
        ("anthropic", "openai-chat", ANTHROPIC_USAGE, 15),
        ("anthropic", "openai-responses", ANTHROPIC_USAGE, 15),
    ],
)
def test_the_translator_keeps_the_upstreams_usage_every_chunking(upstream, client, body, input_tokens):
    for _label, pieces in chunkings(body, seeds=3):
        ctx = Context()
        t = StreamTranslator(
            get_codec(Protocol(upstream)).stream_decoder(ctx), get_codec(Protocol(client)).stream_encoder(ctx)
        )
        assert t.usage is None
        run_stream(t, pieces)
        assert t.usage == Usage(input_tokens=input_tokens, output_tokens=7, cache_read_tokens=4)


class UsageDecoder(FakeDecoder):
    """``data: u:<n>``: a lone ``MessageDelta`` with ``n`` output tokens, mid-stream (the hot path's shape)."""

    def feed(self, ev):
        if ev.data.startswith("u:"):
            return [MessageDelta(None, Usage(output_tokens=int(ev.data[2:])))]
        return super().feed(ev)


def test_a_lone_usage_event_mid_stream_is_kept():
    t = StreamTranslator(UsageDecoder(), FakeEncoder())
    out = run_stream(t, [b"data: start\n\n", b"data: t:a\n\n", b"data: u:3\n\n", b"data: u:5\n\n", b"data: end\n\n"])
    assert out.count(b"MessageDelta;") == 3
    assert t.usage == Usage(output_tokens=5)
