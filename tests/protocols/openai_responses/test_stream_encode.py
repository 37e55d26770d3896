"""IR events -> the client's Responses SSE (checked with the openai SDK), and Responses -> Responses
through the translator over chunkings."""

from __future__ import annotations

import json

import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import samples
from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
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
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.request import Request
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import CODEC
from dragoman.translate.stream import StreamTranslator
from validators import responses as vr

from .helpers import DATA
from .helpers import check_sequence
from .helpers import client_ctx
from .helpers import encode_all
from .helpers import events_of
from .helpers import sdk_final

ANTHROPIC_LIKE = [
    MessageStart(id="msg_01ABC", model="claude-x", usage=Usage(input_tokens=10, cache_read_tokens=4)),
    BlockStart(0, BlockKind.THINKING),
    ThinkingDelta(0, "Let me "),
    ThinkingDelta(0, "think."),
    SignatureDelta(0, signature="ErUBsig=="),
    BlockStop(0),
    BlockStart(1, BlockKind.TEXT),
    TextDelta(1, "Héllo "),
    TextDelta(1, "wörld"),
    BlockStop(1),
    BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="toolu_1", name="exec_command"),
    ToolArgsDelta(2, '{"cmd":'),
    ToolArgsDelta(2, '"echo hi"}'),
    BlockStop(2),
    BlockStart(3, BlockKind.REDACTED_THINKING, data="REDACTED=="),
    BlockStop(3),
    MessageDelta(StopReason.TOOL_USE, Usage(output_tokens=7, reasoning_tokens=2)),
    MessageStop(),
]


def test_stream_encoder_sdk_accumulates_full_output():
    data = encode_all(
        ANTHROPIC_LIKE,
        client_ctx(
            {
                "model": "claude-x",
                "input": "hi",
                "tools": [{"type": "function", "name": "exec_command", "parameters": {}}],
            }
        ),
    )
    evs = check_sequence(data)
    assert [e["type"] for e in evs[:2]] == ["response.created", "response.in_progress"]
    assert evs[-1]["type"] == "response.completed"
    final = sdk_final(data)
    assert final.id == "resp_msg_01ABC" and final.status == "completed"
    types = [o.type for o in final.output]
    assert types == ["reasoning", "message", "function_call", "reasoning"]
    assert final.output_text == "Héllo wörld"
    fc = final.output[2]
    assert fc.call_id == "toolu_1" and fc.arguments == '{"cmd":"echo hi"}' and fc.id.startswith("fc_")
    rs = final.output[0]
    assert rs.summary[0].text == "Let me think."
    assert carry.unwrap_anthropic(rs.encrypted_content) == {"sig": "ErUBsig==", "text": "Let me think."}
    assert carry.unwrap_anthropic(final.output[3].encrypted_content)["redacted"] == "REDACTED=="
    u = final.usage
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (10, 7, 17)
    assert u.input_tokens_details.cached_tokens == 4 and u.output_tokens_details.reasoning_tokens == 2
    # output indexes increase by block and every item is announced before its deltas
    added = [e["output_index"] for e in evs if e["type"] == "response.output_item.added"]
    assert added == [0, 1, 2, 3]


def test_signature_survives_codex_round_trip():
    """Anthropic thinking -> Responses client -> Codex echoes the reasoning item -> the original signature."""
    data = encode_all(ANTHROPIC_LIKE, client_ctx({"model": "claude-x", "input": "hi"}))
    done = [e["item"] for e in check_sequence(data) if e["type"] == "response.output_item.done"]
    follow_up = {
        "model": "claude-x",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
        + [dict(it, content=None) if it["type"] == "reasoning" else it for it in done]
        + [{"type": "function_call_output", "call_id": "toolu_1", "output": "hi\n"}],
    }
    req = CODEC.decode_request(follow_up)
    asst = req.messages[1]
    thinking, text, call, redacted = asst.parts
    assert isinstance(thinking, ThinkingPart) and thinking.signature == "ErUBsig==" and thinking.text == "Let me think."
    assert thinking.encrypted_content is None
    assert text.text == "Héllo wörld" and isinstance(call, ToolCallPart) and call.id == "toolu_1"
    assert redacted.redacted_data == "REDACTED=="
    assert isinstance(req.messages[2].parts[0], ToolResultPart)


