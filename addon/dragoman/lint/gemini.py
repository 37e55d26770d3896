"""Strict validator for Gemini ``generateContent``: streams (``alt=sse`` or the JSON array), bodies, errors.

Grammar (API reference "GenerateContentResponse", "Streaming"; real recordings in tests/corpus/gemini)::

    data: GenerateContentResponse ... data: GenerateContentResponse (finishReason, usageMetadata)
  | data: GenerateContentResponse ... data: {"error": {"code", "message", "status"}}
  | data: {"promptFeedback": {"blockReason": ...}, "usageMetadata": ...}          (a blocked prompt)

Each event holds one candidate (``index`` 0) whose ``content`` is ``role: "model"`` with the new ``parts``;
every part holds exactly one kind of data (``text``, ``functionCall``, ...), ``thought`` only on text, an
optional string ``thoughtSignature``. Strict (what Dragoman writes): one response id and model version on
every event, ``finishReason`` only on the last event, which carries ``usageMetadata`` with integer counts and
``totalTokenCount = prompt + candidates + thoughts``; function calls whole (``name`` + object ``args``).
Tolerated in real recordings (``strict=False``): usage on every event (running counts) or Vertex's bare
``{"trafficType"}``; Gemini 3's streamed calls (``willContinue`` opens, ``partialArgs`` set or extend the
value at a JSON path, an empty ``functionCall`` or the finish closes), assembled here independently.

Summary: ``text`` (non-thought text), ``thinking`` (thought text), ``signatures`` (every ``thoughtSignature``),
``tool_calls`` (id or None), ``stop_reason`` (``finishReason``, or ``blocked:<reason>``), ``usage`` (the last
``usageMetadata`` plus ``output_tokens`` = candidates + thoughts, the count other protocols report).
"""

from __future__ import annotations

import json
import re
from typing import Any

from dragoman.lint import Checker
from dragoman.lint import EventError
from dragoman.lint import Summary
from dragoman.lint import ToolCall
from dragoman.lint import drive
from dragoman.lint import is_int
from dragoman.lint import load_body
from dragoman.lint import need
from dragoman.lint.sse import parse_sse

FINISH_REASONS = {
    "STOP",
    "MAX_TOKENS",
    "SAFETY",
    "RECITATION",
    "LANGUAGE",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "MALFORMED_FUNCTION_CALL",
    "IMAGE_SAFETY",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
    "FINISH_REASON_UNSPECIFIED",
}
STATUSES = {
    "INVALID_ARGUMENT",
    "FAILED_PRECONDITION",
    "OUT_OF_RANGE",
    "UNAUTHENTICATED",
    "PERMISSION_DENIED",
    "NOT_FOUND",
    "RESOURCE_EXHAUSTED",
    "CANCELLED",
    "INTERNAL",
    "UNKNOWN",
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
}
PART_DATA = {
    "text",
    "functionCall",
    "functionResponse",
    "inlineData",
    "fileData",
    "executableCode",
    "codeExecutionResult",
}
_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def validate_error_body(body: bytes | str | dict, *, strict: bool = True) -> dict[str, Any]:
    obj = load_body(body) if not (isinstance(body, (bytes, str)) and body.lstrip()[:1] in ("[", b"[")) else None
    if obj is None:
        arr = json.loads(body)
        need(isinstance(arr, list) and len(arr) == 1, "gemini error array: one element expected")
        obj = arr[0]
    err = obj.get("error")
    need(isinstance(err, dict), "gemini error body: error must be an object")
    need(isinstance(err.get("message"), str), "gemini error body: error.message must be a string")
    need(is_int(err.get("code")), "gemini error body: error.code must be an integer")
    if strict:
        need(err.get("status") in STATUSES, f"gemini error body: unknown status {err.get('status')!r}")
    return err


