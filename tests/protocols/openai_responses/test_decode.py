"""Responses requests, whole responses and errors -> IR (corpus, Codex captures, hand-made cases)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from conftest import chunkings
from corpus_loader import requests
from corpus_loader import samples
from dragoman.errors import ClientRequestError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import StopReason
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
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import CODEC
from dragoman.protocols.openai_responses.decode import EXTRA_NAMESPACES
from dragoman.sse import SSEDecoder

DATA = Path(__file__).parent / "data"
CODEX = sorted(DATA.glob("*.request.json"))
REQS = requests("openai-responses")


def _codex(name: str) -> dict:
    return json.loads((DATA / f"{name}.request.json").read_text())


@pytest.mark.parametrize("name,proto,body", REQS, ids=[r[0] for r in REQS])
def test_corpus_requests_decode_and_reencode(name, proto, body):
    req = CODEC.decode_request(body)
    assert req.model == body["model"]
    out = CODEC.encode_request(req, Context(request=req))
    assert out["model"] == body["model"]
    # every message/function item of the source survives the round trip
    src = body["input"] if isinstance(body["input"], list) else [{"type": "message"}]
    kinds = {"message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output", None}
    n_src = sum(1 for it in src if it.get("type") in kinds)
    n_out = sum(1 for it in out["input"] if it["type"] in kinds)
    n_sys = 1 if "instructions" in out else 0
    assert n_out + n_sys >= min(n_src, 1)
    assert bool(out.get("stream")) == bool(body.get("stream"))


@pytest.mark.parametrize("path", CODEX, ids=[p.name for p in CODEX])
def test_codex_requests_decode_and_reencode(path):
    body = json.loads(path.read_text())
    req = CODEC.decode_request(body)
    assert req.system and "Codex" in req.system[0].text  # leading developer messages
    assert req.messages[0].role == "user"
    names = {t.name for t in req.tools}
    assert {"store", "include", "prompt_cache_key", "client_metadata"} <= set(req.dropped.fields)
    out = CODEC.encode_request(req, Context(request=req))
    assert out["store"] is False
    assert out["instructions"].startswith(req.system[0].text[:50])
    assert all(t["name"] in names for t in out["tools"] if t["type"] in ("function", "custom"))


def test_codex_code_mode_tools_and_custom_calls():
    req = CODEC.decode_request(_codex("cx-tool-default"))
    by_name = {t.name: t for t in req.tools}
    assert by_name["exec"].kind == "custom" and by_name["exec"].format["syntax"] == "lark"
    assert by_name["sleep"].kind == "function"
    assert req.custom_tool_names() == {"exec"}
    # the namespace map keeps non-default namespaces (Codex calls "functions" tools by bare name)
    ns = req.extra[EXTRA_NAMESPACES]
    assert ns["sleep"] == ("clock", "sleep") and "exec" not in ns
    calls = [p for m in req.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert calls[0].kind == "custom" and calls[0].name == "exec" and calls[0].arguments.startswith("const r")
    assert calls[0].item_id.startswith("ctc_")
    results = [p for m in req.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert results[0].kind == "custom" and results[0].tool_call_id == calls[0].id
    assert len(results[0].content) == 2 and all(isinstance(c, TextPart) for c in results[0].content)
    assert req.reasoning.effort == "low" and "reasoning.context" in req.dropped.fields
    assert req.parallel_tool_calls is False


def test_codex_reasoning_and_function_call_grouping():
    req = CODEC.decode_request(_codex("cx-tool-claude-sonnet-4-5"))
    asst = [m for m in req.messages if m.role == "assistant"]
    assert len(asst) == 1
    thinking, call = asst[0].parts
    assert isinstance(thinking, ThinkingPart) and thinking.encrypted_content.startswith("fake-encrypted-")
    assert thinking.item_id.startswith("rs_") and thinking.summary and "Greeting" in thinking.text
    assert isinstance(call, ToolCallPart) and call.name == "exec_command" and call.item_id.startswith("fc_")
    assert req.messages[-1].role == "user"
    assert isinstance(req.messages[-1].parts[0], ToolResultPart)
    # namespace tools are flattened
    assert {"close_agent", "spawn_agent"} <= {t.name for t in req.tools}
    builtin = [t for t in req.tools if t.kind == "builtin"]
    assert [t.name for t in builtin] == ["web_search"]
    # re-encode: the reasoning item keeps its native encrypted content and id, then the call
    out = CODEC.encode_request(req, Context(request=req))
    types = [it["type"] for it in out["input"]]
    assert types[-3:] == ["reasoning", "function_call", "function_call_output"]
    rs = out["input"][-3]
    assert rs["encrypted_content"] == thinking.encrypted_content and rs["id"] == thinking.item_id


def test_namespace_collision_gets_prefixed_and_resolves_calls():
    body = {
        "model": "m",
        "tools": [
            {"type": "function", "name": "spawn", "parameters": {}},
            {"type": "namespace", "name": "agents", "tools": [{"type": "function", "name": "spawn", "parameters": {}}]},
        ],
        "input": [
            {"type": "function_call", "call_id": "c1", "name": "spawn", "namespace": "agents", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ],
    }
    req = CODEC.decode_request(body)
    assert [t.name for t in req.tools] == ["spawn", "agents__spawn"]
    assert req.messages[0].parts[0].name == "agents__spawn"
    assert req.extra[EXTRA_NAMESPACES] == {"agents__spawn": ("agents", "spawn")}


def test_previous_response_id_rejected():
    with pytest.raises(ClientRequestError, match="previous_response_id is not supported yet"):
        CODEC.decode_request({"model": "m", "input": "hi", "previous_response_id": "resp_1"})


def test_invalid_request_is_client_error():
    with pytest.raises(ClientRequestError):
        CODEC.decode_request({"input": "no model"})
    with pytest.raises(ClientRequestError):
        CODEC.decode_request({"model": "m", "input": [{"type": "message", "role": "robot", "content": "x"}]})


def test_string_input_images_files_and_options():
    req = CODEC.decode_request({"model": "m", "input": "hello", "instructions": "be nice", "stream": True})
    assert req.system[0].text == "be nice" and req.messages[0].parts[0].text == "hello" and req.stream
    body = {
        "model": "m",
        "input": [
            {"role": "developer", "content": "sys"},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "look"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                    {"type": "input_image", "file_id": "file-1"},
                    {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"},
                    {"type": "input_file", "file_id": "file-2"},
                    {"type": "input_audio", "input_audio": {}},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hi"}, {"type": "refusal", "refusal": "no"}],
            },
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "mid"}]},
            {"type": "item_reference", "id": "x"},
        ],
        "tool_choice": {"type": "function", "name": "f"},
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}],
        "reasoning": {"effort": "high", "summary": "detailed"},
        "max_output_tokens": 100,
        "temperature": 0.5,
        "top_p": 0.9,
        "text": {
            "format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}, "strict": True},
            "verbosity": "low",
        },
        "safety_identifier": "u1",
        "store": False,
        "metadata": {"a": "b"},
    }
    req = CODEC.decode_request(body)
    assert req.system[0].text == "sys"
    user = req.messages[0].parts
    assert (
        isinstance(user[1], ImagePart)
        and user[1].data == "AAAA"
        and user[1].media_type == "image/png"
        and user[1].detail == "high"
    )
    assert user[2].url == "https://x/y.png" and user[3].file_id == "file-1"
    assert isinstance(user[4], FilePart) and user[4].media_type == "application/pdf" and user[4].data == "JVBE"
    assert user[5].file_id == "file-2"
    assert "content.input_audio" in req.dropped.fields and "input.item_reference" in req.dropped.fields
    assert req.messages[2].role == "system" and req.messages[2].source_role == "developer"
    assert req.tool_choice.mode == "tool" and req.tool_choice.name == "f"
    assert req.reasoning.effort == "high" and req.reasoning.summary == "detailed"
    assert (req.max_tokens, req.temperature, req.top_p, req.user) == (100, 0.5, 0.9, "u1")
    assert req.response_format.type == "json_schema" and req.response_format.strict is True
    assert {"store", "metadata", "text.verbosity"} <= set(req.dropped.fields)
    out = CODEC.encode_request(req, Context(request=req))
    assert out["instructions"] == "sys"
    assert out["input"][0]["content"][1] == {
        "type": "input_image",
        "detail": "high",
        "image_url": "data:image/png;base64,AAAA",
    }
    assert out["input"][2]["role"] == "developer"
    assert out["tool_choice"] == {"type": "function", "name": "f"}
    assert out["text"]["format"]["name"] == "s"
    assert out["reasoning"] == {"effort": "high", "summary": "detailed"} and out["include"] == [
        "reasoning.encrypted_content"
    ]


@pytest.mark.parametrize(
    "choice,mode", [("auto", "auto"), ("none", "none"), ("required", "any"), ({"type": "custom", "name": "x"}, "tool")]
)
def test_tool_choice(choice, mode):
    req = CODEC.decode_request({"model": "m", "input": "x", "tool_choice": choice})
    assert req.tool_choice.mode == mode


def test_carried_anthropic_reasoning_is_unwrapped():
    enc = carry.wrap_anthropic("SIG123", "I think", None)
    red = carry.wrap_anthropic(None, "", "REDACTED")
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": "q"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "I think"}],
                "encrypted_content": enc,
            },
            {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": red},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        ],
    }
    req = CODEC.decode_request(body)
    parts = req.messages[1].parts
    assert parts[0].signature == "SIG123" and parts[0].text == "I think" and parts[0].encrypted_content is None
    assert parts[1].redacted_data == "REDACTED" and parts[1].signature is None
    # foreign (carried) reasoning never goes to a Responses upstream
    ctx = Context(request=req)
    out = CODEC.encode_request(req, ctx)
    assert [it["type"] for it in out["input"]] == ["message", "message"]
    assert "thinking" in ctx.dropped.fields


# ------------------------------------------------------------------ whole responses and errors

OK_BODIES = samples("openai-responses", stream=False, ok=True)
ERR_BODIES = samples("openai-responses", ok=False)


@pytest.mark.parametrize("s", OK_BODIES, ids=[s.name for s in OK_BODIES])
def test_corpus_whole_responses(s):
    body = orjson.loads(s.body)
    ctx = Context()
    resp = CODEC.decode_response(body, ctx)
    assert resp.id == body["id"]
    texts = [
        c["text"]
        for it in body["output"]
        if it["type"] == "message"
        for c in it["content"]
        if c["type"] == "output_text"
    ]
    assert [p.text for p in resp.content if type(p) is TextPart] == texts
    calls = [it["call_id"] for it in body["output"] if it["type"] == "function_call"]
    assert [p.id for p in resp.content if isinstance(p, ToolCallPart)] == calls
    assert resp.stop_reason is (StopReason.TOOL_USE if calls else StopReason.END_TURN)
    assert resp.usage.input_tokens == body["usage"]["input_tokens"]
    assert resp.usage.cache_read_tokens == body["usage"]["input_tokens_details"]["cached_tokens"]
    assert resp.usage.reasoning_tokens == body["usage"]["output_tokens_details"]["reasoning_tokens"]
    enc = [it.get("encrypted_content") for it in body["output"] if it["type"] == "reasoning"]
    assert [p.encrypted_content for p in resp.content if isinstance(p, ThinkingPart)] == enc


def test_incomplete_whole_response():
    body = {
        "id": "resp_1",
        "model": "m",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [],
    }
    assert CODEC.decode_response(body, Context()).stop_reason is StopReason.MAX_TOKENS
    body["incomplete_details"] = {"reason": "content_filter"}
    assert CODEC.decode_response(body, Context()).stop_reason is StopReason.REFUSAL


@pytest.mark.parametrize("s", ERR_BODIES, ids=[s.name for s in ERR_BODIES])
def test_corpus_errors(s):
    info = CODEC.decode_error(s.status, s.body)
    err = orjson.loads(s.body)["error"]
    assert info.message == err["message"]
    assert info.status == s.status and info.kind is ErrorKind.INVALID_REQUEST
    assert info.code == (err.get("code") or err.get("type"))


def test_error_fallbacks():
    info = CODEC.decode_error(502, b"<html><title>Bad Gateway</title></html>")
    assert info.kind is ErrorKind.UPSTREAM_PROTOCOL and info.message == "Bad Gateway"
    info = CODEC.decode_error(429, b"", {"Retry-After": "3"})
    assert info.kind is ErrorKind.RATE_LIMIT and info.retry_after == "3"


# ------------------------------------------------------------------ stream decoder

STREAMS = samples("openai-responses", stream=True)
CODEX_STREAMS = sorted(DATA.glob("*.sse"))


def decode_stream(pieces: list[bytes], ctx: Context | None = None) -> list:
    dec = CODEC.stream_decoder(ctx or Context())
    sse = SSEDecoder()
    out = []
    for p in pieces:
        for ev in sse.feed(p):
            out.extend(dec.feed(ev))
    for ev in sse.close():
        out.extend(dec.feed(ev))
    out.extend(dec.close())
    return out


def accumulate_ir(events: list) -> dict:
    """Texts / thinking / arguments per block, in block-start order."""
    blocks: dict[int, dict] = {}
    for ev in events:
        if isinstance(ev, BlockStart):
            assert ev.index not in blocks
            blocks[ev.index] = {
                "kind": ev.kind.value,
                "id": ev.tool_call_id,
                "name": ev.name,
                "text": "",
                "open": True,
                "enc": None,
            }
        elif isinstance(ev, (TextDelta, ThinkingDelta)):
            assert blocks[ev.index]["open"]
            blocks[ev.index]["text"] += ev.text
        elif isinstance(ev, ToolArgsDelta):
            assert blocks[ev.index]["open"]
            blocks[ev.index]["text"] += ev.fragment
        elif isinstance(ev, SignatureDelta):
            blocks[ev.index]["enc"] = ev.encrypted_content
        elif isinstance(ev, BlockStop):
            assert blocks[ev.index]["open"]
            blocks[ev.index]["open"] = False
    assert not any(b["open"] for b in blocks.values())
    return blocks


def accumulate_raw(body: bytes) -> dict:
    """An independent reading of the raw events: final values per output item from the *.done events.

    Stops at the first terminal event (some recordings concatenate several responses)."""
    sse = SSEDecoder()
    texts, args, reasoning = [], [], []
    for ev in sse.feed(body) + sse.close():
        if ev.data == "[DONE]":
            continue
        obj = json.loads(ev.data)
        if obj["type"] in ("response.completed", "response.incomplete"):
            break
        if obj["type"] == "response.output_item.done":
            it = obj["item"]
            if it["type"] == "message":
                texts.extend(c["text"] for c in it["content"] if c["type"] == "output_text")
            elif it["type"] == "function_call":
                args.append((it["call_id"], it["name"], it["arguments"]))
            elif it["type"] == "custom_tool_call":
                args.append((it["call_id"], it["name"], it["input"]))
            elif it["type"] == "reasoning":
                reasoning.append(it.get("encrypted_content"))
    return {"texts": texts, "args": args, "reasoning": reasoning}


@pytest.mark.parametrize("s", STREAMS, ids=[s.name for s in STREAMS])
def test_corpus_streams_decode_over_chunkings(s):
    results = []
    for _, pieces in chunkings(s.body, seeds=2):
        results.append(decode_stream(pieces))
    assert all(r == results[0] for r in results)
    events = results[0]
    assert isinstance(events[0], MessageStart)
    if any(isinstance(e, StreamError) for e in events):
        assert sum(isinstance(e, StreamError) for e in events) == 1
        assert isinstance(events[-1], StreamError)
        assert events[-1].error.code == "insufficient_quota" and "quota" in events[-1].error.message
        return
    assert isinstance(events[-1], MessageStop) and isinstance(events[-2], MessageDelta)
    blocks = accumulate_ir(events)
    raw = accumulate_raw(s.body)
    assert [b["text"] for b in blocks.values() if b["kind"] == "text"] == raw["texts"]
    assert [
        (b["id"], b["name"], b["text"]) for b in blocks.values() if b["kind"] in ("tool_call", "custom_tool_call")
    ] == raw["args"]
    assert [b["enc"] for b in blocks.values() if b["kind"] == "thinking"] == raw["reasoning"]
    stop = events[-2].stop_reason
    assert stop is (StopReason.TOOL_USE if raw["args"] else StopReason.END_TURN)
    assert events[-2].usage is not None and events[-2].usage.output_tokens > 0


@pytest.mark.parametrize("path", CODEX_STREAMS, ids=[p.name for p in CODEX_STREAMS])
def test_codex_fake_streams_decode(path):
    body = path.read_bytes()
    events = decode_stream([body])
    blocks = accumulate_ir(events)
    raw = accumulate_raw(body)
    assert [
        (b["id"], b["name"], b["text"]) for b in blocks.values() if b["kind"] in ("tool_call", "custom_tool_call")
    ] == raw["args"]
    assert [b["text"] for b in blocks.values() if b["kind"] == "text"] == raw["texts"]


def _sse(*objs) -> bytes:
    return b"".join(b"event: " + o["type"].encode() + b"\ndata: " + orjson.dumps(o) + b"\n\n" for o in objs)


CREATED = {"type": "response.created", "response": {"id": "resp_1", "model": "m", "created_at": 5, "output": []}}
COMPLETED = {
    "type": "response.completed",
    "response": {"id": "resp_1", "model": "m", "status": "completed", "usage": {"input_tokens": 3, "output_tokens": 2}},
}


def test_done_without_deltas_emits_text_and_closes_open_blocks():
    body = _sse(
        CREATED,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "message", "id": "m1", "content": []},
        },
        {"type": "response.output_text.done", "item_id": "m1", "output_index": 0, "content_index": 0, "text": "Hello"},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "f"},
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc1", "output_index": 1, "delta": '{"a"'},
        {"type": "response.function_call_arguments.done", "item_id": "fc1", "output_index": 1, "arguments": '{"a":1}'},
        COMPLETED,
    )
    events = decode_stream([body])
    blocks = accumulate_ir(events)
    assert [b["text"] for b in blocks.values()] == ["Hello", '{"a":1}']
    assert events[-2].stop_reason is StopReason.TOOL_USE and events[-2].usage.input_tokens == 3
    assert events[0] == MessageStart(id="resp_1", model="m", created=5)


def test_item_done_only_and_summary_parts_separated():
    body = _sse(
        CREATED,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "reasoning", "id": "rs1", "summary": []},
        },
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs1",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs1",
            "output_index": 0,
            "summary_index": 0,
            "delta": "one",
        },
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs1",
            "output_index": 0,
            "summary_index": 1,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs1",
            "output_index": 0,
            "summary_index": 1,
            "delta": "two",
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "type": "reasoning",
                "id": "rs1",
                "summary": [{"type": "summary_text", "text": "one"}, {"type": "summary_text", "text": "two"}],
                "encrypted_content": "ENC",
            },
        },
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {"type": "message", "id": "m1", "content": [{"type": "output_text", "text": "hi"}]},
        },
        {"type": "response.output_item.done", "output_index": 2, "item": {"type": "web_search_call", "id": "ws1"}},
        {"type": "response.web_search_call.completed", "item_id": "ws1", "output_index": 2},
        COMPLETED,
        {"type": "response.something_after"},
    )
    ctx = Context()
    events = decode_stream([body, b"data: [DONE]\n\n"], ctx)
    blocks = list(accumulate_ir(events).values())
    assert blocks[0]["text"] == "one\n\ntwo" and blocks[0]["enc"] == "ENC"
    assert blocks[1]["text"] == "hi"
    assert all(isinstance(e, ThinkingDelta) and e.summary for e in events if isinstance(e, ThinkingDelta))
    assert "output.web_search_call" in ctx.dropped.fields
    assert events[-2].stop_reason is StopReason.END_TURN


def test_incomplete_maps_reason():
    inc = {
        "type": "response.incomplete",
        "response": {
            "id": "resp_1",
            "model": "m",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
        },
    }
    events = decode_stream([_sse(CREATED, inc)])
    assert events[-2].stop_reason is StopReason.MAX_TOKENS
    inc["response"]["incomplete_details"]["reason"] = "content_filter"
    assert decode_stream([_sse(CREATED, inc)])[-2].stop_reason is StopReason.REFUSAL


def test_error_then_failed_gives_one_stream_error():
    body = _sse(
        CREATED,
        {"type": "error", "code": "server_error", "message": "boom", "param": None},
        {
            "type": "response.failed",
            "response": {
                "id": "resp_1",
                "model": "m",
                "status": "failed",
                "error": {"code": "server_error", "message": "boom"},
            },
        },
    )
    events = decode_stream([body])
    errs = [e for e in events if isinstance(e, StreamError)]
    assert len(errs) == 1 and errs[0].error.code == "server_error" and errs[0].error.message == "boom"
    failed_only = decode_stream(
        [
            _sse(
                CREATED,
                {
                    "type": "response.failed",
                    "response": {
                        "id": "r",
                        "status": "failed",
                        "error": {"code": "rate_limit_exceeded", "message": "slow"},
                    },
                },
            )
        ]
    )
    assert failed_only[-1].error.kind is ErrorKind.RATE_LIMIT


def test_protocol_violations():
    with pytest.raises(UpstreamProtocolError, match="ended before"):
        decode_stream([_sse(CREATED)])
    with pytest.raises(UpstreamProtocolError, match="unknown output item"):
        decode_stream(
            [
                _sse(
                    CREATED,
                    {
                        "type": "response.output_text.delta",
                        "item_id": "nope",
                        "output_index": 7,
                        "content_index": 0,
                        "delta": "x",
                    },
                )
            ]
        )
    dup = {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"type": "message", "id": "m1", "content": []},
    }
    with pytest.raises(UpstreamProtocolError, match="duplicate"):
        decode_stream([_sse(CREATED, dup, dup)])
    with pytest.raises(UpstreamProtocolError, match="malformed"):
        decode_stream([_sse(CREATED, {"type": "response.output_text.delta", "item_id": "m1"})])
    with pytest.raises(UpstreamProtocolError, match="unknown Responses event"):
        decode_stream([_sse(CREATED, {"type": "response.brand_new"})], Context(strict=True))
