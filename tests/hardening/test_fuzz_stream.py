"""Malformed input never escapes the translator (issue 7, item 1).

Hypothesis property tests over the SSE decoder and every (upstream decoder x client encoder) pair
through ``StreamTranslator``:

* semantics-preserving rewrites of real streams (CR/CRLF/LF mixes, comments, multi-line ``data:``,
  ``data:`` without a space, ignored fields, unknown event types in lenient mode) give byte-identical
  output to the original, for arbitrary chunkings;
* damaging rewrites (truncation, garbage, invalid UTF-8, truncated JSON, non-object JSON, wrong field
  types, deeply nested JSON, dropped/duplicated/reordered events) give either a correct translation or
  a stream that ends with exactly one protocol-correct error frame (strict validators), the same for
  every chunking, and never an exception out of ``feed``/``close``.

``DRAGOMAN_FUZZ_EXAMPLES`` raises the example counts (``make fuzz``).
"""

from __future__ import annotations

import json
import os
import random
import re
import time

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from dragoman.protocols import Protocol
from dragoman.sse.decoder import SSEDecoder
from validators.sse import parse_sse

from .fuzzkit import PAIR_IDS
from .fuzzkit import PAIRS
from .fuzzkit import PROTOCOLS
from .fuzzkit import base_streams
from .fuzzkit import check_client_stream
from .fuzzkit import split_at
from .fuzzkit import translate

N = int(os.environ.get("DRAGOMAN_FUZZ_EXAMPLES", "0"))


def fuzz_settings(default: int):
    return settings(
        max_examples=N or default,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
        derandomize=not N,  # the suite is reproducible; `make fuzz` explores
    )


# ---------------------------------------------------------------- stream surgery


def events_of(data: bytes) -> list[bytes]:
    """Split an LF-framed stream into its events (without the blank line)."""
    return [e for e in data.split(b"\n\n") if e.strip()]


def join_events(evs: list[bytes]) -> bytes:
    return b"".join(e + b"\n\n" for e in evs)


def data_of(ev: bytes) -> tuple[list[bytes], bytes]:
    """(non-data lines, the joined data payload) of one event block."""
    other, data = [], []
    for line in ev.split(b"\n"):
        if line.startswith(b"data:"):
            data.append(line[6:] if line.startswith(b"data: ") else line[5:])
        else:
            other.append(line)
    return other, b"\n".join(data)


def with_data(other: list[bytes], payload: bytes) -> bytes:
    return b"\n".join([*other, *(b"data: " + ln for ln in payload.split(b"\n"))])


def unknown_event(proto: Protocol, name: str) -> bytes:
    if proto is Protocol.OPENAI_CHAT:  # Chat has no event types: an unrecognized chunk shape
        return b'data: {"object":"chat.completion.chunk","choices":[],"' + name.encode() + b'":1}'
    return b"event: " + name.encode() + b'\ndata: {"type":"' + name.encode() + b'","sequence_number":0}'


def line_ends(data: bytes, rng: random.Random) -> bytes:
    """Every LF becomes LF, CRLF or CR at random, never letting a CR merge with the next blank line's LF."""
    out = bytearray()
    prev = b""
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        out += line
        if i == len(lines) - 1:
            break
        choices = [b"\n", b"\r\n", b"\r"]
        if prev == b"\r" and not line:
            choices = [b"\r\n", b"\r"]
        nl = rng.choice(choices)
        out += nl
        prev = nl
    # a CR before an empty line that ends in LF would read as one CRLF: fixed above; also a CR line end
    # followed by a line starting with LF cannot happen (every line's own end is chosen separately)
    return bytes(out)


