from __future__ import annotations

import json

import orjson
import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import requests
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
from dragoman.ir.events import StreamError
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import Reasoning
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import Request
from dragoman.ir.request import ResponseFormat
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolChoice
from dragoman.ir.request import ToolResultPart
from dragoman.ir.response import Response
from dragoman.protocols.anthropic_messages import CODEC
from dragoman.protocols.anthropic_messages.request_encode import DEFAULT_MAX_TOKENS
from dragoman.protocols.anthropic_messages.request_encode import UNANSWERED_TOOL_CALL
from dragoman.protocols.base import Context
from dragoman.sse import SSEDecoder
from dragoman.translate.stream import StreamTranslator

from .helpers import DATA
from .helpers import accumulate_raw
from .helpers import check_wire_order
from .helpers import sse_events

CORPUS_REQUESTS = [(n, r) for n, _, r in requests("anthropic") if "max_tokens" in r]
CC_REQUESTS = sorted(DATA.glob("*.body.json"))
STREAMS = samples("anthropic", stream=True) + []
CC_REPLY = (DATA / "cc-tool-reasoning--002-reply.sse").read_bytes()


def enc(req: Request, ctx: Context | None = None):
    ctx = ctx or Context(request=req)
    return CODEC.encode_request(req, ctx), ctx


# ---------------------------------------------------------------- requests


@pytest.mark.parametrize("name,body", CORPUS_REQUESTS, ids=[n for n, _ in CORPUS_REQUESTS])
def test_request_round_trip_through_ir(name, body):
    req = CODEC.decode_request(body)
    wire, ctx = enc(req)
    again = CODEC.decode_request(wire)
    assert again.messages == req.messages
    assert again.system == req.system
    assert [t for t in again.tools] == req.tools
    assert again.tool_choice == req.tool_choice
    assert (again.max_tokens, again.stream, again.temperature) == (req.max_tokens, req.stream, req.temperature)
    if "thinking" in body:
        assert again.reasoning == req.reasoning
    else:  # an effort alone means "think this hard" to the encoder (OpenAI semantics): a budget
        assert again.reasoning is None or again.reasoning.budget_tokens is not None
    assert ctx.dropped.fields == []


@pytest.mark.parametrize("path", CC_REQUESTS, ids=[p.name for p in CC_REQUESTS])
def test_claude_code_request_encodes_to_valid_anthropic(path):
    body = json.loads(path.read_bytes())
    req = CODEC.decode_request(body)
    wire, ctx = enc(req)
    assert [b["text"] for b in wire["system"]] == [b["text"] for b in body["system"]]
    roles = [m["role"] for m in wire["messages"]]
    assert "system" not in roles
    assert all(a != b for a, b in zip(roles, roles[1:])), roles
    sys_texts = [m["content"] for m in body["messages"] if m["role"] == "system"]
    n_sys = len(sys_texts)
    texts = [b.get("text") for m in wire["messages"] for b in m["content"]]
    for t in sys_texts:
        assert f"<system-reminder>\n{t}\n</system-reminder>" in texts
    if n_sys:
        assert "system_message_moved" in ctx.dropped.fields
    assert wire["thinking"] == body["thinking"]
    assert wire.get("output_config") == body.get("output_config")
    assert wire["metadata"] == {"user_id": body["metadata"]["user_id"]}
    assert wire["tools"] == [{k: v for k, v in t.items() if k != "cache_control"} for t in body["tools"]]
    # the tool_use/tool_result pairing survives
    for i, m in enumerate(wire["messages"]):
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        if uses:
            nxt = wire["messages"][i + 1]
            assert [b["tool_use_id"] for b in nxt["content"][: len(uses)]] == uses

    def results(r):
        return [p for m in r.messages for p in m.parts if isinstance(p, (ToolResultPart, ToolCallPart, ThinkingPart))]

    assert results(CODEC.decode_request(wire)) == results(req)


