"""Strict validator for Anthropic Messages: SSE streams, Message bodies, error bodies.

Grammar (docs "Streaming Messages" + real recordings)::

    message_start (ping)* (content_block_start (ping|content_block_delta)* content_block_stop (ping)*)*
    message_delta (ping)* message_stop
  | ... error            (an ``event: error`` ends the stream at any point after the first byte)

Tolerated in real recordings only (``strict=False``): a stream that ends without a final blank line
(the SDK fixture files were saved without their trailing newline); a ``message_delta`` with stop_reason
``max_tokens`` while a tool_use block is still open, its ``content_block_stop`` never sent (captured in
anthropic-sdk-python's incomplete_partial_json_response fixture). Anthropic's trailing-whitespace
padding inside data lines is valid JSON and accepted in both modes.
"""

from __future__ import annotations

import json
from typing import Any

from dragoman.lint import Checker
from dragoman.lint import Summary
from dragoman.lint import ToolCall
from dragoman.lint import drive
from dragoman.lint import is_int
from dragoman.lint import load_body
from dragoman.lint import need
from dragoman.lint import parse_json_object
from dragoman.lint import run_stream
from dragoman.lint import search
from dragoman.lint.sse import Frame
from dragoman.lint.sse import parse_sse

STOP_REASONS = {
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
}
TOOL_BLOCKS = {"tool_use", "server_tool_use", "mcp_tool_use"}
# provider-side result blocks: complete in content_block_start, no deltas
RESULT_BLOCK_SUFFIXES = ("_tool_result", "_tool_result_error")
RESULT_BLOCKS = {"mcp_tool_result", "container_upload"}
DELTAS_FOR = {
    "text": {"text_delta", "citations_delta"},
    "thinking": {"thinking_delta", "signature_delta"},
    "redacted_thinking": set(),
    "tool_use": {"input_json_delta"},
    "server_tool_use": {"input_json_delta"},
    "mcp_tool_use": {"input_json_delta"},
    "compaction": {"compaction_delta"},  # context-management beta
}
ERROR_TYPES = {
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "overloaded_error",
    "billing_error",
    "timeout_error",
}


def _block_kind(t: str) -> str:
    if t in DELTAS_FOR:
        return t
    if t.endswith(RESULT_BLOCK_SUFFIXES) or t in RESULT_BLOCKS:
        return "result"
    raise AssertionError(f"unknown content block type {t!r}")


def check_error_object(obj: dict[str, Any], where: str) -> dict[str, Any]:
    need(obj.get("type") == "error", f"{where}: error body type must be 'error', got {obj.get('type')!r}")
    err = obj.get("error")
    need(isinstance(err, dict), f"{where}: error.error must be an object")
    need(isinstance(err.get("type"), str) and err["type"], f"{where}: error.error.type must be a non-empty string")
    need(isinstance(err.get("message"), str), f"{where}: error.error.message must be a string")
    return err


