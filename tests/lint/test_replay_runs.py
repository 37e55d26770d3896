"""The live lint's run path (``Template.run``, ``StreamLint.feed_chunks``, ``FlowLint.feed``): a run of alike
deltas is taken whole-list at a time, so it must give exactly the full check's verdict: over one chunk per
event (the translator's output), over any random split and byte by byte, for a single byte changed anywhere in
a long run (mutation test against the full check alone), across a counter's digit boundaries, and for two
calls whose deltas interleave (a key slot)."""

from __future__ import annotations

import random

import orjson
import pytest
from test_replay import _anthropic
from test_replay import _chat_tools
from test_replay import _responses
from test_replay import _responses_interleaved

from conftest import chunkings
from dragoman.lint import replay
from dragoman.lint.flow import FlowLint
from dragoman.lint.live import StreamLint


def _obfuscated_chat(n: int = 80) -> list[bytes]:
    """A Chat upstream like OpenAI's: every chunk padded with a random ``obfuscation`` (two string slots)."""
    rng = random.Random(7)
    base = {"id": "chatcmpl-0123456789abc", "object": "chat.completion.chunk", "created": 1754693439, "model": "m"}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        pad = "".join(rng.choice("abcdefXYZ019") for _ in range(rng.randint(1, 12)))
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + orjson.dumps({**base, "choices": [choice], "usage": None, "obfuscation": pad}) + b"\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": f"w{i} é\n"}) for i in range(n)]
    return [*out, chunk({}, "stop"), b"data: [DONE]\n\n"]


#: name -> (protocol, strict, events)
STREAMS = {
    "anthropic": ("anthropic", True, _anthropic(120)),
    "chat-tools": ("chat", True, _chat_tools(60)),
    "responses": ("responses", True, _responses(120)),
    "responses-interleaved": ("responses", False, _responses_interleaved(40)),
    "chat-obfuscated": ("chat", False, _obfuscated_chat(80)),
}


def _verdict(protocol: str, strict: bool, pieces: list[bytes], chunked: bool = False):
    lint = StreamLint(protocol, strict=strict)
    if chunked:
        found = [lint.feed_chunks(pieces), lint.close()]
    else:
        found = [*(lint.feed(p) for p in pieces), lint.close()]
    found = [v for v in found if v is not None]
    assert len(found) <= 1, found
    return (found[0].index, found[0].message) if found else None


def _full_only(protocol: str, strict: bool, pieces: list[bytes], monkeypatch, chunked: bool = False):
    """The verdict of the full check alone (no template is ever learnt), over the same pieces."""
    with monkeypatch.context() as m:
        m.setattr("dragoman.lint.live.learn", lambda raw, hot: None)
        return _verdict(protocol, strict, pieces, chunked)


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_a_good_stream_is_taken_in_runs_over_chunks_splits_and_bytes(name, monkeypatch):
    protocol, strict, events = STREAMS[name]
    data = b"".join(events)
    calls: list[int] = []
    run = replay.Template.run
    monkeypatch.setattr(replay.Template, "run", lambda self, *a: calls.append(run(self, *a)) or calls[-1])
    assert _verdict(protocol, strict, events, chunked=True) is None
    assert sum(calls) > len(events) * 3 // 4, (sum(calls), len(events))  # most frames went by runs
    assert max(calls) > 20  # long runs, not frame by frame
    for label, pieces in chunkings(data, seeds=3):
        assert _verdict(protocol, strict, pieces) is None, label
        assert _verdict(protocol, strict, pieces, chunked=True) is None, label


def _mutants(events: list[bytes], seed: int, count: int) -> list[tuple[int, bytes]]:
    """(position of the changed event, the stream) with one byte of one event in the middle third changed."""
    rng = random.Random(seed)
    lo, hi = len(events) // 3, 2 * len(events) // 3
    out = []
    for _ in range(count):
        k = rng.randrange(lo, hi)
        ev = bytearray(events[k])
        i = rng.randrange(len(ev) - 2)  # not the blank line
        ev[i] = rng.choice(b'"\\{}[],:0123456789aez \xc3\xa9\x00\n\r') if rng.random() < 0.7 else rng.randrange(256)
        out.append((k, b"".join([*events[:k], bytes(ev), *events[k + 1 :]])))
    return out


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_a_byte_changed_in_a_run_gets_the_full_checks_verdict(name, monkeypatch):
    """Mutation test: whatever single byte changes inside a long run of deltas, the run path flags it at the
    same event with the same message as the full check alone, or accepts it exactly when the full check does
    (a change inside a string that stays a valid string)."""
    protocol, strict, events = STREAMS[name]
    flagged = 0
    for k, data in _mutants(events, seed=len(name), count=120):
        want = _full_only(protocol, strict, [data], monkeypatch)
        assert _verdict(protocol, strict, [data]) == want, k
        frames = data.split(b"\n\n")
        per_event = [f + b"\n\n" for f in frames[:-1]] + ([frames[-1]] if frames[-1] else [])
        want_chunked = _full_only(protocol, strict, per_event, monkeypatch, chunked=True)
        assert _verdict(protocol, strict, per_event, chunked=True) == want_chunked, k
        rng, pieces, i = random.Random(k), [], 0
        while i < len(data):  # and a random split, through both entry points
            n = rng.randint(1, 700)
            pieces.append(data[i : i + n])
            i += n
        for chunked in (False, True):
            got = _verdict(protocol, strict, pieces, chunked)
            assert got == _full_only(protocol, strict, pieces, monkeypatch, chunked), (k, chunked)
        flagged += want is not None
    assert flagged > 40  # the mutations do break streams (the test is not vacuous)