def test_system_placement_and_merging():
    req = Request(
        model="m",
        system=[TextPart("top")],
        messages=[
            Message("system", [TextPart("dev1")]),
            Message("user", [TextPart("u1")]),
            Message("user", [TextPart("u2")]),
            Message("assistant", [TextPart("a1")]),
            Message("system", [TextPart("later")]),
            Message("user", [TextPart("u3")]),
        ],
    )
    wire, ctx = enc(req)
    assert wire["system"] == [{"type": "text", "text": "top"}, {"type": "text", "text": "dev1"}]
    assert wire["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "u1"}, {"type": "text", "text": "u2"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a1"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\nlater\n</system-reminder>"},
                {"type": "text", "text": "u3"},
            ],
        },
    ]
    assert ctx.dropped.fields == ["system_message_moved"]
    assert wire["max_tokens"] == DEFAULT_MAX_TOKENS == 8192


def test_default_max_tokens_leaves_room_for_thinking():
    """A client without a limit (Codex never sends one) must not have its answer squeezed by thinking."""
    req = Request(model="m", messages=[Message(role="user", parts=[TextPart("hi")])], reasoning=Reasoning(effort="medium"))
    wire = CODEC.encode_request(req, Context())
    assert wire["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert wire["max_tokens"] == 8192 + DEFAULT_MAX_TOKENS
    # an explicit limit is kept, and the budget is clamped under it
    req.max_tokens = 4000
    wire = CODEC.encode_request(req, Context())
    assert wire["max_tokens"] == 4000
    assert wire["thinking"]["budget_tokens"] == 3999


def test_tool_results_grouped_first_and_orphans_fixed():
    req = Request(
        model="m",
        messages=[
            Message("user", [TextPart("go")]),
            Message(
                "assistant",
                [
                    TextPart("calling"),
                    ToolCallPart("a", "f", '{"x":1}'),
                    ToolCallPart("b", "f", "{}"),
                    ToolCallPart("c", "f", "{}"),
                ],
            ),
            Message("user", [TextPart("note")]),
            Message("user", [ToolResultPart("b", [TextPart("rb")])]),
            Message(
                "user", [ToolResultPart("a", [TextPart("ra")], is_error=True), ToolResultPart("zz", [TextPart("lost")])]
            ),
            Message("assistant", [ToolCallPart("d", "g", "{}")]),
            Message("assistant", [TextPart("more")]),
        ],
    )
    wire, ctx = enc(req)
    msgs = wire["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    user = msgs[2]["content"]
    assert user[:3] == [
        {"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": "rb"}]},
        {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "ra"}], "is_error": True},
        {"type": "tool_result", "tool_use_id": "c", "content": UNANSWERED_TOOL_CALL, "is_error": True},
    ]
    assert user[3] == {"type": "text", "text": "[result of tool call zz]\nlost"}
    assert user[4] == {"type": "text", "text": "note"}
    assert msgs[1]["content"][1] == {"type": "tool_use", "id": "a", "name": "f", "input": {"x": 1}}
    assert msgs[3]["content"] == [
        {"type": "tool_use", "id": "d", "name": "g", "input": {}},
        {"type": "text", "text": "more"},
    ]
    assert msgs[4]["content"] == [
        {"type": "tool_result", "tool_use_id": "d", "content": UNANSWERED_TOOL_CALL, "is_error": True}
    ]
    assert {"orphaned_tool_result", "unanswered_tool_use"} <= set(ctx.dropped.fields)


def test_thinking_history_variants():
    anth = carry.wrap_anthropic("SIG", "carried text")
    red = carry.wrap_anthropic(None, "", redacted_data="RED")
    req = Request(
        model="m",
        messages=[
            Message("user", [TextPart("q")]),
            Message(
                "assistant",
                [
                    ThinkingPart("native", signature="nsig"),
                    ThinkingPart(redacted_data="opaque"),
                    ThinkingPart(encrypted_content=anth, summary=True),
                    ThinkingPart(encrypted_content=red),
                    ThinkingPart("from chat"),
                    ThinkingPart("resp", encrypted_content="gAAA", item_id="rs_1"),
                    ThinkingPart("bad", signature=carry.UNSIGNED),
                    TextPart("answer"),
                ],
            ),
        ],
    )
    wire, ctx = enc(req)
    assert wire["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "native", "signature": "nsig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "thinking", "thinking": "carried text", "signature": "SIG"},
        {"type": "redacted_thinking", "data": "RED"},
        {"type": "text", "text": "answer"},
    ]
    assert ctx.dropped.fields == ["thinking_without_signature"]


