"""OpenAI Chat Completions -> IR: requests, whole responses, errors and the stream decoder.

The stream decoder synthesizes block start/stop (Chat has none), as openai-python's
``ChoiceEventState`` does: a text/thinking/refusal block closes when another kind starts; tool-call
blocks stay open until ``finish_reason`` (arguments of parallel calls may interleave by index).
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any

import orjson
from pydantic import ValidationError

from dragoman.errors import ClientRequestError
from dragoman.errors import UnsupportedFeatureError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import StreamError
from dragoman.ir.events import StreamEvent
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.mapping import chat_stop
from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import Part
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
from dragoman.protocols import _openai_errors
from dragoman.protocols._checks import COMPACT_AT
from dragoman.protocols._checks import ToolArgs
from dragoman.protocols._checks import token_count
from dragoman.protocols._wire import describe_validation_error
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamDecoder
from dragoman.protocols.openai_chat import models as m
from dragoman.sse.events import SSEEvent

logger = logging.getLogger(__name__)
#: hot-path constant (one global lookup instead of a global plus an attribute per text delta)
_TEXT = BlockKind.TEXT
_THINKING = BlockKind.THINKING

_EFFORTS = {"minimal", "low", "medium", "high", "xhigh"}


# ---------------------------------------------------------------- shared helpers


def split_data_url(url: str) -> tuple[str | None, str] | None:
    """``data:<media>;base64,<data>`` -> (media_type, data); None when not a base64 data URL."""
    if not url.startswith("data:"):
        return None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    media = head[: -len(";base64")] or None
    return media, data


def decode_usage(u: Any) -> Usage | None:
    """Chat usage (incl. DeepSeek ``prompt_cache_hit_tokens``) -> IR usage (input = total prompt)."""
    if not isinstance(u, dict):
        return None
    out = Usage()
    pt = u.get("prompt_tokens")
    if type(pt) is int:
        out.input_tokens = pt
    ct = u.get("completion_tokens")
    if type(ct) is int:
        out.output_tokens = ct
    ptd = u.get("prompt_tokens_details")
    if isinstance(ptd, dict):
        cached = ptd.get("cached_tokens")
        if type(cached) is int:
            out.cache_read_tokens = cached
        cw = ptd.get("cache_write_tokens")
        if type(cw) is int and cw:
            out.cache_creation_tokens = cw
    hit = u.get("prompt_cache_hit_tokens")
    if type(hit) is int and (out.cache_read_tokens is None or hit > out.cache_read_tokens):
        out.cache_read_tokens = hit
    ctd = u.get("completion_tokens_details")
    if isinstance(ctd, dict):
        rt = ctd.get("reasoning_tokens")
        if type(rt) is int:
            out.reasoning_tokens = rt
    # counts no encoder can write (above 64 bits) or negative ones: a broken upstream, not a crash
    token_count(out.input_tokens, "prompt_tokens")
    token_count(out.output_tokens, "completion_tokens")
    token_count(out.cache_read_tokens, "cached_tokens")
    token_count(out.cache_creation_tokens, "cache_write_tokens")
    token_count(out.reasoning_tokens, "reasoning_tokens")
    return out


def _text_of(content: Any, where: str) -> str:
    """System/developer/tool content (string or text parts) -> one string."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for i, p in enumerate(content):
        t = p.get("type")
        if t in ("text", "input_text", "output_text") and isinstance(p.get("text"), str):
            texts.append(p["text"])
        else:
            raise ClientRequestError(f"{where}.content[{i}]: unsupported content part type {t!r} here")
    return "".join(texts) if len(texts) <= 1 else "\n".join(texts)