def preserve(data: bytes, proto: Protocol, rng: random.Random, ops: list[str]) -> bytes:
    evs = events_of(data)
    for op in ops:
        if op == "comments":
            for _ in range(rng.randint(1, 4)):
                evs.insert(
                    rng.randint(0, len(evs)), b": keepalive " + bytes([rng.randint(97, 122)]) * rng.randint(0, 9)
                )
            i = rng.randrange(len(evs))
            evs[i] = b": inside\n" + evs[i]
        elif op == "multiline":
            i = rng.randrange(len(evs))
            other, payload = data_of(evs[i])
            try:
                obj = json.loads(payload)
            except (ValueError, RecursionError):
                continue
            evs[i] = with_data(other, json.dumps(obj, indent=rng.randint(0, 3), ensure_ascii=False).encode())
        elif op == "nospace":
            evs = [e.replace(b"data: ", b"data:", 1) if rng.random() < 0.5 else e for e in evs]
        elif op == "fields":
            i = rng.randrange(len(evs))
            evs[i] = rng.choice([b"id: 42\n", b"retry: 1000\n", b"x-unknown-field: 1\n", b"id\n"]) + evs[i]
        elif op == "bom_free_blank_runs":
            i = rng.randrange(len(evs))
            evs.insert(i, b"\n")  # extra blank lines between events dispatch nothing
    out = join_events(evs).replace(b"\n\n\n\n", b"\n\n\n")
    if "line_ends" in ops:
        out = line_ends(out, rng)
    return out


NESTED = b"[" * 5000 + b"]" * 5000


def damage(data: bytes, proto: Protocol, rng: random.Random, ops: list[str]) -> bytes:
    for op in ops:
        evs = events_of(data)
        if not evs:
            evs = [b"data: {}"]
        i = rng.randrange(len(evs))
        if op == "truncate":
            data = data[: rng.randint(0, len(data))]
            continue
        if op == "garbage":
            pos = rng.randint(0, len(data))
            junk = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 40)))
            data = data[:pos] + junk + data[pos:]
            continue
        if op == "invalid_utf8":
            pos = rng.randint(0, len(data))
            data = (
                data[:pos]
                + rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80"])
                + data[pos:]
            )
            continue
        if op == "truncated_json":
            other, payload = data_of(evs[i])
            evs[i] = with_data(other, payload[: rng.randint(0, max(0, len(payload) - 1))])
        elif op == "non_object":
            other, _ = data_of(evs[i])
            evs[i] = with_data(other, rng.choice([b"42", b"[]", b"null", b'"s"', b"true", b"{}", b'{"type":null}']))
        elif op == "deep_nesting":
            other, _ = data_of(evs[i])
            evs[i] = with_data(other, b'{"type":"content_block_delta","index":0,"delta":' + NESTED + b"}")
        elif op == "wrong_type":
            other, payload = data_of(evs[i])
            try:
                obj = json.loads(payload)
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict) and obj:
                target = obj
                for _ in range(rng.randint(0, 2)):  # sometimes one level deeper
                    inner = [v for v in target.values() if isinstance(v, dict) and v]
                    if not inner:
                        break
                    target = rng.choice(inner)
                key = rng.choice(sorted(target))
                target[key] = rng.choice([None, "x", -1, 10**20, 1.5, [], {}, True, [1], {"a": 1}])
                evs[i] = with_data(other, json.dumps(obj).encode())
        elif op == "drop":
            del evs[i]
        elif op == "duplicate":
            evs.insert(i, evs[i])
        elif op == "swap":
            j = rng.randrange(len(evs))
            evs[i], evs[j] = evs[j], evs[i]
        elif op == "move_first":
            evs.insert(0, evs.pop(i))
        elif op == "unknown":
            evs.insert(i, unknown_event(proto, "future_event_type"))
        data = join_events(evs)
    return data


PRESERVING = ["comments", "multiline", "nospace", "fields", "bom_free_blank_runs", "line_ends"]
DAMAGING = [
    "truncate",
    "garbage",
    "invalid_utf8",
    "truncated_json",
    "non_object",
    "deep_nesting",
    "wrong_type",
    "drop",
    "duplicate",
    "swap",
    "move_first",
    "unknown",
]