def test_custom_and_builtin_tools():
    req = Request(
        model="m",
        messages=[
            Message("user", [TextPart("q")]),
            Message("assistant", [ToolCallPart("c1", "apply_patch", "*** Begin Patch\n", kind="custom")]),
            Message("user", [ToolResultPart("c1", [TextPart("done")], kind="custom")]),
        ],
        tools=[
            Tool(
                "apply_patch",
                "Apply a patch",
                kind="custom",
                format={"type": "grammar", "syntax": "lark", "definition": "start: x"},
            ),
            Tool(
                "web_search", kind="builtin", raw={"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
            ),
            Tool("web_search", kind="builtin", raw={"type": "web_search"}),
            Tool("f", parameters=None, strict=True),
        ],
        tool_choice=ToolChoice("any"),
        parallel_tool_calls=False,
    )
    wire, ctx = enc(req)
    custom, server, f = wire["tools"]
    assert custom["name"] == "apply_patch" and custom["description"] == "Apply a patch"
    schema = custom["input_schema"]
    assert schema["required"] == ["input"] and schema["properties"]["input"]["type"] == "string"
    assert "lark" in schema["properties"]["input"]["description"]
    assert server == {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    assert f == {"name": "f", "input_schema": {"type": "object", "properties": {}}}
    assert wire["messages"][1]["content"][0]["input"] == {"input": "*** Begin Patch\n"}
    assert wire["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert {"tools.builtin.web_search", "tools.strict"} <= set(ctx.dropped.fields)


def test_sampling_user_stop_images_files_and_format():
    req = Request(
        model="m",
        messages=[
            Message(
                "user",
                [
                    ImagePart(data="AAAA", media_type="image/jpeg"),
                    ImagePart(url="https://x/i.png"),
                    ImagePart(url="data:image/gif;base64,R0lG"),
                    FilePart(data="JVBE", media_type="application/pdf", filename="f.pdf"),
                    FilePart(data="aGVsbG8=", media_type="text/plain"),
                    FilePart(url="https://x/doc.pdf"),
                ],
            )
        ],
        max_tokens=321,
        temperature=0.3,
        top_p=0.8,
        top_k=4,
        stop=["END"],
        stream=True,
        user="u9",
        response_format=ResponseFormat(type="json_schema", name="x", schema={"type": "object"}),
    )
    wire, ctx = enc(req)
    assert wire["messages"][0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/i.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lG"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
            "title": "f.pdf",
        },
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}},
        {"type": "document", "source": {"type": "url", "url": "https://x/doc.pdf"}},
    ]
    assert (wire["max_tokens"], wire["temperature"], wire["top_p"], wire["top_k"]) == (321, 0.3, 0.8, 4)
    assert wire["stop_sequences"] == ["END"] and wire["stream"] is True
    assert wire["metadata"] == {"user_id": "u9"}
    assert wire["output_config"] == {"format": {"type": "json_schema", "schema": {"type": "object"}}}
    assert ctx.dropped.fields == []
    _, ctx = enc(Request(model="m", response_format=ResponseFormat(type="json_object")))
    assert ctx.dropped.fields == ["response_format.json_object"]


