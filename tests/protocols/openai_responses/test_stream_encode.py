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
