"""Strict validator for OpenAI Chat Completions: SSE streams, chat.completion bodies, error bodies.

Grammar (docs "Streaming" + openai-python's ChatCompletionStreamState)::

    data: chunk (role assistant) ... data: chunk (finish_reason) [data: usage chunk, choices: []] data: [DONE]
  | data: chunk ... data: {"error": {...}}          (no [DONE] after an error)

Tolerated in real recordings only (``strict=False``), each seen in tests/corpus:
* SSE comment lines (``: OPENROUTER PROCESSING`` keep-alives);
* non-OpenAI reasoning fields (``reasoning``, ``reasoning_details``) and Mistral's ``content`` as an
  array of ``{type: text|thinking}`` parts;
* tool-call indices that do not start at 0 (Anthropic's compatible endpoint numbers them after text);
* ``finish_reason`` repeated on several chunks (OpenRouter), and ``usage`` on a chunk that still has
  choices (DeepSeek, xAI, OpenRouter send it on the finish chunk instead of a separate chunk);
* an error chunk after ``finish_reason`` still followed by ``[DONE]`` (OpenRouter), and Groq's
  ``event: error`` frame for an in-band error;
* an unterminated last event (no blank line at EOF) and a missing ``[DONE]`` (chunks files);
* several choices (``n > 1``, openai-python's live recordings): chunks of choices 1, 2, ... interleave
  with choice 0's; the summary is choice 0, the one answer a single-answer client reads.

OpenRouter's ``reasoning_details`` (checked when present, strict or not): a list of entries, each with an
int ``index`` and a known ``type``; streamed pieces of one entry share its index and concatenate as the
official SDK's accumulator does (strict: a string field other than the text appears only once per entry).
The summary's ``signatures`` are the ``reasoning.text`` signatures, ``redacted`` the ``reasoning.encrypted``
entries. Strict: new indices come in order 0, 1, 2..., and the entries' text is the reasoning text.
"""

from __future__ import annotations

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
from dragoman.lint.chat_details import feed_details as _feed_details
from dragoman.lint.chat_details import summarize_details as _summarize_details
from dragoman.lint.replay import KEY
from dragoman.lint.sse import Frame
from dragoman.lint.sse import parse_sse

FINISH_REASONS = {"stop", "length", "tool_calls", "content_filter", "function_call"}


def _check_error(err: Any, where: str) -> dict[str, Any]:
    need(isinstance(err, dict), f"{where}: error must be an object")
    need(isinstance(err.get("message"), str), f"{where}: error.message must be a string")
    return err


def validate_error_body(body: bytes | str | dict, *, strict: bool = True) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}`` -> the inner error."""
    obj = load_body(body)
    err = _check_error(obj.get("error"), "chat error body")
    if strict:
        for k in ("type", "param", "code"):
            need(k in err, f"chat error body: error.{k} must be present (may be null)")
        need(isinstance(err["type"], str), "chat error body: error.type must be a string")
    return err


def _check_usage(u: Any, where: str) -> None:
    need(isinstance(u, dict), f"{where}: usage must be an object")
    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
        need(is_int(u.get(k)), f"{where}: usage.{k} must be an int, got {u.get(k)!r}")


_CONTENT = ("choices", 0, "delta", "content")
_REASONING = ("choices", 0, "delta", "reasoning_content")
_ARGS = ("choices", 0, "delta", "tool_calls", 0, "function", "arguments")
_ARGS_INDEX = ("choices", 0, "delta", "tool_calls", 0, "index")
_DETAIL = ("choices", 0, "delta", "reasoning_details", 0, "text")


def _detail_text(entry: dict[str, Any]) -> Any:
    def add(pieces: list[str]) -> None:
        entry["text"] = (entry.get("text") or "") + "".join(pieces)

    return add


def _hot(
    obj: dict[str, Any], d: dict[str, Any], s: Summary, tools: dict[int, list[Any]], details: dict[int, Any]
) -> Any:
    """The variable fields of a plain delta chunk that was just checked (``replay``), or None: the text,
    the reasoning text (and its one ``reasoning_details`` text entry) or one known call's arguments
    fragment, and OpenAI's ``obfuscation`` padding."""
    slots: list[Any] = []
    for k, v in d.items():
        if v is None:
            continue
        if k == "reasoning_details":
            e = v[0] if len(v) == 1 else None
            if e is None or e.keys() != {"type", "text", "index"} or type(e["text"]) is not str:
                return None
            entry = details.get(e["index"])
            if entry is None or entry["type"] != e["type"]:
                return None
            slots.append((_DETAIL, e["text"], _detail_text(entry)))
            continue
        if k == "content" and type(v) is str:
            slots.append((_CONTENT, v, None))
        elif k == "reasoning_content" and type(v) is str:
            slots.append((_REASONING, v, s.add_thinking))
        elif k == "tool_calls" and len(v) == 1 and v[0].keys() <= {"index", "function"}:
            fn = v[0].get("function")
            if v[0]["index"] not in tools or not isinstance(fn, dict) or fn.keys() != {"arguments"}:
                return None
            if type(fn["arguments"]) is not str:
                return None
            slots.append((_ARGS, fn["arguments"], tools[v[0]["index"]][2].extend))
            slots.append((_ARGS_INDEX, v[0]["index"], KEY))
        else:
            return None
    fields = sum(1 for slot in slots if slot[2] is not KEY)
    if not fields or fields > 2 or (fields == 2 and d.keys() != {"reasoning_content", "reasoning_details"}):
        return None
    if type(obj.get("obfuscation")) is str:
        slots.append((("obfuscation",), obj["obfuscation"], None))
    return tuple(slots)


