"""A scriptable fake LLM upstream speaking all three protocols (stdlib only, HTTP/1.1, 127.0.0.1).

Used by the end-to-end tests and by the offline demo (``python -m dragoman fake-upstream``).

Endpoints (the protocol is chosen by the path; the query string is ignored):
  POST .../v1/messages        Anthropic Messages
  POST .../chat/completions   OpenAI Chat Completions
  POST .../responses          OpenAI Responses
  GET  /                      health check (200 "ok")

Streaming (``"stream": true`` in the body) answers ``text/event-stream`` with chunked transfer
encoding, ONE SSE event per HTTP chunk, flushed immediately.

The scenario is chosen per request by the header ``x-fake-scenario``, else by the model name when it
is a scenario name, else by the server default:
  text        a short text answer
  thinking    reasoning/thinking (Anthropic: thinking block with signature; Chat: ``reasoning_content``;
              Responses: a reasoning item with a summary and ``encrypted_content``), then text
  tools       two parallel function calls (get_weather Paris / get_time Tokyo); Chat and Responses
              INTERLEAVE the argument deltas of the two calls; Anthropic sends them one after the other
  error429    HTTP 429 with ``retry-after: 7`` and the protocol's error body
  midstream_error  a few text events, then the protocol's in-stream error event
  stall       the first text delta, then a pause of ``stall`` seconds (header ``x-fake-stall``), then the rest
  drop        a few text events, then the connection is closed without the terminating chunk
  length      the text, then a length stop (Anthropic ``max_tokens``, Chat ``length``, Responses
              ``response.incomplete`` with reason ``max_output_tokens``)
  custom      one call of a freeform (custom) tool ``apply_patch`` with a patch as raw input: Responses sends
              a native ``custom_tool_call``; Anthropic and Chat, which have no custom tools, call the function
              Dragoman offered for it, with the raw input in its one string property ``input``

Every request is remembered (``FakeUpstream.requests``: method, path, headers, parsed body) so tests
can check what reached the upstream.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from dataclasses import dataclass
from dataclasses import field
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)

SCENARIOS = ("text", "thinking", "tools", "error429", "midstream_error", "stall", "drop", "length", "custom")

TEXT_PIECES = ("Hello", " from", " the", " fake", " upstream", ".")
TEXT = "".join(TEXT_PIECES)
THINKING_PIECES = ("Let me", " think", " about", " this.")
THINKING = "".join(THINKING_PIECES)
SIGNATURE = "sig-fake-0123456789abcdef"
ENCRYPTED = "enc-fake-reasoning-blob"
TOOL_CALLS = (
    ("call_weather_1", "get_weather", ('{"city"', ': "Par', 'is", "unit"', ': "c"}')),
    ("call_time_2", "get_time", ('{"tz"', ': "Asia/', 'Tokyo"', "}")),
)
PATCH = '*** Begin Patch\n*** Add File: hello.txt\n+hello "world"\n*** End Patch'
_PATCH_ARGS = json.dumps({"input": PATCH})
CUSTOM_CALL = ("call_patch_1", "apply_patch", (_PATCH_ARGS[:20], _PATCH_ARGS[20:45], _PATCH_ARGS[45:]))


def _calls(scenario: str) -> tuple:
    """The function calls a scenario answers with (custom: the function standing in for the freeform tool)."""
    return TOOL_CALLS if scenario == "tools" else (CUSTOM_CALL,) if scenario == "custom" else ()


ERROR_429_MESSAGE = "Rate limited by the fake upstream, retry later"
MIDSTREAM_ERROR_MESSAGE = "The fake upstream broke down mid-stream"
USAGE_IN = 12
USAGE_OUT = 7


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""


@dataclass
class Reply:
    """What a scenario answers: a status, headers and either a JSON body or a list of SSE events."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    json_body: Any = None
    events: list[bytes] = field(default_factory=list)
    #: index in ``events`` after which the server pauses ``stall`` seconds (None: no pause)
    stall_after: int | None = None
    #: index in ``events`` after which the connection is dropped (None: a clean end)
    drop_after: int | None = None


