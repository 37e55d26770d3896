"""The stream translator's shortcut (``StreamDecoder.shortcut`` -> ``StreamEncoder.literal``) changes nothing.

A delta frame the decoder learnt goes to the client as bytes without a parse; every stream here is translated
twice, with the shortcut and with it off, over one frame per chunk (what upstreams send, where the shortcut
runs) and every other chunking, and must give the same bytes; the shortcut must actually have run where it
can (counted), so a shortcut that never fires cannot pass for one that works.
"""

from __future__ import annotations

import json
import random
import time

import orjson
import pytest

from conftest import chunkings
from conftest import frames
from conftest import run_stream
from corpus_loader import samples
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.plan import Plan
from dragoman.translate.request import translate_request
from dragoman.translate.stream import StreamTranslator

CLIENTS = (Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES, Protocol.GEMINI)
_REQUESTS = {
    Protocol.ANTHROPIC_MESSAGES: {
        "model": "m",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    },
    Protocol.OPENAI_CHAT: {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    Protocol.OPENAI_RESPONSES: {"model": "m", "stream": True, "input": "hi"},
    Protocol.GEMINI: {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
}


@pytest.fixture(autouse=True)
def _one_clock(monkeypatch):
    """The two runs compared are apart in time: the ``created`` a client encoder stamps must not differ."""
    monkeypatch.setattr(time, "time", lambda: 1_790_000_000.0)


def _translator(
    client: Protocol, upstream: Protocol, short: bool, repeat: bool = True
) -> tuple[StreamTranslator, list[int]]:
    ctx = Context()
    plan = Plan(client, upstream)
    translate_request(orjson.dumps(_REQUESTS[client]), plan, ctx)
    tr = StreamTranslator(get_codec(upstream).stream_decoder(ctx), get_codec(client).stream_encoder(ctx), 8 << 20)
    hits = [0]
    if not repeat:
        tr.repeats = False
    if not short:
        tr._short = None
    else:
        literal = tr._literal

        def counted(kind, index, tok):
            out = literal(kind, index, tok)
            hits[0] += out is not None
            return out

        tr._literal = counted
    return tr, hits


def _both(client: Protocol, upstream: Protocol, pieces: list[bytes]) -> tuple[bytes, bytes, int]:
    """The stream with the shortcut and its repeat, with the shortcut alone, with neither: the same bytes (the
    first two compared here) -> (with both, with neither, the frames taken without a parse: by ``literal``
    or as a repeat)."""
    on, hits = _translator(client, upstream, True)
    alone, alone_hits = _translator(client, upstream, True, repeat=False)
    off, _ = _translator(client, upstream, False)
    got, without = run_stream(on, pieces), run_stream(alone, pieces)
    assert got == without  # the repeat changes nothing
    assert hits[0] + on.repeated == alone_hits[0]  # it takes exactly the frames the shortcut takes
    return got, run_stream(off, pieces), hits[0] + on.repeated


def _chat_frame(delta: dict | bytes, pad: str | None = "Qk", finish=None) -> bytes:
    d = delta if isinstance(delta, bytes) else orjson.dumps(delta)
    obj = (
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":'
        + d
        + b',"logprobs":null,"finish_reason":'
        + orjson.dumps(finish)
        + b"}]"
        + (b',"obfuscation":' + orjson.dumps(pad) if pad is not None else b"")
        + b"}"
    )
    return b"data: " + obj + b"\n\n"


def _chat_stream(texts: list[bytes], thinking: list[bytes] = (), pad: bool = True) -> bytes:
    """A DeepSeek/OpenAI-shaped Chat stream whose deltas carry the given JSON string tokens as they are."""
    rng = random.Random(len(texts))

    def p() -> str | None:
        return "".join(rng.choice("abcXYZ019") for _ in range(rng.randint(0, 9))) if pad else None

    out = [_chat_frame({"role": "assistant", "content": None, "reasoning_content": ""}, p())]
    out += [_chat_frame(b'{"content":null,"reasoning_content":' + t + b"}", p()) for t in thinking]
    out += [_chat_frame(b'{"content":' + t + b"}", p()) for t in texts]
    out.append(_chat_frame({}, p(), finish="stop"))
    out.append(
        b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
        b'"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}\n\n'
    )
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def _tokens(rng: random.Random, n: int) -> list[bytes]:
    alphabet = ['"', "\\", "\n", "/", "\u00e9", "\U0001f600", "\u2028", "\x01", "a", "b", " ", "}", "],"]
    out = []
    for _ in range(n):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        out.append(
            rng.choice(
                (orjson.dumps, lambda t: json.dumps(t).encode(), lambda t: json.dumps(t, ensure_ascii=False).encode())
            )(text)
        )
    return out


@pytest.mark.parametrize("client", CLIENTS, ids=lambda p: p.value)
def test_a_deepseek_shaped_stream_is_the_same_with_the_shortcut(client):
    rng = random.Random(1)
    data = _chat_stream(_tokens(rng, 300), _tokens(rng, 200))
    for name, pieces in [("frames", frames(data)), *chunkings(data, seeds=3)]:
        on, off, hits = _both(client, Protocol.OPENAI_CHAT, pieces)
        assert on == off, name
        if name == "frames" and (client, Protocol.OPENAI_CHAT) in SHORTCUT_PAIRS:
            assert hits >= 450, hits  # all but the first delta of each block and the one learnt from


def test_frames_without_padding_and_with_a_new_padding_member():
    rng = random.Random(2)
    for data in (_chat_stream(_tokens(rng, 50), pad=False), _chat_stream(_tokens(rng, 50), pad=True)):
        on, off, hits = _both(Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, frames(data))
        assert on == off
        assert hits >= 45


def _tool_stream(
    rng: random.Random, n: int, parallel: bool, valid: bool = True, spellings: tuple | None = None
) -> bytes:
    """Text, then one or two calls (interleaved, as OpenAI streams parallel calls) whose arguments come in
    ``n`` fragments written with every escaping (``spellings``: these only); ``valid``: they join to a JSON
    object (else random text)."""

    def call(i: int, name: str | None, args: bytes) -> bytes:
        head = b'{"index":%d,' % i + (b'"id":"call_%d","type":"function",' % i if name else b"")
        fn = (b'{"name":"' + name.encode() + b'","arguments":' if name else b'{"arguments":') + args + b"}"
        return _chat_frame(b'{"tool_calls":[' + head + b'"function":' + fn + b"}]}", f"pad{rng.randint(0, 99)}")

    calls = [0, 1] if parallel else [0]
    pieces: dict[int, list[str]] = {}
    for i in calls:
        whole = orjson.dumps({"path": '/tmp/\u00e9 "q" \\ \n\u2028 \U0001f600', "n": i}).decode() * (1 if valid else 2)
        cuts = sorted(rng.sample(range(1, len(whole)), min(n - 1, len(whole) - 1)))
        pieces[i] = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)])]
    out = [_chat_frame({"role": "assistant", "content": ""}), _chat_frame({"content": "Let me look."})]
    out += [call(i, f"tool_{i}", b'""') for i in calls]
    while any(pieces.values()):
        i = rng.choice([c for c in calls if pieces[c]])
        piece = pieces[i].pop(0)
        enc = rng.choice(
            spellings
            or (orjson.dumps, lambda t: json.dumps(t).encode(), lambda t: json.dumps(t, ensure_ascii=False).encode())
        )
        out.append(call(i, None, enc(piece)))
    out.append(_chat_frame({}, "p", finish="tool_calls"))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