class _Stream:
    """One Chat stream's grammar state (``stream_checker``)."""

    def __init__(self, s: Summary, strict: bool) -> None:
        self.s = s
        self.strict = strict
        self.done = False
        self.finished = False
        self.usage_seen = False
        self.first = True
        self.tools: dict[int, list[Any]] = {}  # index -> [id, name, [fragments]]
        self.order: list[int] = []
        self.details: dict[int, dict[str, Any]] = {}

    def event(self, f: Frame) -> Any:
        """Check one frame. -> its variable fields when it is a delta that may repeat (``replay``)."""
        s, strict = self.s, self.strict
        where = f"chunk #{f.n}"
        need(not self.done, f"{where}: data after [DONE]")
        need(s.error is None or (not strict and f.data == "[DONE]"), f"{where}: data after an error chunk")
        if f.event is not None:
            need(not strict, f"{where}: chat streams have no event: lines, got {f.event!r}")
            need(f.event == "error", f"{where}: unexpected event: {f.event!r}")
        if f.data == "[DONE]":
            self.done = True
            return None
        s.events += 1
        obj = f.json()
        need(isinstance(obj, dict), f"{where}: chunk must be an object")
        if obj.get("error") is not None or f.event == "error":
            self.error_chunk(obj, f.event, where)
            return None
        choices = self.chunk(obj, where)
        if choices == []:
            need(obj.get("usage") is not None or not strict, f"{where}: a chunk with choices: [] must carry usage")
            return None
        need(len(choices) == 1 or not strict, f"{where}: exactly one choice expected, got {len(choices)}")
        need(
            all(isinstance(c, dict) and is_int(c.get("index")) for c in choices),
            f"{where}: choices[].index must be an int",
        )
        need(choices[0]["index"] == 0 or not strict, f"{where}: choice index must be 0")
        ch = next((c for c in choices if c["index"] == 0), None)
        if ch is None:
            return None  # another choice of an n > 1 answer (non-strict only)
        return self.choice(obj, ch, len(choices), where)

    def error_chunk(self, obj: dict[str, Any], event: str | None, where: str) -> None:
        s = self.s
        s.error = _check_error(obj.get("error"), where)
        if not self.strict and event != "error":
            # OpenRouter: error chunk (with id/choices/usage) followed by [DONE]
            if isinstance(obj.get("usage"), dict):
                s.usage = obj["usage"]
            s.error = dict(s.error)
            return
        need(
            set(obj) == {"error"} or not self.strict,
            f"{where}: an error chunk carries only 'error', got keys {sorted(obj)}",
        )

    def chunk(self, obj: dict[str, Any], where: str) -> Any:
        """A chunk's own fields and its usage. -> its choices."""
        s, strict = self.s, self.strict
        need(
            obj.get("object") == "chat.completion.chunk",
            f"{where}: object must be 'chat.completion.chunk', got {obj.get('object')!r}",
        )
        need(isinstance(obj.get("id"), str) and obj["id"], f"{where}: id must be a non-empty string")
        if s.id is None:
            s.id = obj["id"]
        need(obj["id"] == s.id, f"{where}: id changed from {s.id!r} to {obj['id']!r}")
        need(is_int(obj.get("created")), f"{where}: created must be an int")
        need(isinstance(obj.get("model"), str), f"{where}: model must be a string")
        s.model = obj["model"]
        choices = obj.get("choices")
        need(isinstance(choices, list), f"{where}: choices must be a list")
        if obj.get("usage") is not None:
            _check_usage(obj["usage"], where)
            if strict:
                need(choices == [], f"{where}: usage must come in its own chunk with choices: []")
                need(self.finished, f"{where}: usage chunk before the finish_reason chunk")
            need(not self.usage_seen or not strict, f"{where}: second usage chunk")
            self.usage_seen = True
            s.usage = dict(obj["usage"])
        return choices

    def choice(self, obj: dict[str, Any], ch: dict[str, Any], n_choices: int, where: str) -> Any:
        """Choice 0 of a chunk. -> its variable fields when it is a plain delta (``replay``)."""
        s, strict = self.s, self.strict
        if strict:
            need(not self.usage_seen, f"{where}: choice chunk after the usage chunk")
        fr = ch.get("finish_reason")
        d = ch.get("delta")
        need(isinstance(d, dict), f"{where}: choice.delta must be an object")
        if self.first:
            need(
                d.get("role") == "assistant",
                f"{where}: first chunk's delta.role must be 'assistant', got {d.get('role')!r}",
            )
            self.first = False
        elif d.get("role") is not None and strict:
            need(d["role"] == "assistant", f"{where}: delta.role must be 'assistant'")
        if self.finished:
            if strict:
                raise AssertionError(f"{where}: choice chunk after the finish_reason chunk")
            need(fr in (None, s.stop_reason), f"{where}: finish_reason changed from {s.stop_reason!r} to {fr!r}")
        self.delta(d, where)
        hot = None
        if fr is None and not self.finished and obj.get("usage") is None and n_choices == 1:
            hot = _hot(obj, d, s, self.tools, self.details)
        if fr is not None:
            if fr not in FINISH_REASONS:
                raise AssertionError(f"{where}: finish_reason {fr!r} not in {sorted(FINISH_REASONS)}")
            if strict:
                need(not self.finished, f"{where}: second finish_reason")
            self.finished = True
            s.stop_reason = fr
        return hot

    def delta(self, d: dict[str, Any], where: str) -> None:
        s, strict = self.s, self.strict
        content = d.get("content")
        if isinstance(content, list) and not strict:  # Mistral magistral
            for part in content:
                if part.get("type") == "text":
                    s.text += part.get("text", "")
                elif part.get("type") == "thinking":
                    for t in part.get("thinking", []):
                        s.thinking += t.get("text", "")
        elif content is not None:
            need(isinstance(content, str), f"{where}: delta.content must be a string or null")
            s.text += content
        rc = d.get("reasoning_content")
        if rc is not None:
            need(isinstance(rc, str), f"{where}: delta.reasoning_content must be a string")
            s.thinking += rc
        if not strict and isinstance(d.get("reasoning"), str) and rc is None:
            s.thinking += d["reasoning"]
        if d.get("reasoning_details") is not None:
            _feed_details(d["reasoning_details"], self.details, where, strict)
        if d.get("refusal") is not None:
            need(isinstance(d["refusal"], str), f"{where}: delta.refusal must be a string")
            s.refusal += d["refusal"]
        tcs = d.get("tool_calls")
        if tcs is not None:
            need(isinstance(tcs, list), f"{where}: delta.tool_calls must be a list")
            for tc in tcs:
                self.tool_call(tc, where)

    def tool_call(self, tc: Any, where: str) -> None:
        tools, strict = self.tools, self.strict
        idx = tc.get("index")
        need(is_int(idx), f"{where}: tool_calls[].index must be an int")
        fn = tc.get("function") or {}
        if idx not in tools:
            if strict:
                need(idx == len(tools), f"{where}: new tool call index {idx}, expected {len(tools)}")
            need(isinstance(tc.get("id"), str) and tc["id"], f"{where}: new tool call {idx} must carry an id")
            need(tc.get("type") == "function", f"{where}: new tool call {idx} must carry type 'function'")
            need(
                isinstance(fn.get("name"), str) and fn["name"],
                f"{where}: new tool call {idx} must carry function.name",
            )
            tools[idx] = [tc["id"], fn["name"], []]
            self.order.append(idx)
        else:
            if tc.get("id") is not None:
                need(tc["id"] == tools[idx][0], f"{where}: tool call {idx} id changed")
            if strict:
                need(not fn.get("name"), f"{where}: tool call {idx} repeats function.name")
        a = fn.get("arguments")
        if a is not None:
            need(isinstance(a, str), f"{where}: function.arguments must be a string")
            tools[idx][2].append(a)

    def end(self) -> None:
        s, strict = self.s, self.strict
        if strict:
            if s.error is None:
                need(self.done, "chat stream does not end with data: [DONE]")
                need(self.finished, "chat stream has no chunk with a finish_reason")
        _summarize_details(self.details, s, strict)
        for idx in self.order:
            tid, name, frags = self.tools[idx]
            args = "".join(frags)
            if s.stop_reason in ("tool_calls", "stop") and s.error is None:
                parse_json_object(args, f"tool call {idx} {name!r}")
            s.tool_calls.append(ToolCall(tid, name, args))
        if strict and s.stop_reason == "tool_calls":
            need(bool(self.order), "finish_reason tool_calls without any tool call")


