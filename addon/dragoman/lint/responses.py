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
from typing import Any

from dragoman.lint import Checker
from dragoman.lint import Summary
from dragoman.lint import drive
from dragoman.lint import is_int
from dragoman.lint import load_body
from dragoman.lint import need
from dragoman.lint import parse_json_object
from dragoman.lint import run_stream
from dragoman.lint import search
from dragoman.lint.replay import KEY
from dragoman.lint.responses_items import HOSTED_PREFIXES
from dragoman.lint.responses_items import ITEM_EVENTS
from dragoman.lint.responses_items import Item
from dragoman.lint.responses_items import check_item_done
from dragoman.lint.responses_items import collect_item
from dragoman.lint.responses_items import essence
from dragoman.lint.responses_items import item_event
from dragoman.lint.sse import Frame
from dragoman.lint.sse import parse_sse

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}


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
    if not isinstance(u, dict):  # (the messages are formatted only for a violation: these events are large)
        raise AssertionError(f"{where}: usage must be an object, got {u!r}")
    for k in ("input_tokens", "output_tokens", "total_tokens"):
        need(is_int(u.get(k)), f"{where}: usage.{k} must be an int, got {u.get(k)!r}")
    need(u["total_tokens"] == u["input_tokens"] + u["output_tokens"], f"{where}: usage.total_tokens != input + output")


def _check_response(r: Any, where: str, status: set[str]) -> dict[str, Any]:
    need(isinstance(r, dict), f"{where}: response must be an object")
    need(isinstance(r.get("id"), str) and r["id"], f"{where}: response.id must be a non-empty string")
    need(r.get("object") == "response", f"{where}: response.object must be 'response', got {r.get('object')!r}")
    if r.get("status") not in status:
        raise AssertionError(f"{where}: response.status {r.get('status')!r} not in {sorted(status)}")
    need(isinstance(r.get("output"), list), f"{where}: response.output must be a list")
    need(isinstance(r.get("model"), str), f"{where}: response.model must be a string")
    need(is_int(r.get("created_at")), f"{where}: response.created_at must be an int")
    return r


