"""Keepalives cross over (issue 11, item 5): an upstream SSE comment, an Anthropic ``ping`` or a Responses
``keepalive`` event becomes the client protocol's keepalive where it arrived (an Anthropic ``ping`` once
``message_start`` is out, an SSE comment before it; an SSE comment for Chat and Responses clients), and none
is ever made up. Every case runs over every chunking: the output must not change."""

from __future__ import annotations

import json
import re

import pytest

from conftest import chunkings
from conftest import run_stream
from dragoman import demo as fu
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.stream import StreamTranslator
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr
from validators.sse import parse_sse

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES
VALIDATE = {A: va.validate_stream, C: vc.validate_stream, R: vr.validate_stream}


def translate(upstream: Protocol, client: Protocol, body: bytes) -> bytes:
    outputs = []
    for _, pieces in chunkings(body):
        ctx = Context()
        tr = StreamTranslator(get_codec(upstream).stream_decoder(ctx), get_codec(client).stream_encoder(ctx))
        outputs.append(run_stream(tr, pieces))
    # the clock the encoders stamp (Chat's "created", Responses' "created_at") may tick between two runs
    assert len({_CLOCK.sub(rb"\1 0", out) for out in outputs}) == 1, "the output depends on the chunking"
    return outputs[0]


_CLOCK = re.compile(rb'("created(?:_at)?":)\s*\d+')


def with_comments(events: list[bytes], after: int, comment: bytes, n: int) -> bytes:
    return b"".join(events[:after]) + comment * n + b"".join(events[after:])


def client_keepalives(client: Protocol, out: bytes) -> list[str]:
    """The keepalives in order among the events: 'comment' or 'ping', and 'event' for anything else."""
    seq = []
    for block in out.split(b"\n\n")[:-1]:
        if block.startswith(b":"):
            assert block == b": keepalive"
            seq.append("comment")
        elif client is A and block.startswith(b"event: ping\n"):
            seq.append("ping")
        else:
            seq.append("event")
    return seq


CHAT = fu.chat_reply("text", "m", True, False).events
RESPONSES = fu.responses_reply("text", "m", True).events
ANTHROPIC = fu.anthropic_reply("text", "m", True).events


@pytest.mark.parametrize("client", [A, R])
@pytest.mark.parametrize("comment", [b": keepalive\n\n", b": OPENROUTER PROCESSING\n\n", b":\n\n", b": x\r\n\r\n"])
def test_chat_upstream_comments_mid_stream(client, comment):
    body = with_comments(CHAT, 2, comment, 3)
    out = translate(C, client, body)
    s = VALIDATE[client](out)
    assert s.error is None and s.text == fu.TEXT
    seq = client_keepalives(client, out)
    want = "ping" if client is A else "comment"
    assert seq.count(want) == 3 + (1 if client is A else 0)  # + the Anthropic framing ping after the first block
    assert "comment" not in seq or client is not A
    # they sit where the upstream sent them: before the content of the third upstream event
    plain = translate(C, client, b"".join(CHAT))
    assert len(out) - len(plain) == 3 * len(
        b": keepalive\n\n" if client is not A else b'event: ping\ndata: {"type":"ping"}\n\n'
    )


@pytest.mark.parametrize("client", [A, R])
def test_comments_before_the_first_event_are_comments(client):
    """OpenRouter queues: comments before any event. The Anthropic SDK's stream helper rejects any event before
    message_start, so an Anthropic client gets SSE comments there (and pings after)."""
    body = b": OPENROUTER PROCESSING\n\n" * 4 + b"".join(CHAT)
    out = translate(C, client, body)
    seq = client_keepalives(client, out)
    assert seq[:4] == ["comment"] * 4 and seq[4] == "event"
    assert VALIDATE[client](out).text == fu.TEXT


@pytest.mark.parametrize("client", [C, R])
def test_anthropic_pings_become_comments(client):
    pings = [i for i, e in enumerate(ANTHROPIC) if b"event: ping" in e]
    assert pings, "the fake Anthropic stream has its framing ping"
    body = with_comments(ANTHROPIC, len(ANTHROPIC) - 3, b'event: ping\ndata: {"type": "ping"}\n\n', 2)
    out = translate(A, client, body)
    assert client_keepalives(client, out).count("comment") == len(pings) + 2
    assert VALIDATE[client](out).text == fu.TEXT


@pytest.mark.parametrize("client", [A, C])
def test_responses_keepalive_events(client):
    ka = b'event: keepalive\ndata: {"type":"keepalive","sequence_number":99}\n\n'
    out = translate(R, client, with_comments(RESPONSES, 3, ka, 2))
    seq = client_keepalives(client, out)
    assert seq.count("ping" if client is A else "comment") == 2 + (1 if client is A else 0)
    assert VALIDATE[client](out).text == fu.TEXT


@pytest.mark.parametrize("upstream,client", [(C, A), (C, R), (R, A), (R, C), (A, C), (A, R)])
def test_no_keepalive_is_invented(upstream, client):
    events = {A: ANTHROPIC, C: CHAT, R: RESPONSES}[upstream]
    out = translate(upstream, client, b"".join(events))
    frames, comments = parse_sse(out)
    assert comments == sum(1 for e in events if b"event: ping" in e)  # only the Anthropic upstream's own ping
    pings = [f for f in frames if f.event == "ping"]
    assert len(pings) == (1 if client is A else 0)  # the framing ping of the real API's order
    assert json.loads(pings[0].data) == {"type": "ping"} if pings else True


def test_keepalives_after_the_end_are_drained():
    body = b"".join(CHAT) + b": keepalive\n\n" * 2
    out = translate(C, A, body)
    assert not out.endswith(b"\n\n: keepalive\n\n")
    assert client_keepalives(A, out)[-1] == "event"
