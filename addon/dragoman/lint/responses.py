"""Strict validator for OpenAI Responses: SSE streams, response objects, error bodies.

Grammar (docs "Streaming API responses" + openai-python's ResponseStreamState)::

    response.created response.in_progress
    ( output_item.added  <item events>  output_item.done )*      one item at a time, never overlapping
    response.completed | response.incomplete | response.failed
  | ... error response.failed

Every event: ``event:`` == data.type, ``sequence_number`` 0, 1, 2, ... No ``[DONE]``.

Tolerated in real recordings only (``strict=False``), each seen in tests/corpus:
* OpenRouter's /v1/responses: data-only frames without ``event:`` lines, a trailing ``data: [DONE]``,
  SSE comment keep-alives, and ``response.reasoning_text.done`` sent after the item's
  ``output_item.done``, and item ids in the terminal response that differ from the streamed ones, and
  a message item added before the reasoning item before it is done (overlapping items);
* a stream that ends without a final blank line (chunks files).
Concatenated multi-turn recordings are split with ``split_streams`` before validation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from dragoman.lint import Checker
from dragoman.lint import Summary
from dragoman.lint import ToolCall
from dragoman.lint import drive
from dragoman.lint import is_int
from dragoman.lint import load_body
from dragoman.lint import need
from dragoman.lint import parse_json_object
from dragoman.lint import search
from dragoman.lint.sse import Frame
from dragoman.lint.sse import parse_sse

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
HOSTED_PREFIXES = (
    "response.web_search_call.",
    "response.file_search_call.",
    "response.code_interpreter_call.",
    "response.code_interpreter_call_code.",
    "response.mcp_call.",
    "response.mcp_call_arguments.",
    "response.mcp_list_tools.",
    "response.image_generation_call.",
)
ITEM_EVENTS = {
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.output_text.annotation.added",
    "response.refusal.delta",
    "response.refusal.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
}


@dataclass
class _Part:
    type: str
    text: str = ""
    done: bool = False
    text_done: bool = False


@dataclass
class _Item:
    id: str
    output_index: int
    type: str
    added: dict[str, Any]
    parts: list[_Part] = field(default_factory=list)  # message content / reasoning content
    summary: list[_Part] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    args_done: str | None = None
    done: dict[str, Any] | None = None


def split_streams(data: bytes) -> list[bytes]:
    """Split a recording of several consecutive streams (one per agent turn) at each response.created."""
    text = data.decode("utf-8")
    out: list[str] = []
    cur: list[str] = []
    seen_created = False
    for block in text.split("\n\n"):
        created = '"type":"response.created"' in block.replace(" ", "")
        if created and seen_created:
            out.append("\n\n".join(cur) + "\n\n")
            cur = []
        seen_created = seen_created or created
        if block.strip():
            cur.append(block)
    if cur:
        out.append("\n\n".join(cur) + "\n\n")
    return [o.encode() for o in out]


def _essence(item: dict[str, Any]) -> dict[str, Any]:
    """What must agree between an item as done and the same item in the terminal response.
    (The API re-encrypts ``encrypted_content`` for the terminal object, so it is not compared.)"""
    t = item.get("type")
    out: dict[str, Any] = {"id": item.get("id"), "type": t}
    if t == "message":
        out["content"] = [(c.get("type"), c.get("text"), c.get("refusal")) for c in item.get("content") or []]
    elif t == "function_call":
        out.update({k: item.get(k) for k in ("call_id", "name", "arguments")})
    elif t == "custom_tool_call":
        out.update({k: item.get(k) for k in ("call_id", "name", "input")})
    elif t == "reasoning":
        out["summary"] = [c.get("text") for c in item.get("summary") or []]
        out["content"] = [c.get("text") for c in item.get("content") or []]
    return out


def _check_error_obj(err: Any, where: str) -> dict[str, Any]:
    need(isinstance(err, dict), f"{where}: error must be an object")
    need(isinstance(err.get("message"), str), f"{where}: error.message must be a string")
    return err


def validate_error_body(body: bytes | str | dict, *, strict: bool = True) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}`` (the OpenAI error shape) -> the inner error."""
    obj = load_body(body)
    err = _check_error_obj(obj.get("error"), "responses error body")
    if strict:
        for k in ("type", "param", "code"):
            need(k in err, f"responses error body: error.{k} must be present (may be null)")
    return err