def _sse(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def detect_protocol(path: str) -> str | None:
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/messages"):
        return "anthropic"
    if p.endswith("/chat/completions"):
        return "openai-chat"
    if p.endswith("/responses"):
        return "openai-responses"
    return None


# -- Anthropic Messages --------------------------------------------------------------------------


def _anthropic_error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_reply(scenario: str, model: str, stream: bool) -> Reply:
    if scenario == "error429":
        return Reply(429, {"retry-after": "7"}, _anthropic_error("rate_limit_error", ERROR_429_MESSAGE))
    usage = {
        "input_tokens": USAGE_IN,
        "output_tokens": USAGE_OUT,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    blocks: list[dict] = []
    if scenario == "thinking":
        blocks.append({"type": "thinking", "thinking": THINKING, "signature": SIGNATURE})
    calls = _calls(scenario)
    if calls:
        for cid, name, frags in calls:
            blocks.append({"type": "tool_use", "id": cid, "name": name, "input": json.loads("".join(frags))})
    else:
        blocks.append({"type": "text", "text": TEXT})
    stop = "tool_use" if calls else "max_tokens" if scenario == "length" else "end_turn"
    if not stream:
        msg = {
            "id": "msg_fake_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        return Reply(json_body=msg)
    ev: list[bytes] = []
    start_msg = {
        "id": "msg_fake_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    ev.append(_sse({"type": "message_start", "message": start_msg}, "message_start"))
    reply = Reply()
    for i, b in enumerate(blocks):
        if b["type"] == "thinking":
            ev.append(
                _sse(
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                    },
                    "content_block_start",
                )
            )
            for piece in THINKING_PIECES:
                ev.append(
                    _sse(
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "thinking_delta", "thinking": piece},
                        },
                        "content_block_delta",
                    )
                )
            ev.append(
                _sse(
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "signature_delta", "signature": SIGNATURE},
                    },
                    "content_block_delta",
                )
            )
        elif b["type"] == "tool_use":
            ev.append(
                _sse(
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}},
                    },
                    "content_block_start",
                )
            )
            for frag in calls[i][2]:
                ev.append(
                    _sse(
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": frag},
                        },
                        "content_block_delta",
                    )
                )
        else:
            ev.append(
                _sse(
                    {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                    "content_block_start",
                )
            )
            if i == 0:
                ev.append(_sse({"type": "ping"}, "ping"))
            for n, piece in enumerate(TEXT_PIECES):
                ev.append(
                    _sse(
                        {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": piece}},
                        "content_block_delta",
                    )
                )
                if n == 0:
                    _mark(reply, scenario, len(ev) - 1)
                if n == 1 and scenario == "midstream_error":
                    ev.append(_sse(_anthropic_error("overloaded_error", MIDSTREAM_ERROR_MESSAGE), "error"))
                    reply.events = ev
                    return reply
        ev.append(_sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
    ev.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": USAGE_OUT},
            },
            "message_delta",
        )
    )
    ev.append(_sse({"type": "message_stop"}, "message_stop"))
    reply.events = ev
    return reply


def _mark(reply: Reply, scenario: str, index: int) -> None:
    """Where the stall/drop scenarios act: right after the first text delta."""
    if scenario == "stall":
        reply.stall_after = index
    elif scenario == "drop":
        reply.drop_after = index + 1


# -- OpenAI Chat Completions ----------------------------------------------------------------------


