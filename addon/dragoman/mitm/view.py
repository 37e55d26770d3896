"""The "Dragoman" content view for mitmweb, mitmproxy's console and ``mitmdump --flow-detail``.

For a flow the Translate addon handled (``flow.metadata["dragoman"]``): the protocols and models, the route
and its attempts, the provider profile, the lossiness report, and the message itself: the request as sent
upstream (its conversation summary and body), or the answer the client got assembled in the client's
protocol (text, thinking, tool calls with parsed arguments, stop reason, usage). With ``dragoman_keep_answer``
the answer is shown as both sides saw it, in two columns (the upstream's, read from its stream or body before
translation, and the client's, read from the bytes that left), rows that differ marked ``!=``
(``dragoman.inspect.compare``). A streamed answer is not kept in the flow by mitmproxy: without the option the
view says so and points at recordings and ``dragoman inspect``.

mitmproxy 12 has ``contentviews.Contentview`` (``prettify``/``render_priority`` with a ``Metadata``);
mitmproxy 11 has ``contentviews.View`` (``__call__`` returning lines of (style, text)). ``register`` adds
the one the running mitmproxy has; both render the same text (``render``).
"""

from __future__ import annotations

import json
from typing import Any
from typing import Literal

from mitmproxy import contentviews
from mitmproxy import http

from dragoman.inspect.assemble import assemble
from dragoman.inspect.compare import MARK
from dragoman.inspect.compare import VIEW_WIDTH
from dragoman.inspect.compare import columns
from dragoman.inspect.compare import differences
from dragoman.inspect.render import side_lines
from dragoman.ir.lossy import LossReport
from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.protocols import Protocol

NAME = "Dragoman"
#: above every built-in view (JSON is 1, the highest built-in 2): selected automatically for our flows
PRIORITY = 10.0
BODY_LIMIT = 20_000


def meta_of(flow: Any) -> dict[str, Any] | None:
    meta = getattr(flow, "metadata", {}).get(METADATA_KEY) if flow is not None else None
    return meta if isinstance(meta, dict) and meta.get("client") else None


def render(data: bytes, flow: Any, message: Any) -> str:
    """The view's text for ``message`` (the flow's request or response) of a Dragoman flow."""
    meta = meta_of(flow) or {}
    lines = [_title(meta)]
    if meta.get("route") or meta.get("upstream"):
        lines.append(f"route: {meta.get('route')} -> upstream {meta.get('upstream')}")
    if meta.get("profile"):
        lines.append(f"provider profile: {meta['profile']}")
    if meta.get("client_name"):
        lines.append(f"client: {meta['client_name']}")
    lines.append("")
    if isinstance(message, http.Response):
        lines += _answer(data, meta, message)
    else:
        lines += _request(data, meta)
    lines.append("")
    report = LossReport.from_list(meta.get("lossy") if meta.get("lossy") is not None else meta.get("dropped"))
    lines.append(f"lossiness report ({report.count}):")
    lines += [f"  {e.line()}" for e in report.entries] or ["  nothing lost"]
    attempts = meta.get("attempts") or []
    if attempts:
        lines.append("attempts:")
        for a in attempts:
            keys = ("upstream", "model", "key", "status", "class", "seconds")
            lines.append("  " + ", ".join(f"{k}={a[k]}" for k in keys if a.get(k) is not None))
    return "\n".join(lines) + "\n"


def _title(meta: dict[str, Any]) -> str:
    cm, um = meta.get("client_model"), meta.get("upstream_model")
    model = cm if cm == um else f"{cm} -> {um}"
    how = "stream" if meta.get("stream") else "whole"
    return f"Dragoman: {meta.get('client')} client -> {meta.get('target')} upstream, model {model}, {how}"