def _check_usage(u: Any, where: str) -> None:
    need(isinstance(u, dict), f"{where}: usage must be an object, got {u!r}")
    for k in ("input_tokens", "output_tokens", "total_tokens"):
        need(is_int(u.get(k)), f"{where}: usage.{k} must be an int, got {u.get(k)!r}")
    need(u["total_tokens"] == u["input_tokens"] + u["output_tokens"], f"{where}: usage.total_tokens != input + output")


def _check_response(r: Any, where: str, status: set[str]) -> dict[str, Any]:
    need(isinstance(r, dict), f"{where}: response must be an object")
    need(isinstance(r.get("id"), str) and r["id"], f"{where}: response.id must be a non-empty string")
    need(r.get("object") == "response", f"{where}: response.object must be 'response', got {r.get('object')!r}")
    need(r.get("status") in status, f"{where}: response.status {r.get('status')!r} not in {sorted(status)}")
    need(isinstance(r.get("output"), list), f"{where}: response.output must be a list")
    need(isinstance(r.get("model"), str), f"{where}: response.model must be a string")
    need(is_int(r.get("created_at")), f"{where}: response.created_at must be an int")
    return r


def _collect_item(s: Summary, item: dict[str, Any], where: str, strict: bool) -> None:
    t = item.get("type")
    if t == "message":
        need(item.get("role") == "assistant", f"{where}: message item role must be 'assistant'")
        need(isinstance(item.get("content"), list), f"{where}: message item content must be a list")
        for p in item["content"]:
            if p.get("type") == "output_text":
                need(isinstance(p.get("text"), str), f"{where}: output_text.text must be a string")
                s.text += p["text"]
            elif p.get("type") == "refusal":
                need(isinstance(p.get("refusal"), str), f"{where}: refusal.refusal must be a string")
                s.refusal += p["refusal"]
            else:
                raise AssertionError(f"{where}: unknown message content part {p.get('type')!r}")
    elif t == "function_call":
        for k in ("call_id", "name", "arguments"):
            need(isinstance(item.get(k), str), f"{where}: function_call.{k} must be a string")
        need(bool(item["call_id"]) and bool(item["name"]), f"{where}: function_call call_id/name must be non-empty")
        s.tool_calls.append(ToolCall(item["call_id"], item["name"], item["arguments"]))
    elif t == "custom_tool_call":
        for k in ("call_id", "name", "input"):
            need(isinstance(item.get(k), str), f"{where}: custom_tool_call.{k} must be a string")
        s.tool_calls.append(ToolCall(item["call_id"], item["name"], item["input"], "custom"))
    elif t == "reasoning":
        need(isinstance(item.get("summary"), list), f"{where}: reasoning.summary must be a list")
        # summary parts are separate paragraphs to a reader: joined with a blank line
        texts = [
            "\n\n".join(p.get("text", "") for p in item["summary"]),
            "".join(p.get("text", "") for p in item.get("content") or []),
        ]
        s.thinking += "\n\n".join(t for t in texts if t)
        enc = item.get("encrypted_content")
        if enc:
            s.signatures.append(enc)
        elif not "".join(texts):
            s.redacted += 1
    else:
        s.server_tools.append(str(t))