@pytest.mark.parametrize(
    "reasoning,max_tokens,thinking,effort",
    [
        (Reasoning(effort="high"), 64000, {"type": "enabled", "budget_tokens": 16384}, None),
        (Reasoning(effort="minimal"), None, {"type": "enabled", "budget_tokens": 1024}, None),
        (Reasoning(effort="xhigh"), 20000, {"type": "enabled", "budget_tokens": 19999}, None),
        (Reasoning(effort="medium"), 1000, None, None),
        (Reasoning(enabled=True, budget_tokens=5000), 8000, {"type": "enabled", "budget_tokens": 5000}, None),
        (Reasoning(enabled=True, adaptive=True, effort="high"), 8000, {"type": "adaptive"}, "high"),
        (Reasoning(enabled=False), 8000, {"type": "disabled"}, None),
        (Reasoning(effort="none"), 8000, {"type": "disabled"}, None),
    ],
)
def test_reasoning_mapping(reasoning, max_tokens, thinking, effort):
    req = Request(
        model="m",
        messages=[Message("user", [TextPart("q")])],
        reasoning=reasoning,
        max_tokens=max_tokens,
        temperature=0.2,
    )
    wire, ctx = enc(req)
    assert wire.get("thinking") == thinking
    assert wire.get("output_config", {}).get("effort") == effort
    on = thinking is not None and thinking["type"] != "disabled"
    assert ("temperature" in wire) == (not on)
    assert ("temperature" in ctx.dropped.fields) == on


# ---------------------------------------------------------------- whole responses


def test_encode_response():
    resp = Response(
        id="chatcmpl-1",
        model="gpt",
        content=[
            ThinkingPart("r1", encrypted_content="ENC", item_id="rs_1"),
            ThinkingPart("r2"),
            ThinkingPart("r3", signature="native"),
            ThinkingPart(redacted_data="RD"),
            TextPart("hello"),
            RefusalPart("no"),
            ToolCallPart("call_1", "f", '{"a":1}'),
            ToolCallPart("call_2", "apply_patch", 'raw "text"', kind="custom"),
        ],
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=120, output_tokens=9, cache_read_tokens=100, cache_creation_tokens=5),
    )
    out = CODEC.encode_response(resp, Context())
    assert out["id"] == "msg_chatcmpl-1" and out["type"] == "message" and out["role"] == "assistant"
    assert out["content"] == [
        {"type": "thinking", "thinking": "r1", "signature": carry.wrap_responses("rs_1", "ENC")},
        {"type": "thinking", "thinking": "r2", "signature": carry.UNSIGNED},
        {"type": "thinking", "thinking": "r3", "signature": "native"},
        {"type": "redacted_thinking", "data": "RD"},
        {"type": "text", "text": "hello"},
        {"type": "text", "text": "no"},
        {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}},
        {"type": "tool_use", "id": "call_2", "name": "apply_patch", "input": {"input": 'raw "text"'}},
    ]
    assert out["stop_reason"] == "tool_use" and out["stop_sequence"] is None
    assert out["usage"] == {
        "input_tokens": 15,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 100,
        "output_tokens": 9,
    }
    assert CODEC.encode_response(Response(id="msg_x", model="m"), Context())["id"] == "msg_x"


@pytest.mark.parametrize("sample", samples("anthropic", stream=False, ok=True), ids=lambda s: s.name)
def test_response_round_trip(sample):
    body = json.loads(sample.body)
    ctx = Context()
    out = CODEC.encode_response(CODEC.decode_response(body, ctx), ctx)
    modelled = [b for b in body["content"] if b["type"] in ("text", "thinking", "redacted_thinking", "tool_use")]
    assert [{k: v for k, v in b.items() if k != "citations"} for b in modelled] == out["content"]
    assert out["id"] == body["id"] and out["stop_reason"] == body["stop_reason"]
    for k in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        assert out["usage"][k] == (body["usage"].get(k) or 0)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kind,etype",
    [
        (ErrorKind.INVALID_REQUEST, "invalid_request_error"),
        (ErrorKind.AUTHENTICATION, "authentication_error"),
        (ErrorKind.PERMISSION, "permission_error"),
        (ErrorKind.NOT_FOUND, "not_found_error"),
        (ErrorKind.REQUEST_TOO_LARGE, "request_too_large"),
        (ErrorKind.RATE_LIMIT, "rate_limit_error"),
        (ErrorKind.API_ERROR, "api_error"),
        (ErrorKind.OVERLOADED, "overloaded_error"),
        (ErrorKind.TIMEOUT, "timeout_error"),
        (ErrorKind.UPSTREAM_PROTOCOL, "api_error"),
    ],
)
def test_encode_error(kind, etype):
    out = CODEC.encode_error(ErrorInfo(kind, "boom", request_id="req_7"))
    assert out == {"type": "error", "error": {"type": etype, "message": "boom"}, "request_id": "req_7"}
    assert "request_id" not in CODEC.encode_error(ErrorInfo(kind, "boom"))