def test_a_counter_crossing_digit_boundaries_is_replayed_and_checked():
    """A Responses stream long enough for sequence_number to reach 3 digits: the run's expected frame ends
    change length at 10 and 100; a skipped number just after a boundary is still found at its event."""
    events = _responses(150)
    data = b"".join(events)
    assert _verdict("responses", True, events, chunked=True) is None
    for seq in (10, 100, 101):
        k = next(i for i, e in enumerate(events) if b'"sequence_number":%d}' % seq in e)
        bad = [*events]
        bad[k] = bad[k].replace(b'"sequence_number":%d}' % seq, b'"sequence_number":%d}' % (seq + 1))
        got = _verdict("responses", True, bad, chunked=True)
        assert got is not None and got[0] == k and "sequence_number" in got[1], (seq, got)
        assert _verdict("responses", True, [b"".join(bad)]) == got
    assert data


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b'"index":1,"function"', b'"index":true,"function"'),  # a bool is no index, though true == 1
        (b'"index":1,"function"', b'"index":1.0,"function"'),  # nor a float
        (b'"index":1,"function"', b'"index":"1","function"'),
        (b'"index":1,"function"', b'"index" : 1 ,"function"'),  # the same value written otherwise: valid
    ],
)
def test_a_key_must_be_one_learnt_byte_for_byte(old, new, monkeypatch):
    """A key (which call a delta extends) is taken when its bytes are a learnt key's; any other writing goes
    to the full check, whose verdict stands (true == 1 and 1.0 == 1 in Python, not in the grammar)."""
    events = _chat_tools(60)
    mid = next(i for i in range(len(events) // 2, len(events)) if old in events[i])
    events[mid] = events[mid].replace(old, new)
    want = _full_only("chat", True, [b"".join(events)], monkeypatch)
    assert (want is None) == (new == b'"index" : 1 ,"function"'), want
    assert _verdict("chat", True, events, chunked=True) == want
    assert _verdict("chat", True, [b"".join(events)]) == want


def test_interleaved_calls_share_one_keyed_template():
    """Two calls' argument deltas alternate: one template keyed by the call's index takes both."""
    events = _chat_tools(60)
    lint = StreamLint("chat")
    assert lint.feed_chunks(events) is None and lint.close() is None
    lint = StreamLint("chat")
    lint.feed_chunks(events[:8])
    keyed = [t for t in lint._tpls if t.is_keyed and len(t.variants) == 2]
    assert keyed, [(t.head[-30:], list(t.variants)) for t in lint._tpls]


def test_flowlint_feed_gives_the_same_reports_as_the_per_side_calls(monkeypatch):
    """``feed`` (the addon's log-mode step) gathers both sides; what is found, and its index, is what feeding
    each side on its own finds, whatever the batch size."""
    ours = _chat_tools(60)
    mid = len(ours) // 2
    ours[mid] = ours[mid].replace(b'"index":1,"function"', b'"index":7,"function"')
    upstream = _anthropic(len(ours) - 6)
    upstream[40] = upstream[40].replace(b'"index":0', b'"index":3')
    steps = list(zip(upstream, ours))
    per_side = FlowLint("log", "openai-chat", "anthropic")
    for up, out in steps:
        per_side.feed_upstream(up)
        per_side.feed_ours(out)
    per_side.feed_upstream(b"", final=True)
    per_side.feed_ours(b"", final=True)
    want = sorted((r["side"], r["index"], r["message"]) for r in per_side.reports)
    assert [(s, i) for s, i, _ in want] == [("ours", mid), ("upstream", 40)]
    for batch in (1, 2_000, 1 << 30):
        monkeypatch.setattr("dragoman.lint.flow.BATCH", batch)
        lint = FlowLint("log", "openai-chat", "anthropic")
        for up, out in steps:
            lint.feed(up, out)
        lint.feed_upstream(b"", final=True)
        lint.feed_ours(b"", final=True)
        assert sorted((r["side"], r["index"], r["message"]) for r in lint.reports) == want, batch


def test_a_run_longer_than_one_call_takes_continues_and_breaks_are_found():
    """More alike frames in one list than a run call takes (``replay._MAX_RUN``): the run goes on in the
    next call, and a break far into it is still found at its event."""
    events = _anthropic(replay._MAX_RUN + 900)
    assert _verdict("anthropic", True, events, chunked=True) is None
    k = replay._MAX_RUN + 500
    events[k] = events[k].replace(b'"index":0', b'"index":2')
    got = _verdict("anthropic", True, events, chunked=True)
    assert got is not None and got[0] == k, got
    assert _verdict("anthropic", True, [b"".join(events)]) == got