@pytest.mark.parametrize("valid", [True, False], ids=["json", "not-json"])
@pytest.mark.parametrize("parallel", [False, True], ids=["one-call", "parallel"])
@pytest.mark.parametrize("client", CLIENTS, ids=lambda p: p.value)
def test_tool_argument_deltas_are_the_same_with_the_shortcut(client, parallel, valid):
    rng = random.Random(3)
    data = _tool_stream(rng, 40, parallel, valid)
    for name, pieces in [("frames", frames(data)), *chunkings(data, seeds=2)]:
        on, off, hits = _both(client, Protocol.OPENAI_CHAT, pieces)
        assert on == off, name
        assert (b"not a JSON object" in on) is not valid, name  # joined fragments checked as the usual way joins them
        if name == "frames" and client is Protocol.ANTHROPIC_MESSAGES:
            # every argument delta but the one each call is learnt from (and a few relearnt after a token in
            # another spelling); the second of two parallel calls is held by the encoder (Anthropic streams one
            # block at a time) and written when the first ends, the same bytes
            assert hits >= (68 if parallel else 34), hits
            if valid:
                got = b"".join(
                    orjson.loads(f[f.index(b"data: ") + 6 :])["delta"]["partial_json"].encode()
                    for f in frames(on)
                    if b"input_json_delta" in f
                )
                assert orjson.loads(b"[" + got.replace(b"}{", b"},{") + b"]") == [
                    {"path": '/tmp/\u00e9 "q" \\ \n\u2028 \U0001f600', "n": i} for i in ([0, 1] if parallel else [0])
                ]


@pytest.mark.parametrize(
    "bad",
    [b'"a\x01b"', b'"\xff\xfe"', b'"\\ud800"', b'"a"b"', b"123", b'"\\q"'],
    ids=["control", "utf8", "surrogate", "quote", "number", "escape"],
)
def test_a_broken_delta_after_learnt_ones_fails_as_without_the_shortcut(bad):
    data = _chat_stream([b'"one"', b'"two"', b'"three"', bad, b'"after"'])
    on, off, hits = _both(Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, frames(data))
    assert on == off
    assert hits >= 1  # "three" (the first opens the block, "two" is learnt)