def _request(data: bytes, meta: dict[str, Any]) -> list[str]:
    out = [f"request as sent upstream ({meta.get('target')}):"]
    try:
        obj = json.loads(data) if data else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return [*out, f"  {len(data)} bytes, not JSON"]
    turns = obj.get("messages") or obj.get("input") or obj.get("contents") or []
    tools = [
        t.get("name") or (t.get("function") or {}).get("name") for t in obj.get("tools") or [] if isinstance(t, dict)
    ]
    out.append(
        f"  {len(turns) if isinstance(turns, list) else 1} turn(s), tools: {', '.join(t for t in tools if t) or 'none'}"
    )
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    if len(text) > BODY_LIMIT:
        text = text[:BODY_LIMIT] + f"\n... ({len(text)} characters)"
    return [*out, *("  " + line for line in text.splitlines())]


def _answer(data: bytes, meta: dict[str, Any], resp: http.Response) -> list[str]:
    client = str(meta.get("client"))
    up, cl = meta.get("answer"), meta.get("client_answer")
    if data and not isinstance(cl, dict):
        try:
            proto = Protocol(client)
        except ValueError:
            return [
                f"answer the client got ({client}), status {resp.status_code}:",
                f"  a protocol this view does not know: {client}",
            ]
        cl = assemble(data, proto, resp.status_code, resp.headers.get("content-type")).as_dict()
    if isinstance(up, dict) and isinstance(cl, dict):
        diff = differences(up, cl)
        agree = f"{MARK} marks where they differ: {', '.join(diff)}" if diff else "the two sides agree"
        return [
            f"the answer on both sides, status {resp.status_code} ({agree}):",
            *columns(up, cl, VIEW_WIDTH),
        ]
    if isinstance(cl, dict):
        return [f"answer the client got ({client}), status {resp.status_code}:", *side_lines(cl)]
    if isinstance(up, dict):
        return [
            f"answer assembled from the upstream's stream ({up.get('protocol')}, "
            f"{up.get('events')} events), encoded for the {client} client, status {resp.status_code}:",
            *side_lines(up),
        ]
    out = [f"answer the client got ({client}), status {resp.status_code}:"]
    if meta.get("stream"):
        return [
            *out,
            "  streamed: mitmproxy does not keep a streamed body in the flow. Set dragoman_keep_answer,",
            "  or record the session (python -m dragoman record) and read it with dragoman inspect.",
        ]
    return [*out, "  (empty body)"]


# ---------------------------------------------------------------- registration per mitmproxy version


def _priority(flow: Any, message: Any) -> float:
    return PRIORITY if meta_of(flow) is not None and isinstance(message, (http.Request, http.Response)) else 0.0


if hasattr(contentviews, "Contentview"):  # mitmproxy 12

    class DragomanView:
        name = NAME
        syntax_highlight: Literal["none"] = "none"

        def prettify(self, data: bytes, metadata: Any) -> str:
            return render(data, metadata.flow, metadata.http_message)

        def render_priority(self, data: bytes, metadata: Any) -> float:
            return _priority(metadata.flow, metadata.http_message)

        def __lt__(self, other: Any) -> bool:
            return bool(self.name < other.name)

else:  # mitmproxy 11

    class DragomanView(contentviews.View):  # type: ignore[no-redef,name-defined,misc,unused-ignore]
        name = NAME

        def __call__(self, data: bytes, *, flow: Any = None, http_message: Any = None, **_: Any) -> Any:
            text = render(data, flow, http_message)
            return NAME, [[("text", line)] for line in text.splitlines()]

        def render_priority(self, data: bytes, *, flow: Any = None, http_message: Any = None, **_: Any) -> float:
            return _priority(flow, http_message)


_registered: list[Any] = []


def register() -> None:
    """Add the view once per process (the addon's ``load``)."""
    if _registered:
        return
    view = DragomanView()
    contentviews.add(view)  # type: ignore[arg-type,unused-ignore]  # mitmproxy 11 types it View, 12 Contentview
    _registered.append(view)