def stream_checker(s: Summary, strict: bool = True) -> Checker:
    """The stream grammar, incremental: send one ``Frame`` at a time, then ``None`` (see ``drive``)."""
    phase = "start"  # start -> created -> streaming -> error -> terminal
    items: dict[str, _Item] = {}
    by_index: dict[int, _Item] = {}
    order: list[_Item] = []
    seq = 0
    stream_text = ""
    seen = 0
    while True:
        f = yield
        if f is None:
            break
        seen += 1
        where = f"event #{f.n}"
        if f.data == "[DONE]":
            need(not strict, f"{where}: Responses streams have no [DONE]")
            need(phase == "terminal", f"{where}: [DONE] before the terminal event")
            continue
        need(phase != "terminal", f"{where}: event after the terminal event")
        s.events += 1
        obj: dict[str, Any] = f.json()
        need(isinstance(obj, dict) and isinstance(obj.get("type"), str), f"{where}: data must be an object with a type")
        t = obj["type"]
        where = f"event #{f.n} ({t})"
        if f.event is not None or strict:
            need(f.event == t, f"{where}: event: line {f.event!r} does not match data.type")
        if "sequence_number" in obj or strict:
            need(
                obj.get("sequence_number") == seq,
                f"{where}: sequence_number {obj.get('sequence_number')!r}, expected {seq}",
            )
        seq += 1
        if phase == "error":
            need(t == "response.failed", f"{where}: only response.failed may follow an error event, got {t}")
        if t == "response.created":
            need(phase == "start", f"{where}: response.created must be first and only once")
            r = _check_response(obj.get("response"), where, {"in_progress", "queued"})
            if strict:
                need(r["output"] == [], f"{where}: response.output must be [] in response.created")
            s.id, s.model = r["id"], r["model"]
            phase = "created"
            continue
        if phase == "start":
            need(t == "error", f"{where}: first event must be response.created, got {t}")
        if t in ("response.in_progress", "response.queued"):
            need(phase == "created", f"{where}: {t} must directly follow response.created")
            r = _check_response(obj.get("response"), where, {"in_progress", "queued"})
            need(r["id"] == s.id, f"{where}: response id changed")
            phase = "streaming"
            continue
        if phase == "created" and strict and t != "error":
            raise AssertionError(f"{where}: response.in_progress must follow response.created")
        if t == "error":
            if "error" in obj and isinstance(obj["error"], dict):  # real API nests it
                err = _check_error_obj(obj["error"], where)
            else:
                err = _check_error_obj(obj, where)
                need("code" in obj, f"{where}: error event needs code (may be null)")
            s.error = {k: err.get(k) for k in ("type", "code", "message", "param") if k in err}
            phase = "error"
            continue
        if t in TERMINAL:
            if phase == "error":
                need(t == "response.failed", f"{where}: an error event must be followed by response.failed")
            status = {
                "response.completed": "completed",
                "response.incomplete": "incomplete",
                "response.failed": "failed",
            }[t]
            r = _check_response(obj.get("response"), where, {status})
            need(s.id is None or r["id"] == s.id, f"{where}: response id changed")
            if status != "failed" or strict:
                for it in order:
                    need(it.done is not None, f"{where}: item {it.id} ({it.type}) was never done")
            done_items = [it.done for it in order if it.done is not None]
            got, want = [_essence(o) for o in r["output"]], [_essence(o) for o in done_items]
            if not strict:  # OpenRouter gives the terminal object's items fresh "*_tmp_*" ids
                for o in got + want:
                    o.pop("id")
            need(
                got == want,
                f"{where}: response.output differs from the items as done:\n{json.dumps(got)[:600]}\nvs\n{json.dumps(want)[:600]}",
            )
            for i, it in enumerate(r["output"]):
                _collect_item(s, it, f"{where} output[{i}]", strict)
            if status == "completed":
                _check_usage(r.get("usage"), where)
                s.stop_reason = "completed"
                for tc in s.tool_calls:
                    if tc.kind == "function":
                        parse_json_object(tc.arguments, f"{where}: function_call {tc.name!r}")
            elif status == "incomplete":
                det = r.get("incomplete_details")
                need(
                    isinstance(det, dict) and isinstance(det.get("reason"), str),
                    f"{where}: incomplete_details.reason required",
                )
                s.stop_reason = f"incomplete:{det['reason']}"
                if r.get("usage") is not None:
                    _check_usage(r["usage"], where)
            else:
                s.stop_reason = "failed"
                e = r.get("error")
                if s.error is None:
                    need(
                        isinstance(e, dict) and isinstance(e.get("message"), str),
                        f"{where}: response.failed needs response.error.message",
                    )
                    s.error = {"code": e.get("code"), "message": e["message"]}
            s.usage = dict(r.get("usage") or {})
            phase = "terminal"
            continue
        need(phase == "streaming", f"{where}: {t} before response.in_progress")
        if t == "response.output_item.added":
            oi = obj.get("output_index")
            item = obj.get("item")
            need(
                isinstance(item, dict) and isinstance(item.get("type"), str),
                f"{where}: item must be an object with a type",
            )
            need(isinstance(item.get("id"), str) and item["id"], f"{where}: item.id must be a non-empty string")
            need(item["id"] not in items, f"{where}: duplicate item id {item['id']}")
            if strict:  # the API streams items one after another (LangChain keys on output_index changes)
                open_items = [o.id for o in order if o.done is None]
                need(
                    not open_items,
                    f"{where}: item {item['id']} added while item {open_items[0] if open_items else ''} is still open (overlapping output items)",
                )
            if strict:
                need(oi == len(order), f"{where}: output_index {oi!r}, expected {len(order)}")
            else:
                need(is_int(oi) and oi not in by_index, f"{where}: output_index {oi!r} reused")
            it = _Item(item["id"], oi, item["type"], item)
            if strict:
                if it.type == "message":
                    need(
                        item.get("content") == [] and item.get("role") == "assistant",
                        f"{where}: message item must start with role assistant and content []",
                    )
                elif it.type == "function_call":
                    need(
                        bool(item.get("call_id")) and bool(item.get("name")),
                        f"{where}: function_call needs call_id and name when added",
                    )
                    need(item.get("arguments") == "", f'{where}: function_call arguments must be "" when added')
                elif it.type == "custom_tool_call":
                    need(
                        bool(item.get("call_id")) and bool(item.get("name")),
                        f"{where}: custom_tool_call needs call_id and name when added",
                    )
                elif it.type == "reasoning":
                    need(item.get("summary") == [], f"{where}: reasoning item must start with summary []")
            items[it.id] = it
            by_index[oi] = it
            order.append(it)
            continue
        if t == "response.output_item.done":
            item = obj.get("item")
            need(isinstance(item, dict), f"{where}: item must be an object")
            it = items.get(item.get("id"))
            need(it is not None, f"{where}: item {item.get('id')!r} was never added")
            need(it.done is None, f"{where}: item {it.id} done twice")
            need(
                obj.get("output_index") == it.output_index,
                f"{where}: output_index {obj.get('output_index')!r} != {it.output_index}",
            )
            need(item.get("type") == it.type, f"{where}: item type changed from {it.type} to {item.get('type')}")
            _check_item_done(it, item, where, strict)
            it.done = item
            continue
        if t in ITEM_EVENTS or t.startswith(HOSTED_PREFIXES):
            it = items.get(obj.get("item_id"))
            need(it is not None, f"{where}: item_id {obj.get('item_id')!r} was never added")
            need(
                obj.get("output_index") == it.output_index,
                f"{where}: output_index {obj.get('output_index')!r} != {it.output_index} of {it.id}",
            )
            late_ok = not strict and t == "response.reasoning_text.done"
            if not t.startswith(HOSTED_PREFIXES) and not late_ok:
                need(it.done is None, f"{where}: event for item {it.id} after its output_item.done")
            if t in ITEM_EVENTS:
                stream_text = _item_event(s, it, t, obj, where, strict)
            continue
        if strict:
            raise AssertionError(f"{where}: unknown event type {t!r}")
    need(seen > 0, "responses stream: no events")
    del stream_text
    need(phase == "terminal", f"responses stream ended in phase {phase!r} without a terminal event")