def _openai_error(kind: str, message: str, code: str | None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def chat_reply(scenario: str, model: str, stream: bool, include_usage: bool) -> Reply:
    if scenario == "error429":
        return Reply(429, {"retry-after": "7"}, _openai_error("requests", ERROR_429_MESSAGE, "rate_limit_exceeded"))
    usage = {
        "prompt_tokens": USAGE_IN,
        "completion_tokens": USAGE_OUT,
        "total_tokens": USAGE_IN + USAGE_OUT,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    calls = _calls(scenario)
    finish = "tool_calls" if calls else "length" if scenario == "length" else "stop"
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else TEXT}
        if scenario == "thinking":
            message["reasoning_content"] = THINKING
        if calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": "".join(frags)}}
                for cid, name, frags in calls
            ]
        body = {
            "id": "chatcmpl-fake1",
            "object": "chat.completion",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": usage,
        }
        return Reply(json_body=body)

    def chunk(delta: dict, finish_reason: str | None = None) -> bytes:
        return _sse(
            {
                "id": "chatcmpl-fake1",
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
        )

    reply = Reply()
    ev = [chunk({"role": "assistant", "content": ""})]
    if scenario == "thinking":
        for piece in THINKING_PIECES:
            ev.append(chunk({"reasoning_content": piece}))
    if calls:
        for i, (cid, name, _frags) in enumerate(calls):
            ev.append(
                chunk(
                    {
                        "tool_calls": [
                            {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
                        ]
                    }
                )
            )
        # interleave the two calls' argument fragments: 0, 1, 0, 1, ...
        for n in range(max(len(f) for _, _, f in calls)):
            for i, (_cid, _name, frags) in enumerate(calls):
                if n < len(frags):
                    ev.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": frags[n]}}]}))
    else:
        for n, piece in enumerate(TEXT_PIECES):
            ev.append(chunk({"content": piece}))
            if n == 0:
                _mark(reply, scenario, len(ev) - 1)
            if n == 1 and scenario == "midstream_error":
                ev.append(_sse({"error": {"message": MIDSTREAM_ERROR_MESSAGE, "type": "server_error", "code": 502}}))
                reply.events = ev
                return reply
    ev.append(chunk({}, finish))
    if include_usage:
        ev.append(
            _sse(
                {
                    "id": "chatcmpl-fake1",
                    "object": "chat.completion.chunk",
                    "created": 1700000000,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
            )
        )
    ev.append(_sse("[DONE]"))
    reply.events = ev
    return reply


# -- OpenAI Responses ------------------------------------------------------------------------------


def responses_reply(scenario: str, model: str, stream: bool) -> Reply:
    if scenario == "error429":
        return Reply(429, {"retry-after": "7"}, _openai_error("requests", ERROR_429_MESSAGE, "rate_limit_exceeded"))
    usage = {
        "input_tokens": USAGE_IN,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": USAGE_OUT,
        "output_tokens_details": {"reasoning_tokens": 3 if scenario == "thinking" else 0},
        "total_tokens": USAGE_IN + USAGE_OUT,
    }
    items: list[dict] = []
    if scenario == "thinking":
        items.append(
            {
                "id": "rs_fake_1",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": THINKING}],
                "encrypted_content": ENCRYPTED,
            }
        )
    if scenario == "tools":
        for n, (cid, name, frags) in enumerate(TOOL_CALLS):
            items.append(
                {
                    "id": f"fc_fake_{n}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": cid,
                    "name": name,
                    "arguments": "".join(frags),
                }
            )
    elif scenario == "custom":
        items.append(
            {
                "id": "ctc_fake_1",
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": CUSTOM_CALL[0],
                "name": CUSTOM_CALL[1],
                "input": PATCH,
            }
        )
    else:
        items.append(
            {
                "id": "msg_fake_1",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": TEXT, "annotations": [], "logprobs": []}],
            }
        )

    def response_obj(status: str, output: list[dict], with_usage: bool) -> dict:
        return {
            "id": "resp_fake_1",
            "object": "response",
            "created_at": 1700000000,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage if with_usage else None,
        }

    final_status = "incomplete" if scenario == "length" else "completed"

    def final_obj() -> dict:
        obj = response_obj(final_status, items, True)
        if scenario == "length":
            obj["incomplete_details"] = {"reason": "max_output_tokens"}
        return obj

    if not stream:
        return Reply(json_body=final_obj())

    reply = Reply()
    seq = [0]
    ev: list[bytes] = []

    def emit(obj: dict) -> None:
        obj["sequence_number"] = seq[0]
        seq[0] += 1
        ev.append(_sse(obj, obj["type"]))

    emit({"type": "response.created", "response": response_obj("in_progress", [], False)})
    emit({"type": "response.in_progress", "response": response_obj("in_progress", [], False)})
    for oi, item in enumerate(items):
        if item["type"] == "reasoning":
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": oi,
                    "item": {"id": item["id"], "type": "reasoning", "summary": []},
                }
            )
            part = {"type": "summary_text", "text": ""}
            emit(
                {
                    "type": "response.reasoning_summary_part.added",
                    "item_id": item["id"],
                    "output_index": oi,
                    "summary_index": 0,
                    "part": part,
                }
            )
            for piece in THINKING_PIECES:
                emit(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": item["id"],
                        "output_index": oi,
                        "summary_index": 0,
                        "delta": piece,
                    }
                )
            emit(
                {
                    "type": "response.reasoning_summary_text.done",
                    "item_id": item["id"],
                    "output_index": oi,
                    "summary_index": 0,
                    "text": THINKING,
                }
            )
            emit(
                {
                    "type": "response.reasoning_summary_part.done",
                    "item_id": item["id"],
                    "output_index": oi,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": THINKING},
                }
            )
            emit({"type": "response.output_item.done", "output_index": oi, "item": item})
        elif item["type"] == "custom_tool_call":
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": oi,
                    "item": {**item, "status": "in_progress", "input": ""},
                }
            )
            for piece in (PATCH[:15], PATCH[15:]):
                emit(
                    {
                        "type": "response.custom_tool_call_input.delta",
                        "item_id": item["id"],
                        "output_index": oi,
                        "delta": piece,
                    }
                )
            emit(
                {
                    "type": "response.custom_tool_call_input.done",
                    "item_id": item["id"],
                    "output_index": oi,
                    "input": PATCH,
                }
            )
            emit({"type": "response.output_item.done", "output_index": oi, "item": item})
        elif item["type"] == "message":
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": oi,
                    "item": {**item, "status": "in_progress", "content": []},
                }
            )
            emit(
                {
                    "type": "response.content_part.added",
                    "item_id": item["id"],
                    "output_index": oi,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                }
            )
            for n, piece in enumerate(TEXT_PIECES):
                emit(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": oi,
                        "content_index": 0,
                        "delta": piece,
                        "logprobs": [],
                    }
                )
                if n == 0:
                    _mark(reply, scenario, len(ev) - 1)
                if n == 1 and scenario == "midstream_error":
                    emit({"type": "error", "code": "server_error", "message": MIDSTREAM_ERROR_MESSAGE, "param": None})
                    reply.events = ev
                    return reply
            emit(
                {
                    "type": "response.output_text.done",
                    "item_id": item["id"],
                    "output_index": oi,
                    "content_index": 0,
                    "text": TEXT,
                    "logprobs": [],
                }
            )
            emit(
                {
                    "type": "response.content_part.done",
                    "item_id": item["id"],
                    "output_index": oi,
                    "content_index": 0,
                    "part": item["content"][0],
                }
            )
            emit({"type": "response.output_item.done", "output_index": oi, "item": item})
    if scenario == "tools":
        fcs = [(oi, it) for oi, it in enumerate(items) if it["type"] == "function_call"]
        for oi, it in fcs:
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": oi,
                    "item": {**it, "status": "in_progress", "arguments": ""},
                }
            )
        # interleave the argument deltas of the two calls
        for n in range(max(len(f) for _, _, f in TOOL_CALLS)):
            for k, (oi, it) in enumerate(fcs):
                frags = TOOL_CALLS[k][2]
                if n < len(frags):
                    emit(
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": it["id"],
                            "output_index": oi,
                            "delta": frags[n],
                        }
                    )
        for oi, it in fcs:
            emit(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": it["id"],
                    "output_index": oi,
                    "arguments": it["arguments"],
                }
            )
            emit({"type": "response.output_item.done", "output_index": oi, "item": it})
    terminal = "response.incomplete" if scenario == "length" else "response.completed"
    emit({"type": terminal, "response": final_obj()})
    reply.events = ev
    return reply