def validate_error_body(body: bytes | str | dict, *, strict: bool = True) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}}`` -> the inner error."""
    obj = load_body(body)
    err = check_error_object(obj, "anthropic error body")
    if strict:
        need(err["type"] in ERROR_TYPES, f"anthropic error body: unknown error type {err['type']!r}")
    return err


def _check_usage(u: Any, where: str) -> None:
    need(isinstance(u, dict), f"{where}: usage must be an object")
    need(is_int(u.get("input_tokens")), f"{where}: usage.input_tokens must be an int, got {u.get('input_tokens')!r}")
    need(is_int(u.get("output_tokens")), f"{where}: usage.output_tokens must be an int, got {u.get('output_tokens')!r}")
    for k in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        if u.get(k) is not None:
            need(is_int(u[k]), f"{where}: usage.{k} must be an int or null")


class _Stream:
    """One Anthropic stream's grammar state (``stream_checker``); one method per event type."""

    def __init__(self, s: Summary, strict: bool) -> None:
        self.s = s
        self.strict = strict
        self.phase = "start"  # start -> blocks -> delta -> stopped | error
        self.open_idx: int | None = None
        self.open_kind = ""
        self.open_type = ""
        self.next_index = 0
        self.json_buf: list[str] = []
        self.tool: dict[str, Any] = {}
        self.has_sig = False
        self.pending_args: list[tuple[str, str]] = []

    def event(self, f: Frame) -> Any:
        """Check one frame. -> its variable field when it is a delta that may repeat (``replay``)."""
        self.s.events += 1
        obj = f.json()
        where = f"event #{f.n} ({f.event})"
        need(isinstance(obj, dict) and isinstance(obj.get("type"), str), f"{where}: data must be an object with a type")
        t = obj["type"]
        need(f.event == t, f"{where}: event: line {f.event!r} does not match data.type {t!r}")
        need(self.phase not in ("stopped", "error"), f"{where}: event after the end of the stream ({self.phase})")
        if t == "error":
            self.s.error = check_error_object(obj, where)
            self.phase = "error"
            return None
        if t == "ping":
            need(self.phase != "start", f"{where}: ping before message_start")
            return None
        if self.phase == "start":
            need(t == "message_start", f"{where}: first event must be message_start, got {t}")
            self.message_start(obj, where)
            return None
        handler = _HANDLERS.get(t)
        if handler is None:
            raise AssertionError(f"{where}: unknown event type {t!r}")
        return handler(self, obj, where)

    def message_start(self, obj: dict[str, Any], where: str) -> None:
        m = obj.get("message")
        need(isinstance(m, dict), f"{where}: message_start.message must be an object")
        need(isinstance(m.get("id"), str) and m["id"], f"{where}: message.id must be a non-empty string")
        need(m.get("type") == "message", f"{where}: message.type must be 'message'")
        need(m.get("role") == "assistant", f"{where}: message.role must be 'assistant'")
        need(isinstance(m.get("model"), str), f"{where}: message.model must be a string")
        need(m.get("content") == [], f"{where}: message.content must be [] in message_start, got {m.get('content')!r}")
        _check_usage(m.get("usage"), where)
        self.s.id, self.s.model = m["id"], m["model"]
        self.s.usage = dict(m["usage"])
        self.phase = "blocks"

    def duplicate_start(self, obj: dict[str, Any], where: str) -> None:
        raise AssertionError(f"{where}: duplicate message_start")

    def block_start(self, obj: dict[str, Any], where: str) -> None:
        s = self.s
        need(self.phase == "blocks", f"{where}: content_block_start after message_delta")
        need(
            self.open_idx is None,
            f"{where}: content_block_start while block {self.open_idx} is still open (no interleaving)",
        )
        idx = obj.get("index")
        need(idx == self.next_index, f"{where}: block index {idx!r}, expected {self.next_index} (contiguous from 0)")
        cb = obj.get("content_block")
        need(
            isinstance(cb, dict) and isinstance(cb.get("type"), str),
            f"{where}: content_block must be an object with a type",
        )
        self.open_type = open_type = cb["type"]
        self.open_kind = open_kind = _block_kind(open_type)
        self.open_idx, self.next_index = idx, self.next_index + 1
        self.json_buf, self.has_sig, self.tool = [], False, {}
        if open_kind == "text":
            need(
                cb.get("text") == "",
                f'{where}: text block must start with text "" (clients ignore text here), got {cb.get("text")!r}',
            )
        elif open_kind == "thinking":
            need(cb.get("thinking", "") == "", f"{where}: thinking block must start empty")
        elif open_kind == "redacted_thinking":
            need(isinstance(cb.get("data"), str) and cb["data"], f"{where}: redacted_thinking needs non-empty data")
            s.redacted += 1
        elif open_kind in TOOL_BLOCKS:
            need(isinstance(cb.get("id"), str) and cb["id"], f"{where}: {open_type} needs a non-empty id")
            need(isinstance(cb.get("name"), str) and cb["name"], f"{where}: {open_type} needs a non-empty name")
            need(
                cb.get("input") in ({}, None),
                f"{where}: {open_type} input must be {{}} at start, got {cb.get('input')!r}",
            )
            self.tool = cb
        else:
            s.server_tools.append(open_type)
        if open_type in ("server_tool_use", "mcp_tool_use"):
            s.server_tools.append(open_type)

    def block_delta(self, obj: dict[str, Any], where: str) -> Any:
        s = self.s
        idx = obj.get("index")
        need(self.open_idx is not None, f"{where}: content_block_delta with no open block")
        need(idx == self.open_idx, f"{where}: delta for block {idx!r} but block {self.open_idx} is open")
        d = obj.get("delta")
        need(isinstance(d, dict), f"{where}: delta must be an object")
        dt = d.get("type")
        allowed = DELTAS_FOR.get(self.open_kind, set())
        if dt not in allowed:
            raise AssertionError(
                f"{where}: {dt!r} not allowed in a {self.open_type} block (allowed: {sorted(allowed)})"
            )
        if dt == "text_delta":
            need(isinstance(d.get("text"), str), f"{where}: text_delta.text must be a string")
            s.text += d["text"]
            return ((("delta", "text"), d["text"], None),)
        if dt == "thinking_delta":
            need(isinstance(d.get("thinking"), str), f"{where}: thinking_delta.thinking must be a string")
            need(not self.has_sig, f"{where}: thinking_delta after signature_delta")
            s.thinking += d["thinking"]
            return ((("delta", "thinking"), d["thinking"], s.add_thinking),)
        if dt == "signature_delta":
            need(
                isinstance(d.get("signature"), str) and d["signature"],
                f"{where}: signature_delta.signature must be non-empty",
            )
            need(not self.has_sig, f"{where}: second signature_delta in one thinking block")
            self.has_sig = True
            s.signatures.append(d["signature"])
        elif dt == "input_json_delta":
            need(isinstance(d.get("partial_json"), str), f"{where}: input_json_delta.partial_json must be a string")
            self.json_buf.append(d["partial_json"])
            return ((("delta", "partial_json"), d["partial_json"], self.json_buf.extend),)
        elif dt == "citations_delta":
            need(isinstance(d.get("citation"), dict), f"{where}: citations_delta.citation must be an object")
        return None

    def block_stop(self, obj: dict[str, Any], where: str) -> None:
        idx = obj.get("index")
        need(self.open_idx is not None, f"{where}: content_block_stop with no open block")
        need(idx == self.open_idx, f"{where}: stop for block {idx!r} but block {self.open_idx} is open")
        if self.open_kind == "thinking":
            need(self.has_sig, f"{where}: thinking block {idx} closed without a signature_delta")
        if self.open_kind in TOOL_BLOCKS:
            args = "".join(self.json_buf)
            self.pending_args.append((f"{where}: {self.open_type} {self.tool.get('name')!r}", args))
            if self.open_kind == "tool_use":
                self.s.tool_calls.append(ToolCall(self.tool["id"], self.tool["name"], args or "{}"))
        self.open_idx = None

    def message_delta(self, obj: dict[str, Any], where: str) -> None:
        s = self.s
        need(self.phase == "blocks", f"{where}: second message_delta")
        d = obj.get("delta")
        need(isinstance(d, dict), f"{where}: message_delta.delta must be an object")
        sr = d.get("stop_reason")
        if self.open_idx is not None and not self.strict and sr == "max_tokens":
            # real recording: the block cut by max_tokens is never stopped
            if self.open_kind == "tool_use":
                s.tool_calls.append(ToolCall(self.tool["id"], self.tool["name"], "".join(self.json_buf) or "{}"))
            self.open_idx = None
        need(self.open_idx is None, f"{where}: message_delta while block {self.open_idx} is open")
        if sr not in STOP_REASONS:
            raise AssertionError(f"{where}: stop_reason {sr!r} not in {sorted(STOP_REASONS)}")
        u = obj.get("usage")
        need(
            isinstance(u, dict) and is_int(u.get("output_tokens")),
            f"{where}: message_delta.usage.output_tokens must be an int",
        )
        s.stop_reason = sr
        if sr != "max_tokens":  # a tool input cut by the token limit may be unfinished JSON
            for what, args in self.pending_args:
                parse_json_object(args, what)
        s.usage.update({k: v for k, v in u.items() if v is not None})
        self.phase = "delta"

    def message_stop(self, obj: dict[str, Any], where: str) -> None:
        need(self.phase == "delta", f"{where}: message_stop before message_delta")
        self.phase = "stopped"

    def end(self) -> None:
        if self.phase != "error":
            need(
                self.phase == "stopped",
                f"anthropic stream ended in phase {self.phase!r} without message_stop or error "
                f"(block {self.open_idx} open)",
            )