def test_a_frame_that_differs_elsewhere_takes_the_usual_way():
    data = _chat_stream([b'"one"', b'"two"', b'"three"', b'"four"'])
    # the fourth delta carries a finish_reason and usage: same text slot, different frame
    odd = _chat_frame({"content": "four"}, "Qk", finish="length").replace(
        b'"obfuscation"', b'"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3},"obfuscation"'
    )
    data = data.replace(frames(data)[4], odd)
    on, off, hits = _both(Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, frames(data))
    assert on == off
    assert b'"stop_reason":"max_tokens"' in on


@pytest.mark.parametrize("s", samples("openai-chat", stream=True), ids=repr)
@pytest.mark.parametrize("client", CLIENTS, ids=lambda p: p.value)
def test_corpus_chat_streams_are_the_same_with_the_shortcut(s, client):
    for name, pieces in [("frames", frames(s.body)), ("whole", [s.body])]:
        on, off, _ = _both(client, Protocol.OPENAI_CHAT, pieces)
        assert on == off, name


@pytest.mark.parametrize(
    ("name", "least"),
    [("deepseek-reasoning-content", 190), ("openrouter-reasoning", 90), ("plain-text-usage", 290)],
)
def test_the_shortcut_fires_on_real_streams(name, least):
    """DeepSeek's, OpenRouter's and OpenAI's (with its padding) deltas: all but a few frames per block."""
    s = next(x for x in samples("openai-chat", stream=True) if name in x.name)
    on, off, hits = _both(Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, frames(s.body))
    assert on == off
    assert hits >= least, hits


@pytest.mark.parametrize(
    ("name", "least"), [("deepseek-reasoning-content", 190), ("openrouter-reasoning", 90), ("plain-text-usage", 290)]
)
@pytest.mark.parametrize("client", [Protocol.OPENAI_RESPONSES, Protocol.GEMINI], ids=lambda p: p.value)
def test_the_responses_and_gemini_clients_write_real_chat_deltas_from_the_token(name, client, least):
    s = next(x for x in samples("openai-chat", stream=True) if name in x.name)
    on, off, hits = _both(client, Protocol.OPENAI_CHAT, frames(s.body))
    assert on == off
    assert hits >= least, hits


#: (client, upstream) pairs whose decoder learns frames and whose encoder writes from a token
SHORTCUT_PAIRS = {
    (Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT),
    (Protocol.OPENAI_RESPONSES, Protocol.OPENAI_CHAT),
    (Protocol.OPENAI_CHAT, Protocol.ANTHROPIC_MESSAGES),
    (Protocol.OPENAI_RESPONSES, Protocol.ANTHROPIC_MESSAGES),
    (Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_RESPONSES),
    (Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES),
    (Protocol.GEMINI, Protocol.OPENAI_CHAT),
    (Protocol.GEMINI, Protocol.ANTHROPIC_MESSAGES),
    (Protocol.GEMINI, Protocol.OPENAI_RESPONSES),
}


def test_only_pairs_that_both_have_it_take_it():
    for client in CLIENTS:
        for upstream in CLIENTS:
            if client is not upstream:
                tr, _ = _translator(client, upstream, True)
                assert (tr._short is not None) == ((client, upstream) in SHORTCUT_PAIRS), (client, upstream)


@pytest.mark.parametrize(
    ("upstream", "name", "least"),
    [
        (Protocol.OPENAI_CHAT, "deepseek-reasoning-content", 185),
        (Protocol.OPENAI_CHAT, "openrouter-reasoning", 85),
        (Protocol.OPENAI_CHAT, "plain-text-usage", 285),
        (Protocol.ANTHROPIC_MESSAGES, "thinking-signature", 100),
        (Protocol.GEMINI, "google-reasoning-gemini3", 0),
    ],
)
@pytest.mark.parametrize("client", CLIENTS, ids=lambda p: p.value)
def test_the_repeat_runs_where_both_sides_allow_it_and_only_there(client, upstream, name, least):
    """Real text and thinking deltas: after the shortcut took the same one twice, the same delta again is
    written as its token between the client's pieces, or by the client encoder's writer (no decoder, no
    ``literal``), the same bytes. Every pair with a shortcut repeats (each decoder names what it does per
    delta, each encoder writes it); a Gemini upstream, which has no shortcut, never does."""
    if client is upstream:
        return
    s = next(x for x in samples(upstream.value, stream=True) if name in x.name)
    on, _ = _translator(client, upstream, True)
    got = run_stream(on, frames(s.body))
    off, _ = _translator(client, upstream, False)
    assert got == run_stream(off, frames(s.body))
    if (client, upstream) in SHORTCUT_PAIRS:
        assert on.repeated >= least, on.repeated
    else:
        assert upstream is Protocol.GEMINI and on.repeated == 0