def stream_checker(s: Summary, strict: bool = True) -> Checker:
    """The stream grammar, incremental: send one ``Frame`` at a time, then ``None`` (see ``drive``)."""
    return run_stream(_Stream(s, strict), "chat")


def validate_stream(data: bytes, *, strict: bool = True) -> Summary:
    frames, _ = parse_sse(data, strict=strict)
    s = Summary()
    drive(stream_checker(s, strict), frames)
    s.search = search.chat_stream(data, strict=strict)  # hosted web search and citations (``validators.search``)
    return s


def validate_completion(body: bytes | str | dict, *, strict: bool = True) -> Summary:
    """A non-streaming chat.completion body."""
    obj = load_body(body)
    s = Summary()
    need(obj.get("object") == "chat.completion", f"object must be 'chat.completion', got {obj.get('object')!r}")
    need(isinstance(obj.get("id"), str) and obj["id"], "id must be a non-empty string")
    need(is_int(obj.get("created")), "created must be an int")
    need(isinstance(obj.get("model"), str), "model must be a string")
    ch = obj.get("choices")
    need(isinstance(ch, list) and (len(ch) == 1 or (ch and not strict)), "exactly one choice expected")
    c = ch[0]
    need(c.get("index") == 0, "choice index must be 0")
    need(c.get("finish_reason") in FINISH_REASONS, f"finish_reason {c.get('finish_reason')!r} not allowed")
    m = c.get("message")
    need(isinstance(m, dict) and m.get("role") == "assistant", "message.role must be 'assistant'")
    need("content" in m, "message.content must be present (may be null)")
    need(m["content"] is None or isinstance(m["content"], str), "message.content must be a string or null")
    s.id, s.model, s.stop_reason = obj["id"], obj["model"], c["finish_reason"]
    s.text = m["content"] or ""
    if isinstance(m.get("reasoning_content"), str):
        s.thinking = m["reasoning_content"]
    if m.get("reasoning_details") is not None:
        details: dict[int, dict[str, Any]] = {}
        _feed_details(m["reasoning_details"], details, "message", strict)
        _summarize_details(details, s, strict)
    if isinstance(m.get("refusal"), str):
        s.refusal = m["refusal"]
    for i, tc in enumerate(m.get("tool_calls") or []):
        need(isinstance(tc.get("id"), str) and tc["id"], f"tool_calls[{i}].id must be non-empty")
        need(tc.get("type") == "function", f"tool_calls[{i}].type must be 'function'")
        fn = tc.get("function")
        need(
            isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"],
            f"tool_calls[{i}].function.name required",
        )
        need(isinstance(fn.get("arguments"), str), f"tool_calls[{i}].function.arguments must be a string")
        if c["finish_reason"] != "length":
            parse_json_object(fn["arguments"], f"tool_calls[{i}] {fn['name']!r}")
        s.tool_calls.append(ToolCall(tc["id"], fn["name"], fn["arguments"]))
    if strict and c["finish_reason"] == "tool_calls":
        need(bool(s.tool_calls), "finish_reason tool_calls without tool_calls")
    if obj.get("usage") is not None or strict:
        _check_usage(obj.get("usage"), "completion")
        s.usage = dict(obj["usage"])
    s.search = search.chat_completion(body, strict=strict)  # hosted web search and citations (``validators.search``)
    return s