# -- the server ------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        logger.debug("fake upstream: " + format, *args)

    def do_GET(self) -> None:
        self._send_plain(200, b"ok")

    def do_HEAD(self) -> None:
        self._send_plain(200, b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = self.server.fake
        with fake.lock:
            fake.requests.append(RecordedRequest("POST", self.path, headers, body, raw))
        proto = detect_protocol(self.path)
        if proto is None or not isinstance(body, dict):
            self._send_json(
                404 if proto is None else 400,
                {"error": {"message": "fake upstream: unknown path or bad body", "type": "invalid_request_error"}},
            )
            return
        model = str(body.get("model") or "fake-model")
        scenario = headers.get("x-fake-scenario") or (model if model in SCENARIOS else fake.scenario)
        stall = float(headers.get("x-fake-stall") or fake.stall)
        stream = bool(body.get("stream"))
        if proto == "anthropic":
            reply = anthropic_reply(scenario, model, stream)
        elif proto == "openai-chat":
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            reply = chat_reply(scenario, model, stream, include_usage)
        else:
            reply = responses_reply(scenario, model, stream)
        if reply.json_body is not None or not stream:
            self._send_json(reply.status, reply.json_body, reply.headers)
            return
        self._send_stream(reply, stall, fake.delay)

    def _send_plain(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, reply: Reply, stall: float, delay: float) -> None:
        self.send_response(reply.status)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for i, data in enumerate(reply.events):
            if reply.drop_after is not None and i >= reply.drop_after:
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(2)  # SHUT_RDWR: no terminating chunk
                return
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            if reply.stall_after == i:
                time.sleep(stall)
            elif delay:
                time.sleep(delay)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeUpstream

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hangs up mid-stream is normal here (tests, curl | head): no traceback on stderr
        logger.debug("fake upstream: connection from %s ended with an error", client_address, exc_info=True)


class FakeUpstream:
    """``with FakeUpstream() as up: up.url`` runs the server in a daemon thread on 127.0.0.1."""

    def __init__(
        self, port: int = 0, scenario: str = "text", stall: float = 2.0, delay: float = 0.0, host: str = "127.0.0.1"
    ) -> None:
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
        self.scenario = scenario
        self.stall = stall
        self.delay = delay
        self.requests: list[RecordedRequest] = []
        self.lock = threading.Lock()
        self._server = _Server((host, port), _Handler)
        self._server.fake = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeUpstream:
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-upstream", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="dragoman fake-upstream", description="Run the scriptable fake LLM upstream on 127.0.0.1."
    )
    ap.add_argument("--port", type=int, default=8765, help="port to listen on (0: any free port); default 8765")
    ap.add_argument(
        "--scenario", default="text", choices=SCENARIOS, help="default scenario (header x-fake-scenario overrides)"
    )
    ap.add_argument(
        "--stall", type=float, default=2.0, help="seconds the 'stall' scenario pauses after its first text delta"
    )
    ap.add_argument("--delay", type=float, default=0.05, help="seconds between streamed events (default 0.05)")
    args = ap.parse_args(argv)
    fake = FakeUpstream(port=args.port, scenario=args.scenario, stall=args.stall, delay=args.delay)
    print(f"fake upstream listening on {fake.url} (scenario {fake.scenario}; Ctrl-C to stop)", flush=True)
    try:
        fake.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        fake._server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