@pytest.mark.parametrize("sample", samples("anthropic", stream=False, ok=False), ids=lambda s: s.name)
def test_error_round_trip(sample):
    info = CODEC.decode_error(sample.status, sample.body, {})
    assert CODEC.encode_error(info) == json.loads(sample.body)


# ---------------------------------------------------------------- streams


def translate(body_pieces, ctx=None):
    ctx = ctx or Context()
    tr = StreamTranslator(CODEC.stream_decoder(ctx), CODEC.stream_encoder(ctx))
    return run_stream(tr, body_pieces), tr


def _norm(blocks):
    for b in blocks:
        if b["sig"] == "":
            b["sig"] = None
    return blocks


@pytest.mark.parametrize("sample", STREAMS + [None], ids=[s.name for s in STREAMS] + ["claude-code-reply"])
def test_stream_self_round_trip(sample):
    body = sample.body if sample is not None else CC_REPLY
    expected = _norm(accumulate_raw(body))
    outputs = set()
    for _, pieces in chunkings(body):
        out, tr = translate(pieces)
        assert tr.error_info is None
        outputs.add(out)
    assert len(outputs) == 1
    out = outputs.pop()
    evs = check_wire_order(out)
    got = _norm(accumulate_raw(out))
    for b in expected:
        if b["type"] == "thinking" and b["sig"] is None:
            b["sig"] = carry.UNSIGNED
    assert got == expected
    raw = [o for o in _events(body)]
    start_in = next(o for o in raw if o["type"] == "message_start")["message"]
    start_out = evs[0]["message"]
    assert start_out["id"] == start_in["id"] and start_out["model"] == start_in["model"]
    for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        assert start_out["usage"][k] == (start_in["usage"].get(k) or 0)
    delta_in = next(o for o in raw if o["type"] == "message_delta")
    assert evs[-2]["delta"]["stop_reason"] == delta_in["delta"]["stop_reason"]
    assert evs[-2]["usage"]["output_tokens"] == delta_in["usage"]["output_tokens"]


def _events(body):
    return [o for _, o in sse_events(body)]


def encode_ir(events, ctx=None):
    e = CODEC.stream_encoder(ctx or Context())
    return b"".join(e.encode(ev) for ev in events) + e.close()


def test_interleaved_tool_calls_come_out_sequential():
    events = [
        MessageStart("chatcmpl-9", "gpt", Usage(input_tokens=50, cache_read_tokens=20)),
        BlockStart(0, BlockKind.TEXT),
        TextDelta(0, "Let me check."),
        BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="call_a", name="weather"),
        ToolArgsDelta(1, '{"city":'),
        BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="call_b", name="time"),
        ToolArgsDelta(2, '{"tz":'),
        ToolArgsDelta(1, '"Paris"}'),
        BlockStart(3, BlockKind.TOOL_CALL, tool_call_id="call_c", name="news"),
        ToolArgsDelta(3, "{}"),
        ToolArgsDelta(2, '"CET"}'),
        BlockStop(2),
        BlockStop(3),
        BlockStop(1),
        BlockStop(0),
        MessageDelta(StopReason.TOOL_USE, Usage(input_tokens=50, output_tokens=30, cache_read_tokens=20)),
        MessageStop(),
    ]
    out = encode_ir(events)
    evs = check_wire_order(out)
    blocks = accumulate_raw(out)
    assert [(b["type"], b.get("id"), b["args"], b["text"]) for b in blocks] == [
        ("text", None, "", "Let me check."),
        ("tool_use", "call_a", '{"city":"Paris"}', ""),
        ("tool_use", "call_b", '{"tz":"CET"}', ""),
        ("tool_use", "call_c", "{}", ""),
    ]
    assert evs[0]["message"]["id"] == "msg_chatcmpl-9"
    assert evs[0]["message"]["usage"] == {
        "input_tokens": 30,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 20,
        "output_tokens": 0,
    }
    assert evs[-2]["usage"] == {
        "input_tokens": 30,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 20,
        "output_tokens": 30,
    }
    assert evs[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}