def test_custom_tool_offered_as_function_becomes_custom_tool_call():
    ctx = client_ctx(json.loads((DATA / "cx-patch-gpt-5.5.request.json").read_text()))
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hé\n*** End Patch\n"
    args = json.dumps({"input": patch})
    evs = [
        MessageStart(id="msg_1", model="claude"),
        BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="toolu_9", name="apply_patch"),
        *[ToolArgsDelta(0, args[i : i + 5]) for i in range(0, len(args), 5)],
        BlockStop(0),
        MessageDelta(StopReason.TOOL_USE, Usage(input_tokens=1, output_tokens=1)),
        MessageStop(),
    ]
    data = encode_all(evs, ctx)
    out = check_sequence(data)
    deltas = [e for e in out if e["type"] == "response.custom_tool_call_input.delta"]
    assert "".join(d["delta"] for d in deltas) == patch
    assert not [e for e in out if e["type"].startswith("response.function_call")]
    done = [e for e in out if e["type"] == "response.output_item.done"][0]["item"]
    assert done["type"] == "custom_tool_call" and done["input"] == patch and done["call_id"] == "toolu_9"
    final = sdk_final(data)
    assert final.output[0].type == "custom_tool_call" and final.output[0].input == patch


def test_namespaced_tool_call_carries_namespace():
    ctx = client_ctx(json.loads((DATA / "cx-tool-default.request.json").read_text()))
    evs = [
        MessageStart(id="msg_1", model="claude"),
        BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="toolu_1", name="sleep"),
        ToolArgsDelta(0, "{}"),
        BlockStop(0),
        BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="toolu_2", name="exec"),
        ToolArgsDelta(1, '{"input": "text(1)"}'),
        BlockStop(1),
        MessageDelta(StopReason.TOOL_USE),
        MessageStop(),
    ]
    final = [e for e in check_sequence(encode_all(evs, ctx)) if e["type"] == "response.completed"][0]["response"]
    assert final["output"][0]["name"] == "sleep" and final["output"][0]["namespace"] == "clock"
    assert final["output"][1]["type"] == "custom_tool_call" and final["output"][1]["input"] == "text(1)"
    assert "namespace" not in final["output"][1]