@st.composite
def chunking(draw, data: bytes) -> list[bytes]:
    kind = draw(st.sampled_from(["cuts", "cuts", "small", "bytewise"]))
    if kind == "bytewise" and len(data) <= 6000:
        return [data[i : i + 1] for i in range(len(data))]
    if kind == "small":
        size = draw(st.integers(1, 16))
        return [data[i : i + size] for i in range(0, len(data), size)] or [b""]
    cuts = draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=40))
    return split_at(data, cuts)


# ---------------------------------------------------------------- the SSE decoder


def run_sse(pieces: list[bytes]) -> list[tuple[str | None, str]]:
    d = SSEDecoder()
    evs = []
    for p in pieces:
        evs += d.feed(p)
    evs += d.close()
    return [(e.event, e.data) for e in evs]


SSE_ALPHABET = st.sampled_from(
    [
        b"data: ",
        b"data:",
        b"event: x",
        b"event:y",
        b": c",
        b"id: 1",
        b"retry: 5",
        b"\n",
        b"\r",
        b"\r\n",
        b"{}",
        b"a",
        b"\xc3\xa9",
        b"\xe2\x82\xac",
        b"\xff",
        b"\xe2",
        b" ",
        b":",
        b"data",
        b"\x00",
    ]
)


@fuzz_settings(400)
@given(st.data())
def test_sse_decoder_any_chunking_matches_reference(data):
    raw = data.draw(st.one_of(st.binary(max_size=300), st.lists(SSE_ALPHABET, max_size=80).map(b"".join)))
    pieces = data.draw(chunking(raw))
    whole = run_sse([raw])
    assert run_sse(pieces) == whole
    # an independent parser (tests/validators/sse.py) over the same text, invalid bytes replaced
    text = raw.decode("utf-8", "replace").encode()
    frames, _ = parse_sse(text, strict=False)
    assert [(f.event, f.data) for f in frames] == whole


def test_sse_decoder_single_10mb_event():
    payload = b"x" * (10 * 1024 * 1024)
    raw = b"event: big\ndata: " + payload + b"\n\n"
    t0 = time.perf_counter()
    evs = run_sse([raw[i : i + 65536] for i in range(0, len(raw), 65536)])
    assert evs == [("big", payload.decode())]
    assert time.perf_counter() - t0 < 5


# ---------------------------------------------------------------- the translator, every pair


def _base(data, upstream: Protocol) -> bytes:
    return data.draw(st.sampled_from(base_streams(upstream)), label="base")


@pytest.mark.parametrize("upstream, client", PAIRS, ids=PAIR_IDS)
@fuzz_settings(25)
@given(data=st.data())
def test_preserving_rewrites_translate_identically(upstream, client, data):
    base = _base(data, upstream)
    ops = data.draw(st.lists(st.sampled_from(PRESERVING), min_size=1, max_size=4, unique=True), label="ops")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    variant = preserve(base, upstream, random.Random(seed), ops)
    expected = translate(upstream, client, [base])
    pieces = data.draw(chunking(variant), label="chunking")
    whole = translate(upstream, client, [variant])
    assert translate(upstream, client, pieces) == whole
    # upstream comments become the client's keepalives, where they arrived; nothing else changes
    assert _without_keepalives(whole) == _without_keepalives(expected)
    if "comments" not in ops:
        assert whole == expected
    check_client_stream(client, whole)


_KEEPALIVES = re.compile(rb'(?:^|(?<=\n\n))(?:: keepalive\n\n|event: ping\ndata: \{"type":"ping"\}\n\n)')


def _without_keepalives(out: bytes) -> bytes:
    return _KEEPALIVES.sub(b"", out)