def _check_usage(u: Any, strict: bool) -> dict[str, Any]:
    need(isinstance(u, dict), "usageMetadata must be an object")
    for k, v in u.items():
        if k.endswith("Count"):
            need(is_int(v) and v >= 0, f"usageMetadata.{k} must be a non-negative integer")
    if strict:
        total = u.get("promptTokenCount", 0) + u.get("candidatesTokenCount", 0) + u.get("thoughtsTokenCount", 0)
        total += u.get("toolUsePromptTokenCount", 0)
        need(u.get("totalTokenCount") == total, f"usageMetadata.totalTokenCount {u.get('totalTokenCount')} != {total}")
    out = dict(u)
    out["output_tokens"] = u.get("candidatesTokenCount", 0) + u.get("thoughtsTokenCount", 0)
    return out


class _Acc:
    """Accumulates parts into a Summary; assembles streamed calls."""

    def __init__(self, strict: bool) -> None:
        self.s = Summary()
        self.strict = strict
        self.call: dict[str, Any] | None = None

    def part(self, p: Any, where: str) -> None:
        need(isinstance(p, dict), f"{where}: a part must be an object")
        data = [k for k in p if k in PART_DATA]
        if len(data) != 1:
            raise AssertionError(f"{where}: a part holds exactly one of {sorted(PART_DATA)}, got {sorted(p)}")
        if "thoughtSignature" in p:
            need(isinstance(p["thoughtSignature"], str) and p["thoughtSignature"], f"{where}: bad thoughtSignature")
            self.s.signatures.append(p["thoughtSignature"])
        if "thought" in p:
            need(p["thought"] is True and "text" in p, f"{where}: thought is true, on a text part")
        if "text" in p:
            need(isinstance(p["text"], str), f"{where}: text must be a string")
            self.end_call()
            if p.get("thought"):
                self.s.thinking += p["text"]
            else:
                self.s.text += p["text"]
        elif "functionCall" in p:
            self.function_call(p["functionCall"], where)
        else:
            self.end_call()
            self.s.server_tools.append(data[0])

    def function_call(self, fc: Any, where: str) -> None:
        need(isinstance(fc, dict), f"{where}: functionCall must be an object")
        if self.strict:
            need(isinstance(fc.get("name"), str) and fc["name"], f"{where}: functionCall.name required")
            need(isinstance(fc.get("args"), dict), f"{where}: functionCall.args must be an object")
            need("willContinue" not in fc and "partialArgs" not in fc, f"{where}: streamed call in strict output")
        if self.call is not None and not fc.get("name"):
            for e in fc.get("partialArgs") or ():
                self.set_path(e, where)
            if not fc.get("willContinue") and not fc.get("partialArgs"):
                self.end_call()
            return
        self.end_call()
        need(isinstance(fc.get("name"), str) and fc["name"], f"{where}: functionCall.name required")
        call = {"id": fc.get("id"), "name": fc["name"], "args": dict(fc.get("args") or {})}
        if fc.get("willContinue"):
            self.call = call
            for e in fc.get("partialArgs") or ():
                self.set_path(e, where)
        else:
            self.add(call)

    def set_path(self, e: dict[str, Any], where: str) -> None:
        assert self.call is not None
        toks: list[Any] = []
        for m in _TOKEN.finditer(e["jsonPath"][1:]):
            toks.append(int(m.group(2)) if m.group(2) is not None else m.group(1))
        need(bool(toks), f"{where}: partialArgs jsonPath must name a member")
        node: Any = self.call["args"]
        for tok, nxt in zip(toks, toks[1:]):
            empty: Any = [] if isinstance(nxt, int) else {}
            if isinstance(node, list):
                while len(node) <= tok:
                    node.append(None)
                node[tok] = node[tok] if node[tok] is not None else empty
                node = node[tok]
            else:
                node = node.setdefault(tok, empty)
        last = toks[-1]
        if "stringValue" in e:
            prev = (
                node[last]
                if isinstance(node, list) and last < len(node)
                else (node.get(last) if isinstance(node, dict) else None)
            )
            value = (prev if isinstance(prev, str) else "") + e["stringValue"]
        else:
            value = e.get("numberValue", e.get("boolValue"))
        if isinstance(node, list):
            while len(node) <= last:
                node.append(None)
            node[last] = value
        else:
            node[last] = value

    def add(self, call: dict[str, Any]) -> None:
        self.s.tool_calls.append(ToolCall(call["id"], call["name"], json.dumps(call["args"])))

    def end_call(self) -> None:
        if self.call is not None:
            self.add(self.call)
            self.call = None


