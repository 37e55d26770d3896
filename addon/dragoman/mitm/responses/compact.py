"""``POST /v1/responses/compact`` (remote compaction, what Codex calls in long sessions with its built-in
provider) on upstreams that do not speak Responses: the call becomes an ordinary summarising turn.

request (``CompactRequest``, before ``Translate``)
    the compaction body (``model``, ``input``, ``instructions``, ``tools``, ``parallel_tool_calls``,
    ``reasoning``, ``text``, ``previous_response_id``) is rewritten into a plain non-streamed
    ``POST .../responses`` whose input ends with a request to summarise the conversation for a successor;
    ``Translate`` then routes, translates, relays and records it like any other turn (usage ledger included).
    Tools are kept (an Anthropic upstream needs them declared when the history holds tool calls) with
    ``tool_choice: "none"``.
response (``CompactAnswer``, after ``Translate``)
    the translated Responses answer becomes the compacted response Codex reads::

        {"id": "resp_...", "object": "response.compaction", "created_at": N,
         "output": [<the input's user messages>..., <one user message: summary prefix + summary>],
         "usage": {...the turn's usage...}}

    Codex replaces its history with ``output`` and sends those items back as ordinary input afterwards, so
    the items are plain ``message`` items any upstream can take (OpenAI's own answer carries an encrypted
    ``compaction`` item only OpenAI can read). An error answer passes as it is (already in the Responses
    error shape).

Left alone: a model whose every route is a Responses upstream (the call is passed through untouched), and
anything while Dragoman has no route.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

import orjson
from mitmproxy import ctx
from mitmproxy import http

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.mitm import hosts
from dragoman.protocols import Protocol
from dragoman.translate.response import error_body

logger = logging.getLogger(__name__)

#: flow.metadata key marking a compaction served as a summarising turn (saved with -w)
METADATA_KEY = "dragoman_compact"
_PATH = re.compile(r"/responses/compact/?$")
JSON_CT = "application/json"

SUMMARY_REQUEST = (
    "Pause the task: your context is about to be compacted. Write a handoff summary that lets another "
    "model continue this work without the conversation above. Include: the user's goal and constraints, "
    "what has been done so far (files created or changed, commands run and their outcomes), decisions made "
    "and why, open problems and errors, and the concrete next steps. Be concise and factual; reply with "
    "the summary only and call no tools."
)
SUMMARY_PREFIX = (
    "Earlier turns of this conversation were compacted. A summary of them, written by the model that "
    "worked on them, follows; continue from it.\n\n"
)
#: compaction fields a plain Responses request takes as they are
_KEEP = ("model", "instructions", "tools", "reasoning", "text", "previous_response_id", "prompt_cache_key")


def is_compact(req: http.Request) -> bool:
    return req.method == "POST" and _PATH.search(hosts.bare_path(req.path).split("?", 1)[0]) is not None


def summarising_request(body: dict[str, Any]) -> dict[str, Any]:
    """The plain Responses request a compaction body becomes (see the module docstring)."""
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    elif not isinstance(items, list):
        items = []
    out: dict[str, Any] = {k: body[k] for k in _KEEP if body.get(k) is not None}
    out["input"] = [*items, {"type": "message", "role": "user", "content": SUMMARY_REQUEST}]
    if out.get("tools"):
        out["tool_choice"] = "none"
        out["parallel_tool_calls"] = False
    out["stream"] = False
    out["store"] = False
    return out


def _user_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    items = body.get("input")
    if isinstance(items, str):
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": items}]}]
    if not isinstance(items, list):
        return []
    return [
        i for i in items if isinstance(i, dict) and i.get("type", "message") == "message" and i.get("role") == "user"
    ]


def summary_text(answer: dict[str, Any]) -> str:
    """The text of a Responses answer's assistant messages."""
    parts = []
    for item in answer.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message":
            for c in item.get("content") or []:
                if isinstance(c, dict) and c.get("type") == "output_text" and c.get("text"):
                    parts.append(c["text"])
    return "\n".join(parts).strip()


def compacted(original: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response.compaction`` object for a summarising turn's answer; None when it holds no summary."""
    summary = summary_text(answer)
    if not summary:
        return None
    text = SUMMARY_PREFIX + summary
    output = [
        *_user_messages(original),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
    ]
    return {
        "id": "resp_" + uuid.uuid4().hex,
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": output,
        "usage": answer.get("usage"),
    }


def _translate() -> Any:
    translate = ctx.master.addons.get("translate") if hasattr(ctx, "master") else None
    if translate is None or translate.routing.router is None:
        return None
    return translate


def _all_responses(translate: Any, model: str) -> bool:
    """Every route for ``model`` is a Responses upstream (None route: let ``Translate`` answer 404)."""
    router = translate.routing.router
    found = router.route(model)
    if found is None:
        return False
    return all(c.upstream.protocol is Protocol.OPENAI_RESPONSES for c in router.candidates(found, model))


class Compact:
    """Rewrites a compaction into a summarising turn (before ``Translate``); ``after`` (registered after
    ``Translate``) turns its answer into the compacted response. The input's user messages wait here, by
    flow id, until the answer."""

    def __init__(self) -> None:
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.after = CompactAnswer(self)

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None or flow.is_replay:
            return
        req = flow.request
        if not is_compact(req) or not hosts.in_scope(flow):
            return
        translate = _translate()
        if translate is None:
            return
        try:
            body = orjson.loads(req.get_content(strict=False) or b"")
        except (orjson.JSONDecodeError, ValueError):
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            info = ErrorInfo(ErrorKind.INVALID_REQUEST, "a compaction needs a JSON body with a model", 400)
            flow.response = http.Response.make(
                400, error_body(info, Protocol.OPENAI_RESPONSES), {"content-type": JSON_CT}
            )
            return
        if _all_responses(translate, body["model"]):
            return  # a Responses upstream compacts itself
        path, _, query = req.path.partition("?")
        req.path = _PATH.sub("/responses", path) + ("?" + query if query else "")
        req.headers.pop("content-encoding", None)
        req.content = orjson.dumps(summarising_request(body))
        self.pending[flow.id] = _user_messages(body)
        flow.metadata[METADATA_KEY] = "summarising"
        logger.info("flow %s: /responses/compact served as a summarising turn on the upstream", flow.id)

    def error(self, flow: http.HTTPFlow) -> None:
        self.pending.pop(flow.id, None)


class CompactAnswer:
    """The second half of ``Compact``: the summarising turn's answer becomes the compacted response."""

    def __init__(self, compact: Compact) -> None:
        self.compact = compact

    def response(self, flow: http.HTTPFlow) -> None:
        kept = self.compact.pending.pop(flow.id, None)
        resp = flow.response
        if kept is None or resp is None or not 200 <= resp.status_code < 300:
            return
        try:
            answer = orjson.loads(resp.get_content(strict=False) or b"")
        except (orjson.JSONDecodeError, ValueError):
            answer = None
        out = compacted({"input": kept}, answer) if isinstance(answer, dict) else None
        if out is None:
            info = ErrorInfo(ErrorKind.API_ERROR, "the upstream answered the compaction without a summary", 502)
            resp.status_code = 502
            resp.headers["content-type"] = JSON_CT
            resp.content = error_body(info, Protocol.OPENAI_RESPONSES)
            flow.metadata[METADATA_KEY] = "no-summary"
            logger.warning("flow %s: compaction: the upstream's answer held no summary", flow.id)
            return
        resp.headers.pop("content-encoding", None)
        resp.headers["content-type"] = JSON_CT
        resp.content = orjson.dumps(out)
        flow.metadata[METADATA_KEY] = "compacted"