def _text_parts(content: Any, where: str) -> list[TextPart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    out = []
    for i, p in enumerate(content):
        t = p.get("type")
        if t in ("text", "input_text", "output_text") and isinstance(p.get("text"), str):
            out.append(TextPart(p["text"]))
        else:
            raise ClientRequestError(f"{where}.content[{i}]: unsupported content part type {t!r} here")
    return out


def _user_parts(content: Any, where: str, dropped) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    out: list[Part] = []
    for i, p in enumerate(content):
        t = p.get("type")
        loc = f"{where}.content[{i}]"
        if t == "text":
            if not isinstance(p.get("text"), str):
                raise ClientRequestError(f"{loc}.text: must be a string")
            out.append(TextPart(p["text"]))
        elif t == "image_url":
            iu = p.get("image_url")
            url = iu.get("url") if isinstance(iu, dict) else iu
            if not isinstance(url, str):
                raise ClientRequestError(f"{loc}.image_url.url: must be a string")
            detail = iu.get("detail") if isinstance(iu, dict) else None
            split = split_data_url(url)
            if split is not None:
                out.append(ImagePart(data=split[1], media_type=split[0], detail=detail))
            else:
                out.append(ImagePart(url=url, detail=detail))
        elif t == "file":
            f = p.get("file")
            if not isinstance(f, dict):
                raise ClientRequestError(f"{loc}.file: must be an object")
            fd = f.get("file_data")
            part = FilePart(filename=f.get("filename"), file_id=f.get("file_id"))
            if isinstance(fd, str):
                split = split_data_url(fd)
                if split is not None:
                    part.media_type, part.data = split
                else:
                    part.data = fd
            out.append(part)
        elif t == "input_audio":
            dropped.add("messages.content.input_audio")
        else:
            raise ClientRequestError(f"{loc}: unsupported content part type {t!r}")
    return out


def _tool_call_part(tc: m.ToolCall, where: str) -> ToolCallPart:
    if tc.type == "custom" or tc.custom is not None:
        if tc.custom is None:
            raise ClientRequestError(f"{where}.custom: required for a custom tool call")
        return ToolCallPart(id=tc.id or "", name=tc.custom.name, arguments=tc.custom.input, kind="custom")
    if tc.function is None or not tc.function.name:
        raise ClientRequestError(f"{where}.function.name: required")
    if not tc.id:
        raise ClientRequestError(f"{where}.id: required")
    return ToolCallPart(id=tc.id, name=tc.function.name, arguments=tc.function.arguments or "{}")


# ---------------------------------------------------------------- requests


def decode_request(body: dict[str, Any]) -> Request:
    try:
        wire = m.REQUEST_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise ClientRequestError(f"invalid Chat Completions request: {describe_validation_error(e)}") from e
    if wire.n is not None and wire.n > 1:
        raise UnsupportedFeatureError("n > 1 (several choices) is not supported by the translated upstream")
    req = Request(model=wire.model)
    dropped = req.dropped
    for key in body:
        if key not in m.KNOWN_REQUEST_KEYS:
            dropped.add(key)

    custom_names: set[str] = set()
    # tools
    for i, t in enumerate(wire.tools or []):
        if t.type == "function":
            if t.function is None:
                raise ClientRequestError(f"tools[{i}].function: required for a function tool")
            f = t.function
            req.tools.append(Tool(name=f.name, description=f.description, parameters=f.parameters, strict=f.strict))
        elif t.type == "custom":
            if t.custom is None:
                raise ClientRequestError(f"tools[{i}].custom: required for a custom tool")
            c = t.custom
            req.tools.append(Tool(name=c.name, description=c.description, kind="custom", format=c.format))
            custom_names.add(c.name)
        else:
            req.tools.append(Tool(name=t.type, kind="builtin", raw=t.model_dump(exclude_none=True)))
    for f in wire.functions or []:
        req.tools.append(Tool(name=f.name, description=f.description, parameters=f.parameters, strict=f.strict))

    req.tool_choice = _tool_choice(wire.tool_choice if wire.tool_choice is not None else wire.function_call)
    req.parallel_tool_calls = wire.parallel_tool_calls
    req.max_tokens = wire.max_completion_tokens if wire.max_completion_tokens is not None else wire.max_tokens
    req.temperature = wire.temperature
    req.top_p = wire.top_p
    if isinstance(wire.stop, str):
        req.stop = [wire.stop]
    elif wire.stop:
        req.stop = list(wire.stop)
    req.stream = bool(wire.stream)
    if wire.stream_options is not None and wire.stream_options.include_usage is not None:
        req.include_usage = wire.stream_options.include_usage
    req.user = wire.user
    req.reasoning = _reasoning(wire.reasoning_effort, wire.reasoning)
    req.response_format = _response_format(wire.response_format)

    _decode_messages(wire.messages, req, custom_names)
    return req


def _tool_choice(tc: Any) -> ToolChoice | None:
    if tc is None:
        return None
    if isinstance(tc, str):
        if tc == "auto":
            return ToolChoice("auto")
        if tc == "none":
            return ToolChoice("none")
        if tc == "required":
            return ToolChoice("any")
        raise ClientRequestError(f"tool_choice: unknown value {tc!r} (auto, none, required or an object)")
    t = tc.get("type")
    if t == "function" or (t is None and "name" in tc):
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
        name = fn.get("name")
        if not isinstance(name, str):
            raise ClientRequestError("tool_choice.function.name: required")
        return ToolChoice("tool", name)
    if t == "custom" and isinstance(tc.get("custom"), dict):
        return ToolChoice("tool", tc["custom"].get("name"))
    if t == "allowed_tools":
        mode = (tc.get("allowed_tools") or {}).get("mode")
        return ToolChoice("any" if mode == "required" else "auto")
    raise ClientRequestError(f"tool_choice.type: unknown value {t!r}")


def _reasoning(effort: str | None, openrouter: dict[str, Any] | None) -> Reasoning | None:
    if effort is not None:
        if effort == "none":
            return Reasoning(enabled=False)
        return Reasoning(enabled=True, effort=effort)
    if openrouter:  # OpenRouter's {"effort", "max_tokens", "enabled", "exclude"} (claude-code-router sends it)
        eff = openrouter.get("effort")
        budget = openrouter.get("max_tokens")
        if isinstance(eff, str) and eff in _EFFORTS:
            return Reasoning(enabled=True, effort=eff)
        if isinstance(budget, int):
            return Reasoning(enabled=True, budget_tokens=budget)
        if openrouter.get("enabled") is not None:
            return Reasoning(enabled=bool(openrouter["enabled"]))
    return None


def _response_format(rf: dict[str, Any] | None) -> ResponseFormat | None:
    if rf is None:
        return None
    t = rf.get("type")
    if t == "json_schema":
        js = rf.get("json_schema")
        if not isinstance(js, dict):
            raise ClientRequestError("response_format.json_schema: required for type json_schema")
        return ResponseFormat(type="json_schema", name=js.get("name"), schema=js.get("schema"), strict=js.get("strict"))
    if t in ("json_object", "text"):
        return ResponseFormat(type=t)
    raise ClientRequestError(f"response_format.type: unknown value {t!r}")


def _decode_messages(msgs: list[Any], req: Request, custom_names: set[str]) -> None:
    out = req.messages
    dropped = req.dropped
    leading = True
    # legacy function_call: synthesized ids, answered in order by name
    legacy_pending: dict[str, list[str]] = {}
    legacy_n = 0
    for i, msg in enumerate(msgs):
        where = f"messages[{i}]"
        role = msg.role
        if role in ("system", "developer"):
            text = _text_of(msg.content, where)
            if leading:
                if text:
                    req.system.append(TextPart(text))
                continue
            out.append(Message("system", [TextPart(text)], source_role=role))
            continue
        leading = False
        if role == "user":
            out.append(Message("user", _user_parts(msg.content, where, dropped)))
        elif role == "assistant":
            parts: list[Part] = []
            reasoning = msg.reasoning_content if msg.reasoning_content is not None else msg.reasoning
            if reasoning:
                parts.append(ThinkingPart(text=reasoning))
            if isinstance(msg.content, str):
                if msg.content:
                    parts.append(TextPart(msg.content))
            elif msg.content:
                for j, p in enumerate(msg.content):
                    t = p.get("type")
                    if t == "text" and isinstance(p.get("text"), str):
                        parts.append(TextPart(p["text"]))
                    elif t == "refusal" and isinstance(p.get("refusal"), str):
                        parts.append(RefusalPart(p["refusal"]))
                    elif t == "thinking":
                        parts.append(ThinkingPart(text=_mistral_thinking(p.get("thinking"))))
                    else:
                        raise ClientRequestError(f"{where}.content[{j}]: unsupported content part type {t!r}")
            if msg.refusal:
                parts.append(RefusalPart(msg.refusal))
            for j, tc in enumerate(msg.tool_calls or []):
                part = _tool_call_part(tc, f"{where}.tool_calls[{j}]")
                if part.kind == "function" and part.name in custom_names:
                    part.kind = "custom"
                    part.arguments = _unwrap_custom_args(part.arguments)
                parts.append(part)
            if msg.function_call is not None and msg.function_call.name:
                legacy_n += 1
                cid = f"call_legacy_{legacy_n}"
                legacy_pending.setdefault(msg.function_call.name, []).append(cid)
                parts.append(
                    ToolCallPart(id=cid, name=msg.function_call.name, arguments=msg.function_call.arguments or "{}")
                )
            out.append(Message("assistant", parts))
        elif role in ("tool", "function"):
            if role == "tool":
                cid = msg.tool_call_id
            else:
                ids = legacy_pending.get(msg.name) or []
                if not ids:
                    dropped.add("messages.function")
                    continue
                cid = ids.pop(0)
            result = ToolResultPart(tool_call_id=cid, content=list(_text_parts_or_images(msg.content, where, dropped)))
            prev = out[-1] if out else None
            if (
                prev is not None
                and prev.role == "user"
                and prev.parts
                and all(isinstance(p, ToolResultPart) for p in prev.parts)
            ):
                prev.parts.append(result)
            else:
                out.append(Message("user", [result]))
        else:  # pragma: no cover - the discriminated union rejects other roles
            raise ClientRequestError(f"{where}.role: unknown role {role!r}")
    # mark custom tool results
    if custom_names:
        custom_ids = {p.id for msg in out for p in msg.parts if isinstance(p, ToolCallPart) and p.kind == "custom"}
        for msg in out:
            for p in msg.parts:
                if isinstance(p, ToolResultPart) and p.tool_call_id in custom_ids:
                    p.kind = "custom"


def _text_parts_or_images(content: Any, where: str, dropped) -> list[TextPart | ImagePart | FilePart]:
    parts = _user_parts(content, where, dropped)
    return [p for p in parts if isinstance(p, (TextPart, ImagePart, FilePart))]


def _mistral_thinking(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "".join(p.get("text", "") for p in v if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _unwrap_custom_args(arguments: str) -> str:
    """``{"input": "<raw>"}`` (how a custom tool travels as a function) -> the raw input."""
    try:
        obj = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(obj, dict) and isinstance(obj.get(CUSTOM_TOOL_PARAM), str):
        return obj[CUSTOM_TOOL_PARAM]
    return arguments


# ---------------------------------------------------------------- whole responses


def decode_response(body: dict[str, Any], ctx: Context) -> Response:
    try:
        wire = m.COMPLETION_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise UpstreamProtocolError(f"invalid Chat Completions response: {describe_validation_error(e)}") from e
    if not wire.choices:
        raise UpstreamProtocolError("Chat Completions response has no choices")
    choice = wire.choices[0]
    msg = choice.message
    custom = ctx.custom_tools()
    content: list[Any] = []
    reasoning = msg.reasoning_content if msg.reasoning_content is not None else msg.reasoning
    if reasoning:
        content.append(ThinkingPart(text=reasoning))
    if isinstance(msg.content, str):
        if msg.content:
            content.append(TextPart(msg.content))
    elif msg.content:
        for p in msg.content:
            t = p.get("type")
            if t == "thinking":
                content.append(ThinkingPart(text=_mistral_thinking(p.get("thinking"))))
            elif t == "text" and isinstance(p.get("text"), str):
                content.append(TextPart(p["text"]))
            elif t == "refusal" and isinstance(p.get("refusal"), str):
                content.append(RefusalPart(p["refusal"]))
            else:
                ctx.dropped.add(f"message.content.{t}")
    if msg.refusal:
        content.append(RefusalPart(msg.refusal))
    if getattr(msg, "annotations", None):
        ctx.dropped.add("message.annotations")
    for tc in msg.tool_calls or []:
        if tc.custom is not None:
            content.append(ToolCallPart(id=tc.id or "", name=tc.custom.name, arguments=tc.custom.input, kind="custom"))
            continue
        if tc.function is None or not tc.function.name:
            raise UpstreamProtocolError("Chat Completions tool call without function.name")
        args = tc.function.arguments or "{}"
        if tc.function.name in custom:
            content.append(
                ToolCallPart(id=tc.id or "", name=tc.function.name, arguments=_unwrap_custom_args(args), kind="custom")
            )
        else:
            content.append(ToolCallPart(id=tc.id or "", name=tc.function.name, arguments=args))
    if msg.function_call is not None and msg.function_call.name:
        content.append(
            ToolCallPart(id="call_legacy_1", name=msg.function_call.name, arguments=msg.function_call.arguments or "{}")
        )
    stop = chat_stop(choice.finish_reason)
    return Response(
        id=wire.id,
        model=wire.model,
        content=content,
        stop_reason=stop,
        usage=decode_usage(wire.usage) or Usage(),
        created=wire.created,
    )


# ---------------------------------------------------------------- errors

decode_error = _openai_errors.decode_error
error_info_from_object = _openai_errors.error_info_from_object


# ---------------------------------------------------------------- streams


class Phase(Enum):
    WAITING = "waiting"  # no chunk yet
    STREAMING = "streaming"  # MessageStart sent, no finish_reason yet
    FINISHED = "finished"  # finish_reason seen, blocks closed, MessageDelta held for usage
    DONE = "done"  # MessageDelta + MessageStop sent
    ERROR = "error"  # an in-band error was returned; the rest is ignored


_WAITING = Phase.WAITING
_STREAMING = Phase.STREAMING
_FINISHED = Phase.FINISHED
_DONE = Phase.DONE
_ERROR = Phase.ERROR


class _Tool:
    __slots__ = ("block", "custom", "args")

    def __init__(self, block: int, custom: bool) -> None:
        self.block = block
        self.custom = custom
        #: custom tools: buffered to unwrap {"input": ...}; function tools: ToolArgs' fragment list
        self.args: list[str] = []


class ChatStreamDecoder(StreamDecoder):
    """Chat SSE chunks -> IR events. One instance per stream."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.done = False
        self.phase = Phase.WAITING
        self._next_block = 0
        self._cur: int | None = None  # the open text/thinking/refusal block
        self._cur_kind: BlockKind | None = None
        self._tools: dict[int, _Tool] = {}  # Chat tool index -> block
        self._stop: StopReason | None = None
        self._usage: Usage | None = None
        self._custom = ctx.custom_tools()
        self._unknown_logged = False
        #: arguments of the open (non-custom) tool calls, checked as JSON at the finish_reason
        self._args = ToolArgs()

    # -- helpers

    def _new_block(self) -> int:
        i = self._next_block
        self._next_block = i + 1
        return i

    def _switch(self, kind: BlockKind, out: list[StreamEvent]) -> int:
        """The open text/thinking/refusal block of ``kind``, closing another kind first."""
        if self._cur_kind is kind:
            return self._cur  # type: ignore[return-value]
        if self._cur is not None:
            out.append(BlockStop(self._cur))
        idx = self._new_block()
        self._cur = idx
        self._cur_kind = kind
        out.append(BlockStart(idx, kind))
        return idx

    def _close_current(self, out: list[StreamEvent]) -> None:
        if self._cur is not None:
            out.append(BlockStop(self._cur))
            self._cur = None
            self._cur_kind = None

    def _finish(self) -> list[StreamEvent]:
        self.phase = Phase.DONE
        self.done = True
        return [MessageDelta(self._stop, self._usage), MessageStop()]

    def _add_usage(self, u: Any) -> None:
        usage = decode_usage(u)
        if usage is not None:
            self._usage = usage if self._usage is None else self._usage.merged(usage)

    # -- interface

    def feed(self, ev: SSEEvent) -> list[StreamEvent]:
        # one frame per event: the try costs nothing (zero-cost exceptions, CPython 3.11+)
        try:
            data = ev.data
            if data[:6] == "[DONE]":
                return self._on_done()
            phase = self.phase
            if phase is _DONE or phase is _ERROR:
                logger.debug("Chat chunk after the end of the message ignored")
                return []
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError as e:
                if not data.strip():
                    return []
                raise UpstreamProtocolError(
                    f"Chat stream chunk is not valid JSON ({e}) in phase {self.phase.name}"
                ) from e
            if type(obj) is not dict:  # orjson builds exact dicts
                raise UpstreamProtocolError(f"Chat stream chunk is not a JSON object in phase {self.phase.name}")
            err = obj.get("error")
            if err is not None or ev.event == "error":
                self.phase = Phase.ERROR
                self.done = True
                return [StreamError(error_info_from_object(err if err is not None else obj, None))]
            out: list[StreamEvent] = []
            if phase is _WAITING:
                created = obj.get("created")
                out.append(
                    MessageStart(
                        id=str(obj.get("id") or ""),
                        model=str(obj.get("model") or ""),
                        usage=None,
                        created=created if type(created) is int else None,  # not a bool
                    )
                )
                self.phase = phase = _STREAMING
            u = obj.get("usage")
            if u is not None:
                self._add_usage(u)
            else:
                xg = obj.get("x_groq")
                if isinstance(xg, dict) and isinstance(xg.get("usage"), dict):
                    self._add_usage(xg["usage"])
            choices = obj.get("choices")
            if phase is _FINISHED:
                # after finish_reason: the usage chunk (choices: []) releases the held MessageDelta
                if u is not None and not choices:
                    out.extend(self._finish())
                return out
            if choices:
                choice = choices[0]
                if type(choice) is dict:
                    delta = choice.get("delta")
                    if delta:
                        c = delta.get("content")
                        # fast path: a plain text delta (optionally with the role), the bulk of every stream
                        if c.__class__ is str and len(delta) == (2 if "role" in delta else 1):
                            if c:
                                idx = self._cur if self._cur_kind is _TEXT else self._switch(_TEXT, out)
                                out.append(TextDelta(idx, c))  # type: ignore[arg-type]
                        elif c is None and len(delta) == 1 and (tcs := delta.get("tool_calls")):
                            # fast path: tool_calls only (what _delta would do, minus six lookups)
                            for pos, tc in enumerate(tcs):
                                self._tool_delta(tc, pos, out)
                        elif (
                            c is None
                            and len(delta) == 2
                            and "content" in delta
                            and (r := delta.get("reasoning_content")).__class__ is str
                            and r
                        ):
                            # fast path: {"content": null, "reasoning_content": "..."} (DeepSeek, vLLM)
                            idx = self._cur if self._cur_kind is _THINKING else self._switch(_THINKING, out)
                            out.append(ThinkingDelta(idx, r))
                        elif isinstance(delta, dict):
                            self._delta(delta, out)
                    fr = choice.get("finish_reason")
                    if fr is not None:
                        self._on_finish(fr, out)
            return out
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
            # the chunk is hand-parsed for speed: a field of the wrong JSON type lands here
            raise UpstreamProtocolError(
                f"malformed Chat stream chunk ({type(e).__name__}: {e}) in phase {self.phase.name}"
            ) from e

    def _delta(self, delta: dict[str, Any], out: list[StreamEvent]) -> None:
        # reasoning first: it precedes text in the same chunk
        r = delta.get("reasoning_content")
        if not r:
            r = delta.get("reasoning")
        if r and isinstance(r, str):
            out.append(ThinkingDelta(self._switch(BlockKind.THINKING, out), r))
        else:
            rd = delta.get("reasoning_details")
            if rd:
                self._reasoning_details(rd, out)
        c = delta.get("content")
        if c:
            if isinstance(c, str):
                out.append(TextDelta(self._switch(BlockKind.TEXT, out), c))
            elif isinstance(c, list):
                for p in c:
                    if not isinstance(p, dict):
                        continue
                    t = p.get("type")
                    if t == "text":
                        text = p.get("text")
                        if text:
                            out.append(TextDelta(self._switch(BlockKind.TEXT, out), text))
                    elif t == "thinking":
                        text = _mistral_thinking(p.get("thinking"))
                        if text:
                            out.append(ThinkingDelta(self._switch(BlockKind.THINKING, out), text))
                    else:
                        self.ctx.dropped.add(f"delta.content.{t}")
        ref = delta.get("refusal")
        if ref and isinstance(ref, str):
            out.append(TextDelta(self._switch(BlockKind.REFUSAL, out), ref))
        tcs = delta.get("tool_calls")
        if tcs:
            for pos, tc in enumerate(tcs):
                self._tool_delta(tc, pos, out)
        if delta.get("annotations"):
            self.ctx.dropped.add("delta.annotations")

    def _reasoning_details(self, rd: Any, out: list[StreamEvent]) -> None:
        if not isinstance(rd, list):
            return
        for d in rd:
            if not isinstance(d, dict):
                continue
            t = d.get("type")
            if t == "reasoning.text" and d.get("text"):
                out.append(ThinkingDelta(self._switch(BlockKind.THINKING, out), d["text"]))
            elif t == "reasoning.summary" and d.get("summary"):
                out.append(ThinkingDelta(self._switch(BlockKind.THINKING, out), d["summary"], summary=True))
            elif t == "reasoning.encrypted":
                self.ctx.dropped.add("reasoning_details.encrypted")

    def _tool_delta(self, tc: Any, pos: int, out: list[StreamEvent]) -> None:
        if not isinstance(tc, dict):
            raise UpstreamProtocolError(f"Chat tool_calls entry is not an object in phase {self.phase.name}")
        key = tc.get("index")
        if not isinstance(key, int):
            key = pos  # some providers (Gemini's compat layer) omit the index
        fn = tc.get("function") or {}
        slot = self._tools.get(key)
        if slot is None:
            name = fn.get("name")
            if not name or type(name) is not str:
                raise UpstreamProtocolError(
                    f"Chat tool call index {key} started without function.name in phase {self.phase.name}"
                )
            if tc.get("id") is not None and type(tc.get("id")) is not str:
                raise UpstreamProtocolError(f"Chat tool call index {key} has a non-string id in phase {self.phase.name}")
            self._close_current(out)
            custom = name in self._custom
            slot = _Tool(self._new_block(), custom)
            self._tools[key] = slot
            if not custom:  # the checker's fragment list, extended below without a call per fragment
                slot.args = self._args.start(slot.block, name)
            tid = tc.get("id") or f"call_{key}"
            out.append(
                BlockStart(
                    slot.block,
                    BlockKind.CUSTOM_TOOL_CALL if custom else BlockKind.TOOL_CALL,
                    tool_call_id=tid,
                    name=name,
                )
            )
        args = fn.get("arguments")
        if args:
            if type(args) is not str:  # an object or list here must never reach an encoder as a fragment
                raise UpstreamProtocolError(
                    f"Chat tool call index {key} arguments are not a string in phase {self.phase.name}"
                )
            frags = slot.args
            frags.append(args)
            if not slot.custom:
                if len(frags) >= COMPACT_AT:  # as ToolArgs.add does
                    frags[:] = ["".join(frags)]
                out.append(ToolArgsDelta(slot.block, args))

    def _close_tools(self, out: list[StreamEvent]) -> None:
        for slot in self._tools.values():
            if slot.custom and slot.args:
                out.append(ToolArgsDelta(slot.block, _unwrap_custom_args("".join(slot.args))))
            elif not slot.custom:
                self._args.stop(slot.block)
            out.append(BlockStop(slot.block))
        self._tools.clear()

    def _on_finish(self, fr: Any, out: list[StreamEvent]) -> None:
        self._close_current(out)
        self._close_tools(out)
        self._stop = chat_stop(fr if isinstance(fr, str) else None)
        # tool arguments that are not JSON are an upstream fault, unless "length" cut them off
        self._args.check(self._stop)
        self.phase = Phase.FINISHED

    def _on_done(self) -> list[StreamEvent]:
        phase = self.phase
        if phase is Phase.DONE or phase is Phase.ERROR:
            return []
        if phase is Phase.FINISHED:
            return self._finish()
        if phase is Phase.WAITING:
            raise UpstreamProtocolError("Chat stream sent [DONE] before any chunk")
        # [DONE] without finish_reason: the upstream ended properly but omitted it; infer it
        logger.debug("Chat stream [DONE] without finish_reason; inferring it")
        out: list[StreamEvent] = []
        had_tools = bool(self._tools)
        self._close_current(out)
        self._close_tools(out)
        self._stop = StopReason.TOOL_USE if had_tools else StopReason.END_TURN
        self._args.check(self._stop)
        out.extend(self._finish())
        return out

    def close(self) -> list[StreamEvent]:
        phase = self.phase
        if phase is Phase.DONE or phase is Phase.ERROR:
            return []
        if phase is Phase.FINISHED:  # some local servers never send [DONE]
            return self._finish()
        raise UpstreamProtocolError(f"Chat stream ended before finish_reason (in phase {phase.name})")
