"""A fake "agent" LLM upstream for multi-turn tool loops driven by the real CLI clients (stdlib only).

Speaks Anthropic Messages (``.../v1/messages``), OpenAI Chat Completions (``.../chat/completions``) and
OpenAI Responses (``.../responses``) on 127.0.0.1, streaming (chunked SSE, one event per chunk) and not.

The "model" is a tiny agent:
  * a request whose conversation holds no tool result -> ONE tool call the client can execute, picked
    from the tools the request offers:
      - ``apply_patch`` (only with ``patch=True``): a patch adding ``PATCH_FILE``;
      - ``Bash`` (Claude Code): ``{"command": COMMAND}``;
      - Codex's shell tools: ``exec_command`` ``{"cmd"}``, ``shell_command`` ``{"command"}``,
        ``shell`` ``{"command": [...]}``;
      - ``exec`` (Codex code mode, a freeform JavaScript tool): a script calling ``tools.exec_command``.
    A freeform (custom) tool that reached us as a function with one string property is filled through
    that property; a Responses ``custom`` tool is answered with a ``custom_tool_call``.
  * a request that carries a tool result -> a final text ``FINAL_MARK`` + the tool's output.

``thinking=True`` puts a reasoning part before the tool call: Anthropic a ``thinking`` block with
``SIGNATURE``, Chat ``reasoning_content``, Responses a ``reasoning`` item with ``ENCRYPTED`` (and a
summary). Whether the follow-up request gave it back unchanged is for the tests to check on
``AgentUpstream.requests``.

Every request is recorded (``requests``: method, path, headers, parsed body, protocol) and, when
``log_path`` is set, appended as one JSON line to that file.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

COMMAND = "echo dragoman-ok"
COMMAND_OUTPUT = "dragoman-ok"
FINAL_MARK = "dragoman-final"
THINKING = "I should run the command the user asked for."
SIGNATURE = "EqQBCkYIBxgCKkAsig-dragoman-test-0123456789abcdefABCDEF+/=="
ENCRYPTED = "gAAAAABenc-dragoman-test-reasoning-blob=="
REASONING_SUMMARY = "Running the command."
PATCH_FILE = "dragoman_patch.txt"
PATCH_LINE = "patched by dragoman"
PATCH_TEXT = f"*** Begin Patch\n*** Add File: {PATCH_FILE}\n+{PATCH_LINE}\n*** End Patch\n"
EXEC_JS = f"const r = await tools.exec_command({{cmd: {json.dumps(COMMAND)}}});\ntext(r);\n"
USAGE_IN = 100
USAGE_OUT = 20


def _rid(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def detect_protocol(path: str) -> str | None:
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/messages"):
        return "anthropic"
    if p.endswith("/chat/completions"):
        return "openai-chat"
    if p.endswith("/responses"):
        return "openai-responses"
    return None


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    protocol: str | None


@dataclass
class ToolCall:
    kind: str  # "function" or "custom" (Responses freeform)
    name: str
    arguments: str  # JSON text for a function, raw input for a custom tool
    call_id: str


# -- reading a request ----------------------------------------------------------------------------


def _flatten_responses_tools(tools: Any, items: Any) -> list[dict]:
    out: list[dict] = []

    def walk(ts: Any) -> None:
        for t in ts or []:
            if isinstance(t, dict) and t.get("type") == "namespace":
                walk(t.get("tools"))
            elif isinstance(t, dict):
                out.append(t)

    walk(tools)
    for it in items if isinstance(items, list) else []:
        if isinstance(it, dict) and it.get("type") == "additional_tools":
            walk(it.get("tools"))
    return out


def offered_tools(protocol: str, body: dict) -> dict[str, tuple[str, dict]]:
    """name -> (kind, JSON schema) of the tools a request offers; kind is "function" or "custom"."""
    out: dict[str, tuple[str, dict]] = {}
    if protocol == "anthropic":
        for t in body.get("tools") or []:
            if isinstance(t, dict) and t.get("type") in (None, "custom") and isinstance(t.get("name"), str):
                out[t["name"]] = ("function", t.get("input_schema") or {})
    elif protocol == "openai-chat":
        for t in body.get("tools") or []:
            if isinstance(t, dict) and t.get("type") == "function":
                f = t.get("function") or {}
                out[f.get("name")] = ("function", f.get("parameters") or {})
            elif isinstance(t, dict) and t.get("type") == "custom":
                c = t.get("custom") or {}
                out[c.get("name")] = ("custom", {})
    else:
        for t in _flatten_responses_tools(body.get("tools"), body.get("input")):
            if t.get("type") == "function":
                out[t.get("name")] = ("function", t.get("parameters") or {})
            elif t.get("type") == "custom":
                out[t.get("name")] = ("custom", {})
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _text_of(c.get("text", c.get("content", ""))) if isinstance(c, dict) else str(c) for c in content
        )
    if content is None:
        return ""
    return json.dumps(content)


def tool_results(protocol: str, body: dict) -> list[str]:
    """The texts of every tool result in the conversation, in order."""
    out: list[str] = []
    if protocol == "anthropic":
        for m in body.get("messages") or []:
            content = m.get("content")
            for b in content if isinstance(content, list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    out.append(_text_of(b.get("content")))
    elif protocol == "openai-chat":
        for m in body.get("messages") or []:
            if m.get("role") == "tool":
                out.append(_text_of(m.get("content")))
    else:
        items = body.get("input")
        for it in items if isinstance(items, list) else []:
            if isinstance(it, dict) and it.get("type") in ("function_call_output", "custom_tool_call_output"):
                out.append(_text_of(it.get("output")))
    return out


def _single_string_property(schema: dict) -> str | None:
    props = schema.get("properties") or {}
    if len(props) == 1:
        name, spec = next(iter(props.items()))
        if isinstance(spec, dict) and spec.get("type") == "string":
            return name
    return None


def choose_call(tools: dict[str, tuple[str, dict]], patch: bool) -> ToolCall | None:
    call_id = _rid("call_")

    def freeform(name: str, raw: str) -> ToolCall:
        kind, schema = tools[name]
        if kind == "custom":
            return ToolCall("custom", name, raw, call_id)
        return ToolCall("function", name, json.dumps({_single_string_property(schema) or "input": raw}), call_id)

    def function(name: str, args: dict) -> ToolCall:
        return ToolCall("function", name, json.dumps(args), call_id)

    if patch and "apply_patch" in tools:
        return freeform("apply_patch", PATCH_TEXT)
    if "Bash" in tools:
        return function("Bash", {"command": COMMAND, "description": "Print the test marker"})
    if "exec_command" in tools:
        return function("exec_command", {"cmd": COMMAND})
    if "shell_command" in tools:
        return function("shell_command", {"command": COMMAND})
    if "shell" in tools:
        return function("shell", {"command": ["bash", "-lc", COMMAND]})
    if "exec" in tools:
        return freeform("exec", EXEC_JS)
    return None


# -- the answers ----------------------------------------------------------------------------------


@dataclass
class Answer:
    """What the agent says: optional reasoning, then a tool call or a final text."""

    thinking: bool
    call: ToolCall | None
    text: str | None


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"{head}data: {payload}\n\n".encode()


def _pieces(s: str, n: int = 3) -> list[str]:
    size = max(1, -(-len(s) // n))
    return [s[i : i + size] for i in range(0, len(s), size)] or [""]


def anthropic_answer(ans: Answer, model: str, stream: bool) -> tuple[dict | None, list[bytes]]:
    blocks: list[dict] = []
    if ans.thinking:
        blocks.append({"type": "thinking", "thinking": THINKING, "signature": SIGNATURE})
    if ans.text is not None:
        blocks.append({"type": "text", "text": ans.text})
    if ans.call is not None:
        blocks.append(
            {
                "type": "tool_use",
                "id": ans.call.call_id.replace("call_", "toolu_"),
                "name": ans.call.name,
                "input": json.loads(ans.call.arguments),
            }
        )
    stop = "tool_use" if ans.call is not None else "end_turn"
    usage = {
        "input_tokens": USAGE_IN,
        "output_tokens": USAGE_OUT,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    msg_id = _rid("msg_")
    if not stream:
        return {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }, []
    ev = [
        _sse(
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**usage, "output_tokens": 1},
                },
            },
            "message_start",
        )
    ]
    for i, b in enumerate(blocks):
        if b["type"] == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(b["thinking"])] + [
                {"type": "signature_delta", "signature": b["signature"]}
            ]
        elif b["type"] == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(b["text"])]
        else:
            start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(json.dumps(b["input"]))]
        ev.append(_sse({"type": "content_block_start", "index": i, "content_block": start}, "content_block_start"))
        if i == 0:
            ev.append(_sse({"type": "ping"}, "ping"))
        for d in deltas:
            ev.append(_sse({"type": "content_block_delta", "index": i, "delta": d}, "content_block_delta"))
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
    return None, ev


def chat_answer(ans: Answer, model: str, stream: bool, include_usage: bool) -> tuple[dict | None, list[bytes]]:
    cid = _rid("chatcmpl-")
    finish = "tool_calls" if ans.call is not None else "stop"
    usage = {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT, "total_tokens": USAGE_IN + USAGE_OUT}
    tool_calls = []
    if ans.call is not None:
        tool_calls = [
            {
                "id": ans.call.call_id,
                "type": "function",
                "function": {"name": ans.call.name, "arguments": ans.call.arguments},
            }
        ]
    if not stream:
        msg: dict[str, Any] = {"role": "assistant", "content": ans.text}
        if ans.thinking:
            msg["reasoning_content"] = THINKING
        if tool_calls:
            msg["tool_calls"] = tool_calls
        return {
            "id": cid,
            "object": "chat.completion",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": usage,
        }, []

    def chunk(delta: dict, finish_reason: str | None = None) -> bytes:
        return _sse(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": 1,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
        )

    ev = [chunk({"role": "assistant", "content": ""})]
    if ans.thinking:
        ev += [chunk({"reasoning_content": p}) for p in _pieces(THINKING)]
    if ans.text is not None:
        ev += [chunk({"content": p}) for p in _pieces(ans.text)]
    if ans.call is not None:
        ev.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": ans.call.call_id,
                            "type": "function",
                            "function": {"name": ans.call.name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        ev += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in _pieces(ans.call.arguments)]
    ev.append(chunk({}, finish))
    if include_usage:
        ev.append(
            _sse(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
            )
        )
    ev.append(_sse("[DONE]"))
    return None, ev


def responses_answer(ans: Answer, model: str, stream: bool) -> tuple[dict | None, list[bytes]]:
    resp_id = _rid("resp_")
    items: list[dict] = []
    if ans.thinking:
        items.append(
            {
                "id": _rid("rs_"),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": REASONING_SUMMARY}],
                "encrypted_content": ENCRYPTED,
            }
        )
    if ans.text is not None:
        items.append(
            {
                "id": _rid("msg_"),
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": ans.text, "annotations": []}],
            }
        )
    if ans.call is not None:
        c = ans.call
        if c.kind == "custom":
            items.append(
                {
                    "id": _rid("ctc_"),
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": c.call_id,
                    "name": c.name,
                    "input": c.arguments,
                }
            )
        else:
            items.append(
                {
                    "id": _rid("fc_"),
                    "type": "function_call",
                    "status": "completed",
                    "call_id": c.call_id,
                    "name": c.name,
                    "arguments": c.arguments,
                }
            )
    usage = {
        "input_tokens": USAGE_IN,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": USAGE_OUT,
        "output_tokens_details": {"reasoning_tokens": 5 if ans.thinking else 0},
        "total_tokens": USAGE_IN + USAGE_OUT,
    }

    def obj(status: str, output: list[dict], with_usage: bool) -> dict:
        return {
            "id": resp_id,
            "object": "response",
            "created_at": 1,
            "status": status,
            "model": model,
            "output": output,
            "usage": usage if with_usage else None,
        }

    if not stream:
        return obj("completed", items, True), []
    ev: list[bytes] = []
    seq = 0

    def emit(data: dict) -> None:
        nonlocal seq
        data = {"type": data["type"], "sequence_number": seq, **{k: v for k, v in data.items() if k != "type"}}
        seq += 1
        ev.append(_sse(data, data["type"]))

    emit({"type": "response.created", "response": obj("in_progress", [], False)})
    emit({"type": "response.in_progress", "response": obj("in_progress", [], False)})
    for oi, it in enumerate(items):
        iid = it["id"]
        if it["type"] == "reasoning":
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": oi,
                    "item": {"id": iid, "type": "reasoning", "summary": []},
                }
            )
            part = {"type": "summary_text", "text": ""}
            emit(
                {
                    "type": "response.reasoning_summary_part.added",
                    "item_id": iid,
                    "output_index": oi,
                    "summary_index": 0,
                    "part": part,
                }
            )
            for p in _pieces(REASONING_SUMMARY):
                emit(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": iid,
                        "output_index": oi,
                        "summary_index": 0,
                        "delta": p,
                    }
                )
            emit(
                {
                    "type": "response.reasoning_summary_text.done",
                    "item_id": iid,
                    "output_index": oi,
                    "summary_index": 0,
                    "text": REASONING_SUMMARY,
                }
            )
            emit(
                {
                    "type": "response.reasoning_summary_part.done",
                    "item_id": iid,
                    "output_index": oi,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": REASONING_SUMMARY},
                }
            )
        elif it["type"] == "message":
            text = it["content"][0]["text"]
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": oi,
                    "item": {**it, "status": "in_progress", "content": []},
                }
            )
            emit(
                {
                    "type": "response.content_part.added",
                    "item_id": iid,
                    "output_index": oi,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                }
            )
            for p in _pieces(text):
                emit(
                    {
                        "type": "response.output_text.delta",
                        "item_id": iid,
                        "output_index": oi,
                        "content_index": 0,
                        "delta": p,
                        "logprobs": [],
                    }
                )
            emit(
                {
                    "type": "response.output_text.done",
                    "item_id": iid,
                    "output_index": oi,
                    "content_index": 0,
                    "text": text,
                    "logprobs": [],
                }
            )
            emit(
                {
                    "type": "response.content_part.done",
                    "item_id": iid,
                    "output_index": oi,
                    "content_index": 0,
                    "part": it["content"][0],
                }
            )
        elif it["type"] == "function_call":
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": oi,
                    "item": {**it, "status": "in_progress", "arguments": ""},
                }
            )
            for p in _pieces(it["arguments"]):
                emit({"type": "response.function_call_arguments.delta", "item_id": iid, "output_index": oi, "delta": p})
            emit(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": iid,
                    "output_index": oi,
                    "arguments": it["arguments"],
                }
            )
        else:  # custom_tool_call
            emit(
                {
                    "type": "response.output_item.added",
                    "output_index": oi,
                    "item": {**it, "status": "in_progress", "input": ""},
                }
            )
            for p in _pieces(it["input"]):
                emit({"type": "response.custom_tool_call_input.delta", "item_id": iid, "output_index": oi, "delta": p})
            emit(
                {
                    "type": "response.custom_tool_call_input.done",
                    "item_id": iid,
                    "output_index": oi,
                    "input": it["input"],
                }
            )
        emit({"type": "response.output_item.done", "output_index": oi, "item": it})
    emit({"type": "response.completed", "response": obj("completed", items, True)})
    return None, ev


# -- the server -----------------------------------------------------------------------------------


class AgentUpstream:
    """``with AgentUpstream() as up: ... up.url ... up.requests``; configure per test with ``reset``."""

    def __init__(self, log_path: Path | None = None) -> None:
        self.log_path = log_path
        self.requests: list[Recorded] = []
        self.thinking = False
        self.patch = False
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="agent-upstream", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reset(self, *, thinking: bool = False, patch: bool = False, log_path: Path | None = None) -> None:
        with self._lock:
            self.requests = []
            self.thinking = thinking
            self.patch = patch
            self.log_path = log_path

    def model_requests(self) -> list[Recorded]:
        """The POSTs to one of the three endpoints, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.protocol is not None]

    def __enter__(self) -> AgentUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)
            path = self.log_path
        if path is not None:
            with open(path, "a", encoding="utf-8") as f:
                f.write(
                    json.dumps(
                        {
                            "method": rec.method,
                            "path": rec.path,
                            "protocol": rec.protocol,
                            "headers": rec.headers,
                            "body": rec.body,
                        }
                    )
                    + "\n"
                )

    def answer(self, protocol: str, body: dict) -> Answer:
        results = tool_results(protocol, body)
        if results:
            return Answer(False, None, f"{FINAL_MARK}: the tool printed {results[-1].strip()[:400]}")
        call = choose_call(offered_tools(protocol, body), self.patch)
        if call is None:
            return Answer(False, None, f"no usable tool offered; tools were {sorted(offered_tools(protocol, body))}")
        return Answer(self.thinking, call, None)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
                pass

            def _headers(self) -> dict[str, str]:
                return {k.lower(): v for k, v in self.headers.items()}

            def do_HEAD(self) -> None:  # noqa: N802
                upstream._record(Recorded("HEAD", self.path, self._headers(), None, None))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                upstream._record(Recorded("GET", self.path, self._headers(), None, None))
                self._json(200, {"object": "list", "data": []})

            def _json(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                protocol = detect_protocol(self.path)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                upstream._record(Recorded("POST", self.path, self._headers(), body, protocol))
                if protocol is None or not isinstance(body, dict):
                    self._json(
                        404 if protocol is None else 400,
                        {
                            "error": {
                                "type": "invalid_request_error",
                                "message": "agent upstream: unknown endpoint or bad JSON",
                            }
                        },
                    )
                    return
                ans = upstream.answer(protocol, body)
                model = str(body.get("model") or "fake-model")
                stream = bool(body.get("stream"))
                if protocol == "anthropic":
                    whole, events = anthropic_answer(ans, model, stream)
                elif protocol == "openai-chat":
                    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    whole, events = chat_answer(ans, model, stream, include_usage)
                else:
                    whole, events = responses_answer(ans, model, stream)
                if not stream:
                    self._json(200, whole)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for e in events:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(e), e))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        return Handler


def summary(requests: list[Recorded]) -> str:
    """One line per request (no bodies beyond the shape): for failure messages."""
    lines = []
    for i, r in enumerate(requests):
        if r.protocol is None or not isinstance(r.body, dict):
            lines.append(f"  {i}: {r.method} {r.path}")
            continue
        tools = sorted(offered_tools(r.protocol, r.body))
        lines.append(
            f"  {i}: {r.method} {r.path} [{r.protocol}] model={r.body.get('model')} stream={r.body.get('stream')} "
            f"tools={tools[:12]}{'...' if len(tools) > 12 else ''} tool_results={[t[:80] for t in tool_results(r.protocol, r.body)]}"
        )
    return "\n".join(lines) or "  (no requests reached the upstream)"
