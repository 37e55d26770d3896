"""``StreamEncoder.literal``: a delta written from its JSON string token is what ``encode`` writes for it.

Two encoders of one client protocol take the same IR events; at every delta one is asked ``literal`` first
(``encode`` only when it gives None, as the translator does) and the other ``encode``: their bytes, and what
they write after (the ``.done`` events and the whole response, built from the text they kept), must be the
same, in every state a delta can meet (a held item, a stopped block, an unknown block, a thinking block's
first delta, search counting characters). Each encoder must answer from the token for the plain deltas.
"""

from __future__ import annotations

import json
import random

import orjson
import pytest

from dragoman.errors import TranslationError
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import CitationDelta
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import StreamEvent
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.search import SEARCH_NATIVE
from dragoman.ir.search import Citation
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec

ENCODERS = (Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES, Protocol.GEMINI)
_ALPHABET = ['"', "\\", "\n", "/", "\u00e9", "\U0001f600", "\u2028", "\x01", "a", " ", "}", "],"]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 8)))


def _events(rng: random.Random) -> list[StreamEvent]:
    """Thinking, then text with a tool call started while it is open (a Responses client holds the call),
    deltas after a block stopped and for a block never started, then the end."""
    evs: list[StreamEvent] = [MessageStart(id="msg_1", model="m", usage=Usage(input_tokens=3))]
    evs.append(BlockStart(0, BlockKind.THINKING))
    evs += [ThinkingDelta(0, _text(rng)) for _ in range(20)]
    evs.append(BlockStop(0))
    evs.append(BlockStart(1, BlockKind.TEXT))
    evs += [TextDelta(1, _text(rng)) for _ in range(20)]
    evs.append(BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="call_1", name="get"))
    for _ in range(10):
        evs.append(ToolArgsDelta(2, _text(rng)))
        evs.append(TextDelta(1, _text(rng)))
    evs.append(BlockStop(1))
    evs += [ToolArgsDelta(2, _text(rng)) for _ in range(10)]
    evs.append(BlockStop(2))
    evs.append(BlockStart(3, BlockKind.TEXT))
    evs += [TextDelta(3, _text(rng)) for _ in range(10)]
    # a citation of the block's text: placed by what the encoder kept (Chat's characters, Gemini's bytes)
    evs.append(CitationDelta(3, Citation(url="https://x.example/", title="X", start=2, end=9, cited_text="c")))
    evs.append(BlockStop(3))
    evs.append(MessageDelta(stop_reason=StopReason.TOOL_USE, usage=Usage(output_tokens=9)))
    evs.append(MessageStop())
    return evs


def _delta_text(ev: StreamEvent) -> str | None:
    t = type(ev)
    if t is TextDelta or t is ThinkingDelta:
        return ev.text  # type: ignore[union-attr]
    if t is ToolArgsDelta:
        return ev.fragment  # type: ignore[union-attr]
    return None


def _ctx(search: bool) -> Context:
    ctx = Context()
    if search:
        ctx.search = SEARCH_NATIVE
    return ctx


def _run(client: Protocol, evs: list[StreamEvent], search: bool = False) -> tuple[int, int]:
    """Both encoders over ``evs``: (deltas ``literal`` wrote, deltas in all)."""
    codec = get_codec(client)
    a, b = codec.stream_encoder(_ctx(search)), codec.stream_encoder(_ctx(search))
    rng = random.Random(len(evs))
    hits = deltas = 0
    for ev in evs:
        text = _delta_text(ev)
        got = want = None
        if text is not None:
            deltas += 1
            spell = rng.choice((orjson.dumps, lambda t: json.dumps(t).encode()))(text)
            tok = orjson.dumps(orjson.loads(spell))  # what ``Shape.match`` gives: orjson's spelling
            index = ev.index  # type: ignore[attr-defined]
            got = a.literal(type(ev), index, tok)
            hits += got is not None
        try:
            if got is None:
                got = a.encode(ev)
        except TranslationError as e:
            got = repr(e).encode()
        try:
            want = b.encode(ev)
        except TranslationError as e:
            want = repr(e).encode()
        assert got == want, ev
    assert a.close() == b.close()
    assert getattr(a, "snapshot", None) == getattr(b, "snapshot", None)
    return hits, deltas


@pytest.mark.parametrize("client", ENCODERS, ids=lambda p: p.value)
@pytest.mark.parametrize("seed", range(4))
def test_literal_writes_what_encode_writes(client, seed):
    hits, deltas = _run(client, _events(random.Random(seed)))
    assert deltas == 80
    assert hits >= _LEAST[client], hits


#: of the 80 deltas, those written (or held) from the token: all but a thinking block's first (Chat builds
#: its tail there), an item's first live one (Responses builds its framing there), Anthropic's first held one,
#: Gemini's argument deltas (it sends a call whole, at its stop)
_LEAST = {Protocol.ANTHROPIC_MESSAGES: 79, Protocol.OPENAI_CHAT: 79, Protocol.OPENAI_RESPONSES: 77, Protocol.GEMINI: 60}


@pytest.mark.parametrize("client", ENCODERS, ids=lambda p: p.value)
def test_deltas_no_block_takes_are_left_to_encode(client):
    rng = random.Random(9)
    evs = _events(rng)
    end = len(evs) - 2
    strays = [TextDelta(7, "x"), ThinkingDelta(1, "y"), ToolArgsDelta(1, "z"), TextDelta(0, "after its stop")]
    for s in strays:  # each stray ends the stream with an error (the same from both), then nothing more
        _run(client, [*evs[:end], s])
        _run(client, [*evs[:20], s])


def test_chat_counting_characters_for_citations_takes_encode():
    hits, deltas = _run(Protocol.OPENAI_CHAT, _events(random.Random(3)), search=True)
    assert (hits, deltas) == (39, 80)  # the thinking (but its first) and argument deltas: text needs its length