@pytest.mark.parametrize("client", CLIENTS, ids=lambda p: p.value)
def test_anything_between_repeated_deltas_ends_the_repeat(client):
    """A keepalive (Chat) or a ping (Anthropic) inside a run of repeated deltas, a broken delta after it
    (Chat): each other frame goes the usual way (which may change what the repeat assumed), the repeat
    starts again after the next shortcut; every chunking gives the bytes of the translator without the
    shortcut, and of the shortcut without the repeat (``_both``)."""
    upstream = Protocol.OPENAI_CHAT if client is Protocol.ANTHROPIC_MESSAGES else Protocol.ANTHROPIC_MESSAGES
    rng = random.Random(7)
    if upstream is Protocol.OPENAI_CHAT:
        texts = _tokens(rng, 40)
        data = _chat_stream(texts[:20], _tokens(rng, 20))
        # a keepalive and a malformed delta inside the text run, then more text
        frames_ = frames(data)
        at = len(frames_) // 2
        data = b"".join(
            [*frames_[:at], b": keepalive\n\n", frames_[at], b'data: {"choices": "no"}\n\n', *frames_[at + 1 :]]
        )
    else:
        s = next(x for x in samples("anthropic", stream=True) if "thinking-signature" in x.name)
        frames_ = frames(s.body)
        at = len(frames_) // 2
        data = b"".join([*frames_[:at], b"event: ping\ndata: {}\n\n", *frames_[at:]])
    for name, pieces in [("frames", frames(data)), *chunkings(data, seeds=3)]:
        on, off, _ = _both(client, upstream, pieces)
        assert on == off, name


@pytest.mark.parametrize("valid", [True, False], ids=["json", "not-json"])
@pytest.mark.parametrize("parallel", [False, True], ids=["one-call", "parallel"])
def test_a_calls_arguments_are_repeated_and_still_checked(parallel, valid):
    """A Chat call's argument fragments as orjson writes them: after two taken by the shortcut, the rest of
    a run are repeats that still keep each fragment for the end check (arguments that join to no JSON
    object end the stream with the error, as without the shortcut); parallel calls whose fragments
    alternate make no runs (each frame would end the other's repeat): the shortcut takes them."""
    data = _tool_stream(random.Random(4), 60, parallel, valid, spellings=(orjson.dumps,))
    on, _ = _translator(Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, True)
    got = run_stream(on, frames(data))
    off, _ = _translator(Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, False)
    assert got == run_stream(off, frames(data))
    assert (b"not a JSON object" in got) is not valid
    fragments = sum(1 for f in frames(data) if b'{"arguments":' in f)
    if parallel:
        assert on.repeated < fragments // 2, on.repeated  # only where the random order gives a run of one call
    else:
        assert on.repeated >= fragments - 3, (on.repeated, fragments)  # the first two go the shortcut's way


@pytest.mark.parametrize("client", [c for c in CLIENTS if c is not Protocol.OPENAI_RESPONSES], ids=lambda p: p.value)
def test_a_responses_upstream_repeats_and_still_counts(client):
    """Its decoder counts each delta's characters for the ``.done`` event (and keeps a call's fragments):
    what its repeat does per frame. Were a repeated delta not counted, the ``.done`` text would be sent
    again (the part no delta carried); a ``.done`` one character longer sends just that character."""
    s = next(x for x in samples("openai-responses", stream=True) if len(x.body) > 20_000)
    on, hits = _translator(client, Protocol.OPENAI_RESPONSES, True)
    got = run_stream(on, frames(s.body))
    off, _ = _translator(client, Protocol.OPENAI_RESPONSES, False)
    assert got == run_stream(off, frames(s.body))
    assert on.repeated > 20, (on.repeated, hits[0])
    done = [i for i, f in enumerate(frames(s.body)) if b"output_text.done" in f]
    assert done
    broken = frames(s.body)
    broken[done[0]] = broken[done[0]].replace(b'"text":"', b'"text":"X', 1)
    on, _ = _translator(client, Protocol.OPENAI_RESPONSES, True)
    got = run_stream(on, broken)
    off, _ = _translator(client, Protocol.OPENAI_RESPONSES, False)
    assert got == run_stream(off, broken) and on.repeated > 20
    clean, _ = _translator(client, Protocol.OPENAI_RESPONSES, True)
    assert got != run_stream(clean, frames(s.body))  # the character only the broken ``.done`` carries
