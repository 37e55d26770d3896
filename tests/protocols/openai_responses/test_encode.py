"""IR -> Responses: upstream requests, whole responses, errors and client SSE (checked with the openai SDK)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
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
from dragoman.ir.request import Message
from dragoman.ir.request import Reasoning
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.ir.response import Response
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import CODEC
from dragoman.sse import SSEDecoder
from dragoman.translate.stream import StreamTranslator

DATA = Path(__file__).parent / "data"


def client_ctx(body: dict) -> Context:
    """The context a Responses client's request gives (as translate_request builds it)."""
    return Context(request=CODEC.decode_request(body))


def events_of(data: bytes) -> list[tuple[str | None, dict]]:
    d = SSEDecoder()
    return [(e.event, json.loads(e.data)) for e in d.feed(data) + d.close() if e.data != "[DONE]"]


def check_sequence(data: bytes) -> list[dict]:
    evs = events_of(data)
    for n, (name, obj) in enumerate(evs):
        assert name == obj["type"]
        assert obj["sequence_number"] == n
    assert b"[DONE]" not in data
    return [o for _, o in evs]


def sdk_final(data: bytes):
    """Run the bytes through the official SDK's streaming accumulator; returns get_final_response()."""
    openai = pytest.importorskip("openai")
    httpx = pytest.importorskip("httpx2")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    client = openai.OpenAI(
        api_key="sk-test",
        base_url="http://test.invalid/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    with client.responses.stream(model="m", input="hi") as stream:
        for _ in stream:
            pass
        return stream.get_final_response()


def encode_all(events: list, ctx: Context) -> bytes:
    enc = CODEC.stream_encoder(ctx)
    out = b"".join(enc.encode(e) for e in events)
    return out + enc.close()


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


# ------------------------------------------------------------------ Responses -> Responses through the translator

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


# ------------------------------------------------------------------ whole responses, errors, requests


def _sdk_response_model():
    return pytest.importorskip("openai.types.responses").Response


def test_encode_response_validates_with_sdk_model():
    SDKResponse = _sdk_response_model()  # noqa: N806
    ctx = client_ctx(json.loads((DATA / "cx-patch-gpt-5.5.request.json").read_text()))
    resp = Response(
        id="msg_01",
        model="claude",
        content=[
            ThinkingPart(text="hmm", signature="SIG"),
            TextPart("done"),
            ToolCallPart(id="toolu_1", name="exec_command", arguments='{"cmd":"ls"}'),
            ToolCallPart(id="toolu_2", name="apply_patch", arguments='{"input":"*** Begin Patch\\n*** End Patch\\n"}'),
        ],
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=20, output_tokens=5, cache_read_tokens=10),
        created=123,
    )
    body = CODEC.encode_response(resp, ctx)
    model = SDKResponse.model_validate(body)
    assert model.status == "completed" and model.output_text == "done"
    assert [o.type for o in model.output] == ["reasoning", "message", "function_call", "custom_tool_call"]
    assert model.output[3].input == "*** Begin Patch\n*** End Patch\n"
    assert carry.unwrap_anthropic(model.output[0].encrypted_content)["sig"] == "SIG"
    assert model.usage.total_tokens == 25 and model.usage.input_tokens_details.cached_tokens == 10
    body = CODEC.encode_response(Response(id="r", model="m", stop_reason=StopReason.MAX_TOKENS), Context())
    assert body["status"] == "incomplete" and body["incomplete_details"] == {"reason": "max_output_tokens"}


def test_whole_response_round_trip_corpus():
    SDKResponse = _sdk_response_model()  # noqa: N806
    for s in samples("openai-responses", stream=False, ok=True):
        body = orjson.loads(s.body)
        ctx = Context(request=Request(model="m"))
        out = CODEC.encode_response(CODEC.decode_response(body, ctx), ctx)
        SDKResponse.model_validate(out)
        assert [o["type"] for o in out["output"]] == [
            o["type"]
            for o in body["output"]
            if o["type"] in ("message", "reasoning", "function_call", "custom_tool_call")
        ]


@pytest.mark.parametrize(
    "kind,etype",
    [
        (ErrorKind.INVALID_REQUEST, "invalid_request_error"),
        (ErrorKind.AUTHENTICATION, "authentication_error"),
        (ErrorKind.PERMISSION, "permission_error"),
        (ErrorKind.NOT_FOUND, "not_found_error"),
        (ErrorKind.RATE_LIMIT, "rate_limit_error"),
        (ErrorKind.API_ERROR, "server_error"),
        (ErrorKind.OVERLOADED, "server_error"),
    ],
)
def test_encode_error(kind, etype):
    body = CODEC.encode_error(ErrorInfo(kind, "msg", code="c", param="p"))
    assert body == {"error": {"message": "msg", "type": etype, "param": "p", "code": "c"}}


def test_encode_request_from_anthropic_shaped_ir():
    req = Request(
        model="gpt-5",
        system=[TextPart("sys a"), TextPart("sys b")],
        messages=[
            Message("user", [TextPart("q")]),
            Message(
                "assistant",
                [
                    ThinkingPart(text="t", signature="anthropic-sig"),
                    ThinkingPart(text="s", encrypted_content="gAAA", item_id="rs_1", summary=True),
                    TextPart("a"),
                    ToolCallPart(id="toolu_1", name="f", arguments='{"a":1}'),
                ],
            ),
            Message(
                "user", [ToolResultPart("toolu_1", [TextPart("r1"), TextPart("r2")], is_error=True), TextPart("next")]
            ),
            Message("system", [TextPart("late")]),
        ],
        tools=[
            Tool("f", "desc", {"type": "object"}),
            Tool("web", kind="builtin", raw={"type": "web_search_20250305", "name": "web"}),
        ],
        reasoning=Reasoning(enabled=True, budget_tokens=5000),
        max_tokens=300,
        stop=["END"],
        top_k=5,
        stream=True,
    )
    ctx = Context(request=req)
    body = CODEC.encode_request(req, ctx)
    assert body["instructions"] == "sys a\n\nsys b"
    assert [it["type"] for it in body["input"]] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    assert body["input"][1] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "s"}],
        "encrypted_content": "gAAA",
    }
    assert body["input"][2]["content"] == [{"type": "output_text", "text": "a", "annotations": []}]
    assert body["input"][4] == {"type": "function_call_output", "call_id": "toolu_1", "output": "r1r2"}
    assert body["input"][6]["role"] == "developer"
    assert body["tools"] == [
        {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False, "description": "desc"}
    ]
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"} and body["include"] == [
        "reasoning.encrypted_content"
    ]
    assert body["store"] is False and body["max_output_tokens"] == 300 and body["stream"] is True
    assert {"thinking", "tools.web", "stop_sequences", "top_k", "tool_result.is_error"} <= set(ctx.dropped.fields)


def test_snapshot_chunks_are_compacted():
    """The text kept for the final snapshot is joined every 256 pieces: memory follows the text, not
    the number of deltas (issue 6)."""
    from dragoman.ir.events import BlockKind as _BK
    from dragoman.protocols.openai_responses.encode import _Out

    b = _Out(_BK.TEXT, 0, "msg_1")
    pieces = [f"w{i} " for i in range(20_000)]
    for p in pieces:
        b.keep(p)
    assert len(b.chunks) <= 20_000 // 256 + 256
    assert "".join(b.chunks) == "".join(pieces)