@pytest.mark.parametrize("upstream, client", PAIRS, ids=PAIR_IDS)
@fuzz_settings(45)
@given(data=st.data())
def test_damaged_streams_translate_or_end_with_one_error(upstream, client, data):
    base = _base(data, upstream)
    ops = data.draw(st.lists(st.sampled_from(DAMAGING), min_size=1, max_size=3), label="ops")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    bad = damage(base, upstream, random.Random(seed), ops)
    pieces = data.draw(chunking(bad), label="chunking")
    whole = translate(upstream, client, [bad])
    assert translate(upstream, client, pieces) == whole
    check_client_stream(client, whole)


# ---------------------------------------------------------------- targeted cases, every pair


def _first_event_index(evs: list[bytes], needle: bytes) -> int:
    return next(i for i, e in enumerate(evs) if needle in e)


DELTA = {
    Protocol.ANTHROPIC_MESSAGES: b"content_block_delta",
    Protocol.OPENAI_CHAT: b'"content":"Hello"',
    Protocol.OPENAI_RESPONSES: b"response.output_text.delta",
}
START = {
    Protocol.ANTHROPIC_MESSAGES: b"content_block_start",
    Protocol.OPENAI_CHAT: b'"role":"assistant"',
    Protocol.OPENAI_RESPONSES: b"response.output_item.added",
}
STOP = {
    Protocol.ANTHROPIC_MESSAGES: b"message_stop",
    Protocol.OPENAI_CHAT: b"[DONE]",
    Protocol.OPENAI_RESPONSES: b"response.completed",
}


def _text_events(upstream: Protocol) -> list[bytes]:
    from .fuzzkit import fake_stream

    return events_of(fake_stream(upstream, "text"))


def _expect_error(client: Protocol, out: bytes) -> None:
    s = check_client_stream(client, out)
    assert s.error is not None, f"expected an error frame, got a complete stream:\n{out.decode()[-600:]}"