def test_interleaved_tool_calls_and_incomplete():
    evs = [
        MessageStart(id="chatcmpl-1", model="gpt"),
        BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="c0", name="a"),
        BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="c1", name="b"),
        ToolArgsDelta(0, '{"x":'),
        ToolArgsDelta(1, '{"y":'),
        ToolArgsDelta(0, "1}"),
        ToolArgsDelta(1, "2}"),
        BlockStart(2, BlockKind.TEXT),
        TextDelta(2, "partial"),
        MessageDelta(StopReason.MAX_TOKENS, Usage(input_tokens=5, output_tokens=9)),
        MessageStop(),
    ]
    data = encode_all(evs, client_ctx({"model": "gpt", "input": "x"}))
    out = check_sequence(data)
    term = out[-1]
    assert term["type"] == "response.incomplete"
    assert term["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [o.get("arguments") for o in term["response"]["output"][:2]] == ['{"x":1}', '{"y":2}']
    assert term["response"]["output"][2]["content"][0]["text"] == "partial"
    assert len({o["id"] for o in term["response"]["output"]}) == 3


def test_refusal_block():
    evs = [
        MessageStart(id="resp_x", model="m"),
        BlockStart(0, BlockKind.REFUSAL),
        TextDelta(0, "I can't"),
        BlockStop(0),
        MessageDelta(StopReason.END_TURN),
        MessageStop(),
    ]
    data = encode_all(evs, Context())
    final = sdk_final(data)
    assert final.output[0].content[0].type == "refusal" and final.output[0].content[0].refusal == "I can't"


def test_error_framing():
    enc = CODEC.stream_encoder(client_ctx({"model": "m", "input": "x"}))
    data = (
        enc.encode(MessageStart(id="resp_1", model="m"))
        + enc.encode(BlockStart(0, BlockKind.TEXT))
        + enc.encode(TextDelta(0, "a"))
    )
    data += enc.error(ErrorInfo(ErrorKind.OVERLOADED, "busy", code="overloaded_error"))
    assert enc.error(ErrorInfo(ErrorKind.API_ERROR, "again")) == b""
    out = check_sequence(data)
    assert out[-2] == {
        "type": "error",
        "code": "overloaded_error",
        "message": "busy",
        "param": None,
        "sequence_number": len(out) - 2,
    }
    assert out[-1]["type"] == "response.failed"
    assert out[-1]["response"]["status"] == "failed" and out[-1]["response"]["error"] == {
        "code": "overloaded_error",
        "message": "busy",
    }
    with pytest.raises(
        (pytest.importorskip("openai").APIError, RuntimeError)
    ):  # the SDK never completes a failed stream
        sdk_final(data)
    # an error before anything still starts with response.created
    enc = CODEC.stream_encoder(Context())
    out = check_sequence(enc.error(ErrorInfo(ErrorKind.RATE_LIMIT, "slow")))
    assert [e["type"] for e in out] == ["response.created", "response.in_progress", "error", "response.failed"]
    assert out[2]["code"] == "rate_limit_error"


def test_encoder_order_errors():
    enc = CODEC.stream_encoder(Context())
    enc.encode(MessageStart(id="r", model="m"))
    with pytest.raises(UpstreamProtocolError):
        enc.encode(TextDelta(5, "x"))
    with pytest.raises(UpstreamProtocolError):
        enc.encode(MessageStart(id="r", model="m"))
    enc.encode(BlockStart(0, BlockKind.TEXT))
    with pytest.raises(UpstreamProtocolError):
        enc.encode(BlockStart(0, BlockKind.TEXT))
    with pytest.raises(UpstreamProtocolError):
        enc.encode(ToolArgsDelta(0, "x"))


STREAMS = samples("openai-responses", stream=True)

CODEX_STREAMS = sorted(DATA.glob("*.sse"))

CASES = [(s.name, s.body) for s in STREAMS] + [(p.name, p.read_bytes()) for p in CODEX_STREAMS]


def _first_completed(data: bytes) -> dict | None:
    for _, obj in events_of(data):
        if obj.get("type") == "response.completed":
            return obj["response"]
    return None


@pytest.mark.parametrize("name,body", CASES, ids=[c[0] for c in CASES])
def test_responses_to_responses_stable_over_chunkings(name, body):
    outs = set()
    for _, pieces in chunkings(body, seeds=2):
        ctx = Context(request=Request(model="m"))
        tr = StreamTranslator(CODEC.stream_decoder(ctx), CODEC.stream_encoder(ctx))
        outs.add(run_stream(tr, pieces))
    assert len(outs) == 1
    data = outs.pop()
    evs = check_sequence(data)
    src = _first_completed(body)
    if src is None:  # the upstream failed: one error, then response.failed
        assert [e["type"] for e in evs[-2:]] == ["error", "response.failed"]
        return
    final = sdk_final(data)
    want_text = "".join(
        c["text"]
        for it in src["output"]
        if it["type"] == "message"
        for c in it["content"]
        if c["type"] == "output_text"
    )
    assert final.output_text == want_text
    want_calls = [
        (it["call_id"], it.get("arguments", it.get("input")))
        for it in src["output"]
        if it["type"] in ("function_call", "custom_tool_call")
    ]
    got_calls = [
        (o.call_id, getattr(o, "arguments", None) or getattr(o, "input", None))
        for o in final.output
        if o.type in ("function_call", "custom_tool_call")
    ]
    assert got_calls == want_calls
    # encrypted content is taken from output_item.done (OpenAI re-encrypts in response.completed)
    want_enc = []
    for _, obj in events_of(body):
        if obj["type"] == "response.completed":
            break
        if (
            obj["type"] == "response.output_item.done"
            and obj["item"]["type"] == "reasoning"
            and obj["item"].get("encrypted_content")
        ):
            want_enc.append(obj["item"]["encrypted_content"])
    got_enc = [
        o.encrypted_content for o in final.output if o.type == "reasoning" and not carry.is_carried(o.encrypted_content)
    ]
    assert got_enc == want_enc
    assert final.usage.input_tokens == src["usage"]["input_tokens"]
    assert final.usage.output_tokens == src["usage"]["output_tokens"]


# ------------------------------------------------------------------ output items never overlap (issue 14)


def wire_items(out: list[dict]) -> list[tuple[int, str]]:
    """(output_index, event type) of every item event, checking that each item's events are contiguous:
    added, its own events, done, and only then the next item (the real API's order)."""
    seen: list[tuple[int, str]] = []
    current: int | None = None
    for e in out:
        oi = e.get("output_index")
        if oi is None:
            continue
        if e["type"] == "response.output_item.added":
            assert current is None, f"item {oi} added while item {current} is open"
            assert oi == len({i for i, _ in seen}), "output_index out of order"
            current = oi
        assert oi == current, f"{e['type']} for item {oi} while item {current} is the open one"
        if e["type"] == "response.output_item.done":
            current = None
        seen.append((oi, e["type"]))
    assert current is None
    return seen


def encode_each(events: list, ctx: Context) -> list[bytes]:
    """The bytes the encoder returns for each IR event (what reaches the client, event by event)."""
    enc = CODEC.stream_encoder(ctx)
    return [enc.encode(e) for e in events]


PARALLEL = [
    MessageStart(id="chatcmpl-1", model="gpt"),
    BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="call_w", name="get_weather"),
    ToolArgsDelta(0, '{"city":'),
    BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="call_t", name="get_time"),
    ToolArgsDelta(1, '{"tz":'),
    ToolArgsDelta(0, ' "Paris"}'),
    ToolArgsDelta(1, ' "Asia/Tokyo"}'),
    BlockStop(0),
    BlockStop(1),
    MessageDelta(StopReason.TOOL_USE, Usage(input_tokens=5, output_tokens=9)),
    MessageStop(),
]