def validate_stream(data: bytes, *, strict: bool = True) -> Summary:
    frames, _ = parse_sse(data, strict=strict)
    s = Summary()
    drive(stream_checker(s, strict), frames)
    s.search = (
        search.responses_stream(data, strict=strict) if s.error is None else None
    )  # hosted web search and citations (``validators.search``)
    return s


def _part(parts: list[_Part], idx: Any, where: str, what: str) -> _Part:
    need(is_int(idx) and 0 <= idx < len(parts), f"{where}: {what} {idx!r} was never added")
    return parts[idx]


def _item_event(s: Summary, it: _Item, t: str, obj: dict[str, Any], where: str, strict: bool) -> str:
    if t == "response.content_part.added":
        need(it.type in ("message", "reasoning"), f"{where}: content part on a {it.type} item")
        need(
            obj.get("content_index") == len(it.parts),
            f"{where}: content_index {obj.get('content_index')!r}, expected {len(it.parts)}",
        )
        p = obj.get("part")
        need(isinstance(p, dict) and isinstance(p.get("type"), str), f"{where}: part must be an object with a type")
        if strict:
            need(p.get("text", p.get("refusal")) == "", f"{where}: a content part must start empty")
        it.parts.append(_Part(p["type"]))
    elif t == "response.content_part.done":
        part = _part(it.parts, obj.get("content_index"), where, "content part")
        need(not part.done, f"{where}: content part done twice")
        p = obj.get("part") or {}
        got = p.get("refusal") if part.type == "refusal" else p.get("text")
        need(got == part.text, f"{where}: content_part.done text differs from the concatenated deltas")
        if strict and part.type in ("output_text", "refusal"):
            need(part.text_done, f"{where}: content_part.done before {part.type}.done")
        part.done = True
    elif t in ("response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta"):
        part = _part(it.parts, obj.get("content_index"), where, "content part")
        need(not part.done and not part.text_done, f"{where}: delta for a finished content part")
        need(isinstance(obj.get("delta"), str), f"{where}: delta must be a string")
        part.text += obj["delta"]
    elif t in ("response.output_text.done", "response.refusal.done", "response.reasoning_text.done"):
        part = _part(it.parts, obj.get("content_index"), where, "content part")
        key = "refusal" if t == "response.refusal.done" else "text"
        need(obj.get(key) == part.text, f"{where}: {key} differs from the concatenated deltas")
        need(not part.text_done, f"{where}: done twice")
        part.text_done = True
    elif t == "response.output_text.annotation.added":
        need(isinstance(obj.get("annotation"), dict), f"{where}: annotation must be an object")
    elif t == "response.function_call_arguments.delta":
        need(it.type == "function_call", f"{where}: arguments delta on a {it.type} item")
        need(it.args_done is None, f"{where}: arguments delta after arguments done")
        need(isinstance(obj.get("delta"), str), f"{where}: delta must be a string")
        it.args.append(obj["delta"])
    elif t == "response.function_call_arguments.done":
        need(it.type == "function_call", f"{where}: arguments done on a {it.type} item")
        need(it.args_done is None, f"{where}: arguments done twice")
        need(obj.get("arguments") == "".join(it.args), f"{where}: arguments differ from the concatenated deltas")
        it.args_done = obj["arguments"]
    elif t == "response.custom_tool_call_input.delta":
        need(it.type == "custom_tool_call", f"{where}: input delta on a {it.type} item")
        need(it.args_done is None, f"{where}: input delta after input done")
        need(isinstance(obj.get("delta"), str), f"{where}: delta must be a string")
        it.args.append(obj["delta"])
    elif t == "response.custom_tool_call_input.done":
        need(it.type == "custom_tool_call", f"{where}: input done on a {it.type} item")
        need(obj.get("input") == "".join(it.args), f"{where}: input differs from the concatenated deltas")
        it.args_done = obj["input"]
    elif t == "response.reasoning_summary_part.added":
        need(it.type == "reasoning", f"{where}: summary part on a {it.type} item")
        need(
            obj.get("summary_index") == len(it.summary),
            f"{where}: summary_index {obj.get('summary_index')!r}, expected {len(it.summary)}",
        )
        need(all(p.done for p in it.summary), f"{where}: summary part added while another is open")
        it.summary.append(_Part("summary_text"))
    elif t == "response.reasoning_summary_text.delta":
        part = _part(it.summary, obj.get("summary_index"), where, "summary part")
        need(not part.done and not part.text_done, f"{where}: delta for a finished summary part")
        need(isinstance(obj.get("delta"), str), f"{where}: delta must be a string")
        part.text += obj["delta"]
    elif t == "response.reasoning_summary_text.done":
        part = _part(it.summary, obj.get("summary_index"), where, "summary part")
        need(obj.get("text") == part.text, f"{where}: summary text differs from the concatenated deltas")
        part.text_done = True
    elif t == "response.reasoning_summary_part.done":
        part = _part(it.summary, obj.get("summary_index"), where, "summary part")
        need(not part.done, f"{where}: summary part done twice")
        need((obj.get("part") or {}).get("text") == part.text, f"{where}: summary part text differs from the deltas")
        if strict:
            need(part.text_done, f"{where}: summary part done before reasoning_summary_text.done")
        part.done = True
    return ""