def test_text_interrupted_and_resumed_opens_a_fresh_block():
    events = [
        MessageStart("msg_1", "m"),
        BlockStart(0, BlockKind.THINKING),
        ThinkingDelta(0, "think"),
        BlockStart(1, BlockKind.TEXT),
        TextDelta(1, "a"),
        SignatureDelta(0, signature="late"),
        ThinkingDelta(0, " more"),
        BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="t", name="f"),
        TextDelta(1, "b"),
        ToolArgsDelta(2, "{}"),
        BlockStop(0),
        BlockStop(2),
        BlockStop(1),
        MessageDelta(StopReason.TOOL_USE),
        MessageStop(),
    ]
    out = encode_ir(events)
    check_wire_order(out)
    blocks = accumulate_raw(out)
    assert [(b["type"], b["text"], b["sig"]) for b in blocks] == [
        ("thinking", "think", carry.UNSIGNED),
        ("text", "a", None),
        ("thinking", " more", "late"),
        ("tool_use", "", None),
        ("text", "b", None),
    ]


def test_thinking_signatures_and_redacted_and_custom_tool():
    events = [
        MessageStart("resp_1", "m"),
        BlockStart(0, BlockKind.THINKING, item_id="rs_1"),
        ThinkingDelta(0, "summary", summary=True),
        SignatureDelta(0, encrypted_content="ENC"),
        BlockStop(0),
        BlockStart(1, BlockKind.REDACTED_THINKING, data="RD"),
        BlockStop(1),
        BlockStart(2, BlockKind.CUSTOM_TOOL_CALL, tool_call_id="call_p", name="apply_patch"),
        ToolArgsDelta(2, '*** Begin "Patch"\n'),
        ToolArgsDelta(2, "\\ é 𝄞"),
        BlockStop(2),
        BlockStart(3, BlockKind.REFUSAL),
        TextDelta(3, "I can't"),
        BlockStop(3),
        MessageDelta(StopReason.REFUSAL),
        MessageStop(),
    ]
    out = encode_ir(events)
    evs = check_wire_order(out)
    assert evs[0]["message"]["id"] == "msg_resp_1"
    blocks = accumulate_raw(out)
    assert blocks[0]["sig"] == carry.wrap_responses("rs_1", "ENC")
    assert blocks[1]["data"] == "RD"
    assert json.loads(blocks[2]["args"]) == {"input": '*** Begin "Patch"\n\\ é 𝄞'}
    assert blocks[3] == {"type": "text", "text": "I can't", "args": "", "sig": None}
    # and the signature carries back through the decoder
    dec = CODEC.stream_decoder(Context())
    sse = SSEDecoder()
    ir = [e for s in sse.feed(out) for e in dec.feed(s)]
    assert SignatureDelta(0, encrypted_content="ENC") in ir


def test_empty_message_and_missing_message_delta():
    out = encode_ir([MessageStart("x", "m"), MessageDelta(StopReason.REFUSAL, Usage(output_tokens=3)), MessageStop()])
    names = [line for line in out.split(b"\n") if line.startswith(b"event:")]
    assert names == [b"event: message_start", b"event: ping", b"event: message_delta", b"event: message_stop"]
    out = encode_ir([MessageStart("x", "m"), BlockStart(0, BlockKind.TEXT), TextDelta(0, "hi"), MessageStop()])
    evs = check_wire_order(out)
    assert evs[-2]["delta"]["stop_reason"] == "end_turn"