def _event(obj: dict[str, Any], acc: _Acc, where: str, last: bool) -> None:
    s, strict = acc.s, acc.strict
    if strict:
        for key, attr in (("responseId", "id"), ("modelVersion", "model")):
            need(isinstance(obj.get(key), str), f"{where}: {key} must be a string")
            need(getattr(s, attr) in (None, obj[key]), f"{where}: {key} changed within the stream")
    s.id = obj.get("responseId", s.id)
    s.model = obj.get("modelVersion", s.model)
    if "usageMetadata" in obj and ("promptTokenCount" in obj["usageMetadata"] or strict):
        need(not strict or last, f"{where}: usageMetadata before the last event")
        s.usage = _check_usage(obj["usageMetadata"], strict)
    cands = obj.get("candidates")
    if cands is None:
        fb = obj.get("promptFeedback")
        need(isinstance(fb, dict) and isinstance(fb.get("blockReason"), str), f"{where}: no candidates, no blockReason")
        need(last, f"{where}: a blocked prompt ends the stream")
        s.stop_reason = "blocked:" + fb["blockReason"]
        return
    need(isinstance(cands, list) and len(cands) == 1, f"{where}: exactly one candidate expected")
    c = cands[0]
    need(isinstance(c, dict) and c.get("index", 0) == 0, f"{where}: candidate index 0 expected")
    content = c.get("content")
    if content is not None:
        need(isinstance(content, dict) and content.get("role", "model") == "model", f"{where}: content role model")
        need(isinstance(content.get("parts", []), list), f"{where}: parts must be a list")
        for i, p in enumerate(content.get("parts", [])):
            acc.part(p, f"{where}.parts[{i}]")
    if "finishReason" in c:
        need(c["finishReason"] in FINISH_REASONS, f"{where}: unknown finishReason {c['finishReason']!r}")
        need(not strict or last, f"{where}: finishReason before the last event")
        acc.end_call()
        s.stop_reason = c["finishReason"]


def _unwrap(obj: Any, wrapped: bool | None, where: str) -> tuple[Any, bool]:
    """A Code Assist (``v1internal``) event ``{"response": GenerateContentResponse}`` -> (the response, True).
    ``wrapped``: True, every event but an error must be wrapped; False, none may be; None, either."""
    if isinstance(obj, dict) and "candidates" not in obj and "error" not in obj and type(obj.get("response")) is dict:
        need(wrapped is not False, f'{where}: a Code Assist {{"response": ...}} event in a plain Gemini stream')
        return obj["response"], True
    if wrapped and isinstance(obj, dict) and "error" not in obj:
        raise AssertionError(f'{where}: a Code Assist stream\'s events are wrapped as {{"response": ...}}')
    return obj, False