_HANDLERS: dict[str, Any] = {
    "message_start": _Stream.duplicate_start,
    "content_block_start": _Stream.block_start,
    "content_block_delta": _Stream.block_delta,
    "content_block_stop": _Stream.block_stop,
    "message_delta": _Stream.message_delta,
    "message_stop": _Stream.message_stop,
}


def stream_checker(s: Summary, strict: bool = True) -> Checker:
    """The stream grammar, incremental: send one ``Frame`` at a time, then ``None`` (see ``drive``)."""
    return run_stream(_Stream(s, strict), "anthropic")


def validate_stream(data: bytes, *, strict: bool = True) -> Summary:
    frames, _ = parse_sse(data, strict=strict)
    s = Summary()
    drive(stream_checker(s, strict), frames)
    s.search = search.anthropic_stream(
        data, strict=strict and s.error is None
    )  # hosted web search and citations (``validators.search``)
    return s


def validate_message(body: bytes | str | dict, *, strict: bool = True) -> Summary:
    """A non-streaming Message body."""
    m = load_body(body)
    s = Summary()
    need(isinstance(m.get("id"), str) and m["id"], "message.id must be a non-empty string")
    need(m.get("type") == "message", f"message.type must be 'message', got {m.get('type')!r}")
    need(m.get("role") == "assistant", "message.role must be 'assistant'")
    need(isinstance(m.get("model"), str), "message.model must be a string")
    need(isinstance(m.get("content"), list), "message.content must be a list")
    need(m.get("stop_reason") in STOP_REASONS, f"stop_reason {m.get('stop_reason')!r} not allowed")
    need("stop_sequence" in m, "message.stop_sequence must be present (may be null)")
    _check_usage(m.get("usage"), "message")
    s.id, s.model, s.stop_reason, s.usage = m["id"], m["model"], m["stop_reason"], dict(m["usage"])
    for i, b in enumerate(m["content"]):
        where = f"content[{i}]"
        need(isinstance(b, dict) and isinstance(b.get("type"), str), f"{where}: must be an object with a type")
        kind = _block_kind(b["type"])
        if kind == "text":
            need(isinstance(b.get("text"), str), f"{where}: text must be a string")
            s.text += b["text"]
        elif kind == "thinking":
            need(isinstance(b.get("thinking"), str), f"{where}: thinking must be a string")
            need(
                isinstance(b.get("signature"), str) and b["signature"], f"{where}: thinking needs a non-empty signature"
            )
            s.thinking += b["thinking"]
            s.signatures.append(b["signature"])
        elif kind == "redacted_thinking":
            need(isinstance(b.get("data"), str) and b["data"], f"{where}: redacted_thinking needs data")
            s.redacted += 1
        elif kind in TOOL_BLOCKS:
            need(isinstance(b.get("id"), str) and b["id"], f"{where}: {b['type']} needs an id")
            need(isinstance(b.get("name"), str) and b["name"], f"{where}: {b['type']} needs a name")
            need(isinstance(b.get("input"), dict), f"{where}: {b['type']}.input must be an object")
            if kind == "tool_use":
                s.tool_calls.append(ToolCall(b["id"], b["name"], json.dumps(b["input"])))
            else:
                s.server_tools.append(b["type"])
        else:
            s.server_tools.append(b["type"])
    s.search = search.anthropic_message(body)  # hosted web search and citations (``validators.search``)
    return s