def test_encoder_order_errors():
    e = CODEC.stream_encoder(Context())
    e.encode(MessageStart("x", "m"))
    with pytest.raises(UpstreamProtocolError, match="duplicate MessageStart"):
        e.encode(MessageStart("x", "m"))
    with pytest.raises(UpstreamProtocolError, match="unknown block index 5"):
        e.encode(TextDelta(5, "x"))
    e.encode(BlockStart(0, BlockKind.TEXT))
    with pytest.raises(UpstreamProtocolError, match="duplicate BlockStart"):
        e.encode(BlockStart(0, BlockKind.TEXT))


def test_encoder_error_frame_and_sdk_raises():
    e = CODEC.stream_encoder(Context())
    head = e.encode(MessageStart("x", "m")) + e.encode(BlockStart(0, BlockKind.TEXT)) + e.encode(TextDelta(0, "par"))
    frame = e.encode(StreamError(ErrorInfo(ErrorKind.OVERLOADED, "Overloaded", request_id="req_1")))
    assert (
        frame
        == b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}\n\n'
    )
    assert e.encode(TextDelta(0, "more")) == b"" and e.close() == b""
    anthropic, httpx = _sdk()
    client = _client(anthropic, httpx, head + frame)
    with pytest.raises(anthropic.APIStatusError) as err:
        with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
            s.get_final_message()
    assert err.value.body["error"]["type"] == "overloaded_error"


def test_translator_turns_upstream_error_event_into_client_error_frame():
    body = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1}}}\n\n'
        b'event: error\ndata: {"type":"error","error":{"type":"rate_limit_error","message":"slow"}}\n\n'
    )
    for _, pieces in chunkings(body):
        out, tr = translate(pieces)
        assert out.endswith(
            b'event: error\ndata: {"type":"error","error":{"type":"rate_limit_error","message":"slow"}}\n\n'
        )
        assert tr.error_info.kind is ErrorKind.RATE_LIMIT


def test_translator_reports_an_early_end():
    body = b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"m"}}\n\n'
    out, tr = translate([body])
    assert b"event: error" in out and "STREAMING" in tr.error_info.message
    assert tr.error_info.kind is ErrorKind.UPSTREAM_PROTOCOL


# ---------------------------------------------------------------- the official SDK's accumulator


def _sdk():
    anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK is not installed")
    try:
        import httpx2 as httpx
    except ImportError:  # older SDKs use httpx
        httpx = pytest.importorskip("httpx", reason="httpx is not installed")
    return anthropic, httpx