def test_parallel_tool_calls_stream_one_after_another():
    chunks = encode_each(PARALLEL, client_ctx({"model": "gpt", "input": "x"}))
    # the second call is held: nothing of it reaches the client while the first one is open
    assert chunks[3] == b"" and chunks[4] == b"" and chunks[6] == b""
    first = [e["type"] for _, e in events_of(chunks[5])]
    assert first == ["response.function_call_arguments.delta"]
    # the first one's stop: it is done, then the second comes out whole (added, one delta) and stays open
    at_stop = [(e["type"], e.get("output_index"), e.get("delta")) for _, e in events_of(chunks[7])]
    assert at_stop == [
        ("response.function_call_arguments.done", 0, None),
        ("response.output_item.done", 0, None),
        ("response.output_item.added", 1, None),
        ("response.function_call_arguments.delta", 1, '{"tz": "Asia/Tokyo"}'),
    ]
    data = b"".join(chunks)
    out = check_sequence(data)
    assert [t for _, t in wire_items(out)].count("response.output_item.added") == 2
    vr.validate_stream(data)
    final = sdk_final(data)
    assert [(o.call_id, o.name, o.arguments) for o in final.output] == [
        ("call_w", "get_weather", '{"city": "Paris"}'),
        ("call_t", "get_time", '{"tz": "Asia/Tokyo"}'),
    ]


def test_held_items_already_stopped_come_out_whole_in_start_order():
    evs = [
        MessageStart(id="chatcmpl-1", model="gpt"),
        BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="c0", name="a"),
        BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="c1", name="b"),
        BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="c2", name="c"),
        ToolArgsDelta(2, '{"z":'),
        ToolArgsDelta(1, '{"y":2}'),
        BlockStop(1),  # the second stops before the first: it waits, done
        ToolArgsDelta(0, '{"x":1}'),
        ToolArgsDelta(2, "3}"),
        BlockStop(0),  # -> 0 done, 1 whole, 2 added with its text so far and live
        BlockStart(3, BlockKind.TEXT),
        TextDelta(3, "after"),
        BlockStop(2),
        TextDelta(3, " all"),
        BlockStop(3),
        MessageDelta(StopReason.TOOL_USE, Usage(input_tokens=5, output_tokens=9)),
        MessageStop(),
    ]
    chunks = encode_each(evs, client_ctx({"model": "gpt", "input": "x"}))
    assert all(c == b"" for c in chunks[2:7])
    data = b"".join(chunks)
    out = check_sequence(data)
    items = wire_items(out)
    assert [oi for oi, t in items if t == "response.output_item.done"] == [0, 1, 2, 3]
    # the held call already stopped: added, one delta, done with nothing in between
    one = [t for oi, t in items if oi == 1]
    assert one == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    vr.validate_stream(data)
    final = sdk_final(data)
    assert [getattr(o, "arguments", None) for o in final.output] == ['{"x":1}', '{"y":2}', '{"z":3}', None]
    assert final.output_text == "after all"