def stream_checker(s: Summary, strict: bool = True, wrapped: bool | None = None) -> Checker:
    """The SSE stream grammar, incremental. An event whose verdict depends on being the last one (usage or
    finishReason in strict mode, an error, a blocked prompt) is held back until the next frame or the end;
    any other is checked as it comes (and a text-only one may repeat: ``replay``). ``wrapped``: the events
    are Code Assist's ``{"response": ...}`` (True), plain (False) or either (None, the default)."""
    acc = _Acc(strict)
    acc.s = s
    held: Any = None
    n = -1
    hot: Any = None
    while True:
        f = yield hot
        hot = None
        if f is not None:
            need(f.event is None, f"frame #{f.n}: Gemini events have no event name")
            obj, was_wrapped = _unwrap(f.json(), wrapped, f"event #{n + 1}")
        if held is not None:
            if _checked(acc, held, n, f is None):
                need(f is None, f"event #{n}: nothing may follow an error event")
                return
            held = None
        if f is None:
            break
        n += 1
        if _needs_last(obj, strict):
            held = obj
        else:
            _checked(acc, obj, n, False)
            hot = _hot(obj, acc)
            if hot is not None and was_wrapped:
                hot = tuple((("response", *path), v, a) for path, v, a in hot)
    _end(acc)


def _checked(acc: _Acc, obj: Any, n: int, last: bool) -> bool:
    """``_one`` with its violation tied to event ``n``."""
    try:
        return _one(acc, obj, n, last)
    except EventError:  # pragma: no cover - _one raises plain AssertionErrors
        raise
    except AssertionError as e:
        raise EventError(n, str(e)) from None


def _needs_last(obj: Any, strict: bool) -> bool:
    """True when the event's verdict depends on whether it is the stream's last one."""
    if not isinstance(obj, dict) or "error" in obj or obj.get("candidates") is None:
        return True
    if not strict:
        return False
    if "usageMetadata" in obj:
        return True
    cands = obj["candidates"]
    return not isinstance(cands, list) or any(isinstance(c, dict) and "finishReason" in c for c in cands)


_TEXT = ("candidates", 0, "content", "parts", 0, "text")


def _hot(obj: dict[str, Any], acc: _Acc) -> Any:
    """The variable field of a one-text-part event that was just checked (``replay``), or None."""
    c = obj["candidates"][0]
    content = c.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if "finishReason" in c or not parts or len(parts) != 1 or acc.call is not None:
        return None
    p = parts[0]
    if p.keys() == {"text"}:
        return ((_TEXT, p["text"], None),)
    if p.keys() == {"text", "thought"}:
        return ((_TEXT, p["text"], acc.s.add_thinking),)
    return None


def _one(acc: _Acc, obj: Any, n: int, last: bool) -> bool:
    """Check one event; True when it is an error event (the end of the stream)."""
    where = f"event #{n}"
    need(isinstance(obj, dict), f"{where}: must be a JSON object")
    acc.s.events += 1
    if "error" in obj:
        err = validate_error_body(obj, strict=acc.strict)
        acc.s.error = {"code": err.get("status"), "message": err["message"]}
        return True
    _event(obj, acc, where, last)
    return False


def _end(acc: _Acc) -> None:
    acc.end_call()
    need(acc.s.stop_reason is not None, "stream ended without finishReason")
    if acc.strict:
        need(bool(acc.s.usage), "the last event must carry usageMetadata")


def validate_stream(data: bytes, *, strict: bool = True, array: bool = False) -> Summary:
    if not array:
        frames, _ = parse_sse(data, strict=strict)
        s = Summary()
        drive(stream_checker(s, strict), frames)
        return s
    objs = json.loads(data)
    need(isinstance(objs, list), "gemini array stream: a JSON array expected")
    acc = _Acc(strict)
    for n, wrapped_obj in enumerate(objs):
        obj, _ = _unwrap(wrapped_obj, None, f"event #{n}")
        if _one(acc, obj, n, n == len(objs) - 1):
            need(n == len(objs) - 1, f"event #{n}: nothing may follow an error event")
            return acc.s
    _end(acc)
    return acc.s


def validate_response(body: bytes | str | dict, *, strict: bool = True) -> Summary:
    obj, _ = _unwrap(load_body(body), None, "response")
    need("error" not in obj, "a response body, not an error")
    acc = _Acc(strict)
    _event(obj, acc, "response", True)
    if strict or "candidates" in obj:
        need(acc.s.stop_reason is not None, "response without finishReason")
    acc.end_call()
    return acc.s