def _check_item_done(it: _Item, item: dict[str, Any], where: str, strict: bool) -> None:
    for p in it.parts:
        need(p.done or (not strict and it.type == "reasoning"), f"{where}: item {it.id} done with an open content part")
    for p in it.summary:
        need(p.done, f"{where}: item {it.id} done with an open summary part")
    if it.type == "message":
        content = item.get("content")
        need(
            isinstance(content, list) and len(content) == len(it.parts),
            f"{where}: message content has {len(content or [])} parts, {len(it.parts)} were streamed",
        )
        for i, (p, c) in enumerate(zip(it.parts, content)):
            need(c.get("type") == p.type, f"{where}: content[{i}] type {c.get('type')!r} != streamed {p.type!r}")
            got = c.get("refusal") if p.type == "refusal" else c.get("text")
            need(got == p.text, f"{where}: content[{i}] text differs from the streamed deltas")
    elif it.type in ("function_call", "custom_tool_call"):
        key = "arguments" if it.type == "function_call" else "input"
        streamed = "".join(it.args)
        if it.args or it.args_done is not None:
            need(item.get(key) == streamed, f"{where}: {it.type}.{key} differs from the streamed deltas")
        if strict:
            need(it.args_done is not None, f"{where}: {it.type} done without its {key} .done event")
        need(item.get("call_id") == it.added.get("call_id") or not it.added.get("call_id"), f"{where}: call_id changed")
        need(item.get("name") == it.added.get("name") or not it.added.get("name"), f"{where}: name changed")
    elif it.type == "reasoning":
        summ = item.get("summary")
        need(isinstance(summ, list), f"{where}: reasoning.summary must be a list")
        if it.summary:
            need(
                [p.get("text") for p in summ] == [p.text for p in it.summary],
                f"{where}: reasoning summary differs from the streamed deltas",
            )