class _Stream:
    """One Responses stream's grammar state (``stream_checker``)."""

    def __init__(self, s: Summary, strict: bool) -> None:
        self.s = s
        self.strict = strict
        self.phase = "start"  # start -> created -> streaming -> error -> terminal
        self.items: dict[str, Item] = {}
        self.by_index: dict[int, Item] = {}
        self.order: list[Item] = []
        self.seq = 0

    def event(self, f: Frame) -> Any:
        """Check one frame. -> its variable fields when it is a delta that may repeat (``replay``)."""
        strict = self.strict
        where = f"event #{f.n}"
        if f.data == "[DONE]":
            need(not strict, f"{where}: Responses streams have no [DONE]")
            need(self.phase == "terminal", f"{where}: [DONE] before the terminal event")
            return None
        need(self.phase != "terminal", f"{where}: event after the terminal event")
        self.s.events += 1
        data = f.json()  # any JSON value until checked
        need(
            isinstance(data, dict) and isinstance(data.get("type"), str), f"{where}: data must be an object with a type"
        )
        obj: dict[str, Any] = data
        t = obj["type"]
        where = f"event #{f.n} ({t})"
        if f.event is not None or strict:
            need(f.event == t, f"{where}: event: line {f.event!r} does not match data.type")
        counted = "sequence_number" in obj or strict
        if counted:
            need(
                obj.get("sequence_number") == self.seq,
                f"{where}: sequence_number {obj.get('sequence_number')!r}, expected {self.seq}",
            )
        self.seq += 1
        if self.phase == "error":
            need(t == "response.failed", f"{where}: only response.failed may follow an error event, got {t}")
        if self.head(t, obj, where):
            return None
        need(self.phase == "streaming", f"{where}: {t} before response.in_progress")
        if t == "response.output_item.added":
            self.item_added(obj, where)
        elif t == "response.output_item.done":
            self.item_done(obj, where)
        elif t in ITEM_EVENTS or t.startswith(HOSTED_PREFIXES):
            apply = self.in_item(t, obj, where)
            if apply is not None:
                return self.hot(obj, apply, counted)
        elif strict:
            raise AssertionError(f"{where}: unknown event type {t!r}")
        return None

    def hot(self, obj: dict[str, Any], apply: Any, counted: bool) -> Any:
        slots: list[Any] = [(("delta",), obj["delta"], apply), (("item_id",), obj["item_id"], KEY)]
        if is_int(obj.get("output_index")):
            slots.append((("output_index",), obj["output_index"], KEY))
        if counted:
            slots.append((("sequence_number",), obj["sequence_number"], self))
        if type(obj.get("obfuscation")) is str:
            slots.append((("obfuscation",), obj["obfuscation"], None))
        return tuple(slots)

    def head(self, t: str, obj: dict[str, Any], where: str) -> bool:
        """The response-level events (created, in_progress, error, terminal). -> True when ``t`` was one."""
        s, strict = self.s, self.strict
        if t == "response.created":
            need(self.phase == "start", f"{where}: response.created must be first and only once")
            r = _check_response(obj.get("response"), where, {"in_progress", "queued"})
            if strict:
                need(r["output"] == [], f"{where}: response.output must be [] in response.created")
            s.id, s.model = r["id"], r["model"]
            self.phase = "created"
            return True
        if self.phase == "start":
            need(t == "error", f"{where}: first event must be response.created, got {t}")
        if t in ("response.in_progress", "response.queued"):
            need(self.phase == "created", f"{where}: {t} must directly follow response.created")
            r = _check_response(obj.get("response"), where, {"in_progress", "queued"})
            need(r["id"] == s.id, f"{where}: response id changed")
            self.phase = "streaming"
            return True
        if self.phase == "created" and strict and t != "error":
            raise AssertionError(f"{where}: response.in_progress must follow response.created")
        if t == "error":
            if "error" in obj and isinstance(obj["error"], dict):  # real API nests it
                err = _check_error_obj(obj["error"], where)
            else:
                err = _check_error_obj(obj, where)
                need("code" in obj, f"{where}: error event needs code (may be null)")
            s.error = {k: err.get(k) for k in ("type", "code", "message", "param") if k in err}
            self.phase = "error"
            return True
        if t in TERMINAL:
            self.terminal(t, obj, where)
            self.phase = "terminal"
            return True
        return False

    def terminal(self, t: str, obj: dict[str, Any], where: str) -> None:
        s, strict = self.s, self.strict
        if self.phase == "error":
            need(t == "response.failed", f"{where}: an error event must be followed by response.failed")
        status = _STATUS[t]
        r = _check_response(obj.get("response"), where, {status})
        need(s.id is None or r["id"] == s.id, f"{where}: response id changed")
        if status != "failed" or strict:
            for it in self.order:
                need(it.done is not None, f"{where}: item {it.id} ({it.type}) was never done")
        done_items = [it.done for it in self.order if it.done is not None]
        got, want = [essence(o) for o in r["output"]], [essence(o) for o in done_items]
        if not strict:  # OpenRouter gives the terminal object's items fresh "*_tmp_*" ids
            for o in got + want:
                o.pop("id")
        if got != want:  # (the message is formatted only for a violation: the output is the whole answer)
            raise AssertionError(
                f"{where}: response.output differs from the items as done:\n{json.dumps(got)[:600]}\nvs\n{json.dumps(want)[:600]}"
            )
        for i, out in enumerate(r["output"]):  # dicts (``it`` above is an Item)
            collect_item(s, out, f"{where} output[{i}]", strict)
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

    def item_added(self, obj: dict[str, Any], where: str) -> None:
        strict, order = self.strict, self.order
        oi = obj.get("output_index")
        item = obj.get("item")
        need(
            isinstance(item, dict) and isinstance(item.get("type"), str), f"{where}: item must be an object with a type"
        )
        need(isinstance(item.get("id"), str) and item["id"], f"{where}: item.id must be a non-empty string")
        need(item["id"] not in self.items, f"{where}: duplicate item id {item['id']}")
        if strict:  # the API streams items one after another (LangChain keys on output_index changes)
            open_items = [o.id for o in order if o.done is None]
            need(
                not open_items,
                f"{where}: item {item['id']} added while item {open_items[0] if open_items else ''} is still open (overlapping output items)",
            )
            need(oi == len(order), f"{where}: output_index {oi!r}, expected {len(order)}")
        else:
            need(is_int(oi) and oi not in self.by_index, f"{where}: output_index {oi!r} reused")
        it = Item(item["id"], oi, item["type"], item)
        if strict:
            _check_added(it, item, where)
        self.items[it.id] = it
        self.by_index[oi] = it
        order.append(it)

    def item_done(self, obj: dict[str, Any], where: str) -> None:
        item = obj.get("item")
        need(isinstance(item, dict), f"{where}: item must be an object")
        it = self.items.get(item.get("id"))
        need(it is not None, f"{where}: item {item.get('id')!r} was never added")
        need(it.done is None, f"{where}: item {it.id} done twice")
        need(
            obj.get("output_index") == it.output_index,
            f"{where}: output_index {obj.get('output_index')!r} != {it.output_index}",
        )
        need(item.get("type") == it.type, f"{where}: item type changed from {it.type} to {item.get('type')}")
        check_item_done(it, item, where, self.strict)
        it.done = item

    def in_item(self, t: str, obj: dict[str, Any], where: str) -> Any:
        it = self.items.get(obj.get("item_id"))
        need(it is not None, f"{where}: item_id {obj.get('item_id')!r} was never added")
        need(
            obj.get("output_index") == it.output_index,
            f"{where}: output_index {obj.get('output_index')!r} != {it.output_index} of {it.id}",
        )
        late_ok = not self.strict and t == "response.reasoning_text.done"
        if not t.startswith(HOSTED_PREFIXES) and not late_ok:
            need(it.done is None, f"{where}: event for item {it.id} after its output_item.done")
        if t in ITEM_EVENTS:
            return item_event(self.s, it, t, obj, where, self.strict)
        return None

    def end(self) -> None:
        need(self.phase == "terminal", f"responses stream ended in phase {self.phase!r} without a terminal event")


_STATUS = {"response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed"}


def _check_added(it: Item, item: dict[str, Any], where: str) -> None:
    """Strict: what each item type carries when it is added."""
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


def stream_checker(s: Summary, strict: bool = True) -> Checker:
    """The stream grammar, incremental: send one ``Frame`` at a time, then ``None`` (see ``drive``)."""
    return run_stream(_Stream(s, strict), "responses")


def validate_stream(data: bytes, *, strict: bool = True) -> Summary:
    frames, _ = parse_sse(data, strict=strict)
    s = Summary()
    drive(stream_checker(s, strict), frames)
    s.search = (
        search.responses_stream(data, strict=strict) if s.error is None else None
    )  # hosted web search and citations (``validators.search``)
    return s


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
        collect_item(s, it, f"output[{i}]", strict)
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