def _client(anthropic, httpx, body: bytes):
    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return anthropic.Anthropic(
        api_key="test",
        base_url="http://127.0.0.1:9",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def _final(body: bytes):
    anthropic, httpx = _sdk()
    client = _client(anthropic, httpx, body)
    with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
        return s.get_final_message()


@pytest.mark.parametrize("sample", STREAMS + [None], ids=[s.name for s in STREAMS] + ["claude-code-reply"])
def test_sdk_accumulates_our_output(sample):
    body = sample.body if sample is not None else CC_REPLY
    out, _ = translate([body])
    msg = _final(out)
    expected = _norm(accumulate_raw(body))
    assert len(msg.content) == len(expected)
    for block, exp in zip(msg.content, expected):
        assert block.type == exp["type"]
        if exp["type"] == "text":
            assert block.text == exp["text"]
        elif exp["type"] == "thinking":
            assert block.thinking == exp["text"]
            assert block.signature == (exp["sig"] or carry.UNSIGNED)
        elif exp["type"] == "redacted_thinking":
            assert block.data == exp["data"]
        else:
            assert block.id == exp["id"] and block.name == exp["name"]
            if exp["args"]:
                try:
                    args = orjson.loads(exp["args"])
                except orjson.JSONDecodeError:  # the max_tokens sample ends mid-JSON
                    continue
                assert block.input == args
            else:
                assert block.input == {}
    raw = _events(body)
    assert msg.stop_reason == next(o for o in raw if o["type"] == "message_delta")["delta"]["stop_reason"]
    assert msg.id == next(o for o in raw if o["type"] == "message_start")["message"]["id"]


def test_sdk_accumulates_interleaved_tool_calls():
    events = [
        MessageStart("chatcmpl-1", "gpt"),
        BlockStart(0, BlockKind.THINKING),
        ThinkingDelta(0, "plan"),
        BlockStop(0),
        BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="call_a", name="a"),
        BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="call_b", name="b"),
        ToolArgsDelta(2, '{"y": [1, '),
        ToolArgsDelta(1, '{"x": "é'),
        ToolArgsDelta(2, "2]}"),
        ToolArgsDelta(1, '"}'),
        BlockStart(3, BlockKind.CUSTOM_TOOL_CALL, tool_call_id="call_c", name="apply_patch"),
        ToolArgsDelta(3, 'line "1"\n'),
        BlockStop(1),
        BlockStop(2),
        BlockStop(3),
        MessageDelta(StopReason.TOOL_USE, Usage(input_tokens=10, output_tokens=4)),
        MessageStop(),
    ]
    msg = _final(encode_ir(events))
    assert [b.type for b in msg.content] == ["thinking", "tool_use", "tool_use", "tool_use"]
    assert msg.content[0].thinking == "plan" and msg.content[0].signature == carry.UNSIGNED
    assert msg.content[1].id == "call_a" and msg.content[1].input == {"x": "é"}
    assert msg.content[2].id == "call_b" and msg.content[2].input == {"y": [1, 2]}
    assert msg.content[3].input == {"input": 'line "1"\n'}
    assert msg.stop_reason == "tool_use" and msg.usage.output_tokens == 4 and msg.usage.input_tokens == 10


def test_pending_tool_call_is_buffered_as_joined_text():
    """A tool call whose deltas arrive while another tool block is open is buffered as text pieces
    (compacted), not one IR object per fragment (issue 6), and replays its full arguments."""
    from dragoman.protocols.anthropic_messages.stream_hold import Run

    e = CODEC.stream_encoder(Context())
    head = [
        MessageStart("m1", "gpt"),
        BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="call_a", name="a"),
        BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="call_b", name="b"),
    ]
    out = b"".join(e.encode(ev) for ev in head)
    frags_a = ['{"x":"', *["a"] * 3000, '"}']
    frags_b = ['{"y":"', *["é"] * 3000, '"}']
    for fa, fb in zip(frags_a, frags_b):
        out += e.encode(ToolArgsDelta(0, fa))
        out += e.encode(ToolArgsDelta(1, fb))
    buffered = e._blocks[1].buffer
    assert len(buffered) == 1 and type(buffered[0]) is Run
    assert len(buffered[0].parts) <= 3002 // 256 + 256  # compacted, not one piece per fragment
    for ev in (BlockStop(0), BlockStop(1), MessageDelta(StopReason.TOOL_USE, Usage(output_tokens=9)), MessageStop()):
        out += e.encode(ev)
    out += e.close()
    check_wire_order(out)
    blocks = accumulate_raw(out)
    assert [(b["id"], b["args"]) for b in blocks] == [("call_a", "".join(frags_a)), ("call_b", "".join(frags_b))]


def test_delta_fast_path_bytes_match_encode_json():
    """The prebuilt delta prefix produces exactly what encode_json of the event dict produces."""
    from dragoman.sse import encode_json

    e = CODEC.stream_encoder(Context())
    e.encode(MessageStart("m1", "claude"))
    e.encode(BlockStart(0, BlockKind.THINKING))
    got = e.encode(ThinkingDelta(0, 'q"\\\n€'))
    want = encode_json(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": 'q"\\\n€'}},
    )
    assert got == want
    e.encode(BlockStart(1, BlockKind.TEXT))  # closes the thinking block; text opens at wire index 1
    got = e.encode(TextDelta(1, "hé"))
    assert got == encode_json(
        "content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "hé"}}
    )