def validate_response(body: bytes | str | dict, *, strict: bool = True) -> Summary:
    """A non-streaming response object."""
    r = load_body(body)
    _check_response(r, "response", {"completed", "incomplete", "failed"})
    s = Summary(id=r["id"], model=r["model"])
    ids = set()
    for i, it in enumerate(r["output"]):
        need(isinstance(it, dict) and isinstance(it.get("type"), str), f"output[{i}] must be an object with a type")
        need(isinstance(it.get("id"), str) and it["id"], f"output[{i}].id must be a non-empty string")
        need(it["id"] not in ids, f"output[{i}]: duplicate id {it['id']}")
        ids.add(it["id"])
        _collect_item(s, it, f"output[{i}]", strict)
    if r["status"] == "completed":
        _check_usage(r.get("usage"), "response")
        s.stop_reason = "completed"
        for tc in s.tool_calls:
            if tc.kind == "function":
                parse_json_object(tc.arguments, f"function_call {tc.name!r}")
    elif r["status"] == "incomplete":
        det = r.get("incomplete_details")
        need(isinstance(det, dict) and isinstance(det.get("reason"), str), "incomplete_details.reason required")
        s.stop_reason = f"incomplete:{det['reason']}"
    else:
        s.stop_reason = "failed"
    s.usage = dict(r.get("usage") or {})
    s.search = search.responses_body(body, strict=strict)  # hosted web search and citations (``validators.search``)
    return s


def frames_of(data: bytes) -> list[Frame]:
    return parse_sse(data, strict=False)[0]