@pytest.mark.parametrize("upstream, client", PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize(
    "case",
    ["delta_before_start", "stop_without_start", "duplicate_start", "no_terminal", "deep_nesting", "garbage_line"],
)
def test_out_of_order_and_broken_events_end_with_one_error(upstream, client, case):
    evs = _text_events(upstream)
    if case == "delta_before_start":
        i = _first_event_index(evs, START[upstream])
        if upstream is Protocol.OPENAI_CHAT:
            pytest.skip("Chat has no start event: a delta first is a valid stream")
        del evs[i]
    elif case == "stop_without_start":
        evs = [e for e in evs if STOP[upstream] in e or b"message_delta" in e]
        if upstream is Protocol.OPENAI_CHAT:
            evs = [
                b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
                b"data: [DONE]",
            ]
            # a finish without any content is a valid (empty) Chat answer
            out = translate(upstream, client, [join_events(evs)])
            check_client_stream(client, out)
            return
        if upstream is Protocol.OPENAI_RESPONSES:
            # response.completed alone carries the whole output: a valid (if unusual) stream
            out = translate(upstream, client, [join_events(evs)])
            assert check_client_stream(client, out).text == "Hello from the fake upstream."
            return
    elif case == "duplicate_start":
        i = _first_event_index(evs, START[upstream])
        if upstream is Protocol.OPENAI_CHAT:
            pytest.skip("Chat has no start event")
        evs.insert(i, evs[i])
    elif case == "no_terminal":
        i = _first_event_index(evs, STOP[upstream])
        evs = evs[:i]
        if upstream is Protocol.OPENAI_CHAT:  # also drop the finish chunk: nothing says the answer ended
            evs = [e for e in evs if b'"finish_reason":"stop"' not in e and b'"usage"' not in e]
    elif case == "deep_nesting":
        i = _first_event_index(evs, DELTA[upstream])
        other, _ = data_of(evs[i])
        evs[i] = with_data(other, b'{"type":"x","a":' + NESTED + b"}")
    elif case == "garbage_line":
        i = _first_event_index(evs, DELTA[upstream])
        evs.insert(i + 1, b"data: {not json")
    data = join_events(evs)
    for name, pieces in [("whole", [data]), ("bytewise", [data[i : i + 1] for i in range(len(data))])]:
        out = translate(upstream, client, pieces)
        _expect_error(client, out)
        if case == "no_terminal" and upstream is not Protocol.OPENAI_CHAT:
            assert b"ended" in out or b"before" in out, name


@pytest.mark.parametrize("upstream, client", PAIRS, ids=PAIR_IDS)
def test_single_10mb_text_delta(upstream, client):
    evs = _text_events(upstream)
    i = _first_event_index(evs, DELTA[upstream])
    other, payload = data_of(evs[i])
    obj = json.loads(payload)
    big = "é" * (5 * 1024 * 1024)  # 10 MB of UTF-8
    if upstream is Protocol.ANTHROPIC_MESSAGES:
        obj["delta"]["text"] = big
    elif upstream is Protocol.OPENAI_CHAT:
        obj["choices"][0]["delta"]["content"] = big
    else:
        obj["delta"] = big
    evs[i] = with_data(other, json.dumps(obj, ensure_ascii=False).encode())
    data = join_events(evs)
    t0 = time.perf_counter()
    out = translate(upstream, client, [data[k : k + 65536] for k in range(0, len(data), 65536)])
    elapsed = time.perf_counter() - t0
    s = check_client_stream(client, out)
    assert s.error is None
    assert big in s.text
    assert elapsed < 10, elapsed


@pytest.mark.parametrize("upstream", [Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_RESPONSES], ids=lambda p: p.value)
@pytest.mark.parametrize("client", PROTOCOLS, ids=lambda p: p.value)
def test_strict_turns_unknown_event_types_into_errors(upstream, client):
    evs = _text_events(upstream)
    i = _first_event_index(evs, DELTA[upstream])
    base = join_events(evs)
    evs.insert(i, unknown_event(upstream, "future_event_type"))
    odd = join_events(evs)
    # lenient: skipped, the translation is exactly the original's
    assert translate(upstream, client, [odd]) == translate(upstream, client, [base])
    # strict: one error frame naming the event type
    out = translate(upstream, client, [odd], strict=True)
    _expect_error(client, out)
    assert b"future_event_type" in out
    # and strict changes nothing for a clean stream
    assert translate(upstream, client, [base], strict=True) == translate(upstream, client, [base])


# ---------------------------------------------------------------- regressions found by the fuzz run (300 examples)


def _tool_events(upstream: Protocol) -> list[bytes]:
    from .fuzzkit import fake_stream

    return events_of(fake_stream(upstream, "tools"))


def _both_chunkings(upstream: Protocol, client: Protocol, data: bytes) -> bytes:
    whole = translate(upstream, client, [data])
    assert translate(upstream, client, [data[i : i + 1] for i in range(len(data))]) == whole
    return whole


@pytest.mark.parametrize("upstream, client", PAIRS, ids=PAIR_IDS)
def test_lost_tool_argument_delta_is_an_error_not_a_complete_call(upstream, client):
    evs = _tool_events(upstream)
    i = _first_event_index(evs, b'": \\"Par"')  # the second fragment of get_weather's arguments
    del evs[i]
    if upstream is Protocol.OPENAI_RESPONSES:  # its .done events carry the whole arguments: drop them too
        evs = [e for e in evs if not (b"fc_fake_0" in e and (b"arguments.done" in e or b"output_item.done" in e))]
    out = _both_chunkings(upstream, client, join_events(evs))
    _expect_error(client, out)
    assert b"get_weather" in out and (b"not a JSON object" in out or b"disagree" in out or b"arguments" in out)


@pytest.mark.parametrize(
    "upstream, client",
    [p for p in PAIRS if p[0] is not Protocol.OPENAI_RESPONSES],
    ids=[i for p, i in zip(PAIRS, PAIR_IDS) if p[0] is not Protocol.OPENAI_RESPONSES],
)
def test_tool_arguments_cut_by_max_tokens_are_legitimate(upstream, client):
    """max_tokens/length may cut tool input mid-JSON (real recording: stream-max-tokens-mid-tool-input)."""
    evs = _tool_events(upstream)
    del evs[_first_event_index(evs, b'": \\"Par"')]
    data = join_events(evs)
    if upstream is Protocol.ANTHROPIC_MESSAGES:
        data = data.replace(b'"stop_reason":"tool_use"', b'"stop_reason":"max_tokens"')
    else:
        data = data.replace(b'"finish_reason":"tool_calls"', b'"finish_reason":"length"')
    out = _both_chunkings(upstream, client, data)
    s = check_client_stream(client, out)
    assert s.error is None
    assert s.stop_reason in ("max_tokens", "length", "incomplete:max_output_tokens")


USAGE_PATCH = {
    Protocol.ANTHROPIC_MESSAGES: (b'"usage":{"output_tokens":', b'"usage":{"output_tokens":18446744073709551615,"x":'),
    Protocol.OPENAI_CHAT: (b'"completion_tokens":', b'"completion_tokens":18446744073709551615,"x":'),
    Protocol.OPENAI_RESPONSES: (b'"output_tokens":', b'"output_tokens":18446744073709551615,"x":'),
}


@pytest.mark.parametrize("upstream, client", PAIRS, ids=PAIR_IDS)
def test_usage_above_64_bits_is_a_protocol_error(upstream, client):
    data = fake_stream_text(upstream)
    old, new = USAGE_PATCH[upstream]
    assert old in data
    out = _both_chunkings(upstream, client, data.replace(old, new))
    _expect_error(client, out)
    assert b"out of range" in out


def fake_stream_text(upstream: Protocol) -> bytes:
    return join_events(_text_events(upstream))


@pytest.mark.parametrize("client", PROTOCOLS, ids=lambda p: p.value)
@pytest.mark.parametrize(
    "field, value", [("arguments", [1]), ("arguments", {"a": 1}), ("name", 5), ("call_id", []), ("id", ["x"])]
)
def test_responses_item_fields_of_the_wrong_type_end_with_one_error(client, field, value):
    up = Protocol.OPENAI_RESPONSES
    evs = _tool_events(up)
    i = _first_event_index(evs, b"response.output_item.added")
    other, payload = data_of(evs[i])
    obj = json.loads(payload)
    obj["item"][field] = value
    evs[i] = with_data(other, json.dumps(obj).encode())
    out = _both_chunkings(up, client, join_events(evs))
    _expect_error(client, out)


@pytest.mark.parametrize("client", PROTOCOLS, ids=lambda p: p.value)
@pytest.mark.parametrize("when", ["before_start", "mid_stream"])
def test_encoder_error_frame_survives_unencodable_upstream_fields(client, when):
    """An upstream error code/param/request id no JSON encoder can write still gives one error frame."""
    from dragoman.ir.common import ErrorInfo
    from dragoman.ir.common import ErrorKind
    from dragoman.ir.events import BlockKind
    from dragoman.ir.events import BlockStart
    from dragoman.ir.events import MessageStart
    from dragoman.ir.events import ToolArgsDelta
    from dragoman.protocols.base import Context
    from dragoman.protocols.registry import get_codec

    from .fuzzkit import deterministic
    from .fuzzkit import request_for

    huge = 2**70
    err = ErrorInfo(kind=ErrorKind.API_ERROR, message="boom \ud800", code=huge, param=[huge], request_id=huge)  # type: ignore[arg-type]
    with deterministic():
        enc = get_codec(client).stream_encoder(Context(request=request_for(client)))
        out = b""
        if when == "mid_stream":
            out += enc.encode(MessageStart(id="x", model="m"))
            out += enc.encode(BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="c", name="f"))
            out += enc.encode(ToolArgsDelta(0, '{"a":'))
        frame = enc.error(err)
    assert frame
    s = check_client_stream(client, out + frame)
    assert s.error is not None and "boom" in json.dumps(s.error)
