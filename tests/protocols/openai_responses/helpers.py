"""Helpers for the Responses codec tests: decode/encode a stream, accumulate raw events and IR, check
sequence numbers, run the official SDK's stream accumulator over bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import CODEC
from dragoman.sse import SSEDecoder

DATA = Path(__file__).parent / "data"


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