def test_mixed_items_held_behind_an_open_reasoning_item():
    evs = [
        MessageStart(id="chatcmpl-1", model="deepseek"),
        BlockStart(0, BlockKind.THINKING),
        ThinkingDelta(0, "think "),
        BlockStart(1, BlockKind.TEXT),
        TextDelta(1, "Hi"),
        BlockStart(2, BlockKind.REFUSAL),
        TextDelta(2, "no"),
        BlockStart(3, BlockKind.TOOL_CALL, tool_call_id="c3", name="f"),
        ToolArgsDelta(3, "{}"),
        ThinkingDelta(0, "more"),
        BlockStart(4, BlockKind.THINKING),
        ThinkingDelta(4, ""),
        BlockStop(4),  # a held reasoning item without text: no summary part
        BlockStop(1),
        BlockStop(2),
        BlockStop(3),
        SignatureDelta(0, signature="SIG"),
        BlockStop(0),
        MessageDelta(StopReason.TOOL_USE, Usage(input_tokens=5, output_tokens=9)),
        MessageStop(),
    ]
    chunks = encode_each(evs, client_ctx({"model": "deepseek", "input": "x"}))
    assert chunks[9] != b"" and all(c == b"" for c in chunks[3:9] + chunks[10:17])
    data = b"".join(chunks)
    out = check_sequence(data)
    wire_items(out)
    vr.validate_stream(data)
    final = sdk_final(data)
    assert [o.type for o in final.output] == ["reasoning", "message", "message", "function_call", "reasoning"]
    assert final.output[0].summary[0].text == "think more"
    assert carry.unwrap_anthropic(final.output[0].encrypted_content)["sig"] == "SIG"
    assert final.output[1].content[0].text == "Hi" and final.output[2].content[0].refusal == "no"
    assert final.output[3].arguments == "{}" and final.output[4].summary == []


def test_held_custom_tool_input_is_unwrapped_at_its_stop():
    ctx = client_ctx(json.loads((DATA / "cx-patch-gpt-5.5.request.json").read_text()))
    patch = "*** Begin Patch\n*** End Patch\n"
    evs = [
        MessageStart(id="msg_1", model="claude"),
        BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="t0", name="exec_command"),
        BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="t1", name="apply_patch"),
        ToolArgsDelta(1, json.dumps({"input": patch})),
        ToolArgsDelta(0, '{"cmd":"ls"}'),
        BlockStop(0),
        BlockStop(1),
        MessageDelta(StopReason.TOOL_USE, Usage(input_tokens=1, output_tokens=1)),
        MessageStop(),
    ]
    data = encode_all(evs, ctx)
    out = check_sequence(data)
    wire_items(out)
    vr.validate_stream(data)
    assert [e["delta"] for e in out if e["type"] == "response.custom_tool_call_input.delta"] == [patch]
    final = sdk_final(data)
    assert final.output[1].type == "custom_tool_call" and final.output[1].input == patch


def test_error_with_held_items_closes_every_item_in_order():
    enc = CODEC.stream_encoder(client_ctx({"model": "m", "input": "x"}))
    data = b"".join(
        enc.encode(e)
        for e in [
            MessageStart(id="resp_1", model="m"),
            BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="c0", name="a"),
            BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="c1", name="b"),
            BlockStart(2, BlockKind.TEXT),
            ToolArgsDelta(0, '{"x":'),
            ToolArgsDelta(1, '{"y":1}'),
            TextDelta(2, "partial"),
            BlockStop(2),
        ]
    )
    data += enc.error(ErrorInfo(ErrorKind.OVERLOADED, "busy"))
    out = check_sequence(data)
    items = wire_items(out)
    assert [oi for oi, t in items if t == "response.output_item.done"] == [0, 1, 2]
    vr.validate_stream(data)
    failed = out[-1]["response"]
    assert out[-2]["type"] == "error" and failed["status"] == "failed"
    # the open ones are incomplete; the text block had stopped before the error: completed
    assert [(o["status"], o.get("arguments")) for o in failed["output"]] == [
        ("incomplete", '{"x":'),
        ("incomplete", '{"y":1}'),
        ("completed", None),
    ]
    assert failed["output"][2]["content"][0]["text"] == "partial"


def test_held_item_delta_after_its_stop_is_rejected():
    enc = CODEC.stream_encoder(Context())
    for e in PARALLEL[:4]:
        enc.encode(e)
    enc.encode(BlockStop(1))
    with pytest.raises(UpstreamProtocolError, match="unknown or closed block 1"):
        enc.encode(ToolArgsDelta(1, "x"))
    with pytest.raises(UpstreamProtocolError, match="unknown or closed block 1"):
        enc.encode(BlockStop(1))
