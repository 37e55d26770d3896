"""Per-flow state of the Translate addon, keyed by ``flow.id`` (live objects never go into ``flow.metadata``),
the lines a finished flow writes to the log from it (``log_done``, ``log_dropped``), and the release of a
finished stream's callable (``detach_stream``)."""

from __future__ import annotations

import logging
import types
from collections.abc import Callable
from collections.abc import Collection
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from mitmproxy import http

from dragoman.logsafe import logsafe
from dragoman.protocols.base import Context
from dragoman.translate.plan import Plan

logger = logging.getLogger(__name__)

#: key in ``flow.metadata`` for the JSON-able summary of a translated flow (saved with ``-w``)
METADATA_KEY = "dragoman"
#: key in ``flow.metadata``: the upstream protocol for this flow, overriding ``dragoman_target`` (set by the Replayer)
TARGET_OVERRIDE_KEY = "dragoman_target_override"


@dataclass(slots=True)
class FlowState:
    """What ``request`` learned, for ``responseheaders``/``response``/``error`` of the same flow."""

    plan: Plan
    ctx: Context
    client_model: str
    upstream_model: str
    stream: bool
    #: the StreamTranslator (or PassThrough) once the response turned out to be SSE
    translator: Any = None
    #: an incremental decompressor when the upstream compressed the SSE body anyway
    decompressor: Any = None
    #: renames an Anthropic upstream's ``mcp__`` tool names back in the stream (``translate.mcp_names``)
    renamer: Any = None
    #: bytes handed to the client by the stream callable (diagnostics)
    sent: int = 0
    #: the stream callable was called at least once with data
    started: bool = False
    #: the ``dragoman.mitm.answer.faults.IdleWatchdog`` of a streamed flow (cancelled in ``response``/``error``)
    watchdog: Any = None
    #: the route that matched (its ``match`` pattern) and the upstream that answered (routes file only)
    route: str = ""
    upstream_name: str = ""
    #: every attempt made (``routing.attempts.Outcome.as_dict()``), in order
    attempts: list[dict[str, Any]] = field(default_factory=list)
    #: set by the relay when a streamed body failed after its headers left: (message, timed_out)
    relay_failure: tuple[str, bool] | None = None
    #: the relay token of a relayed flow (forgotten in ``response``/``error``)
    relay_token: str | None = None
    #: what the answering attempt sent, to show the real upstream request in the saved flow
    sent_request: Any = None
    #: the client key's name (client keys configured), never the key
    client_name: str = ""
    #: reads usage off a streamed answer for the ledger: its ``usage`` (the ``StreamTranslator`` itself, or a
    #: ``PassThroughUsage`` beside a stream that passes untouched)
    usage_tap: Any = None
    #: the usage of a whole (non-streamed) answer
    whole_usage: Any = None
    #: assembles a streamed answer for the mitmweb view (``inspect.assemble.AnswerTap``, ``dragoman_keep_answer``)
    answer_tap: Any = None
    #: assembles the client-bound side of a streamed answer as it leaves (``inspect.assemble.BytesTap``)
    client_tap: Any = None
    #: a whole answer's upstream side, assembled before translation (``dragoman_keep_answer``)
    upstream_whole: Any = None
    #: stores the finished Responses answer (``responses.state.Ticket``), when it is to be stored
    ticket: Any = None
    #: the upstream's id for its answer (``request-id`` / ``x-request-id``), for the log line and the metadata
    request_id: str = ""
    #: the answer's headers were read for ``request_id`` (``inbound.carry_request_id``: once per flow)
    request_id_read: bool = False
    #: the live conformance lint (``dragoman.lint.flow.FlowLint``, ``dragoman_lint``), None when off
    lint: Any = None

    def metadata(self) -> dict[str, Any]:
        """JSON-able summary for ``flow.metadata[METADATA_KEY]``."""
        meta: dict[str, Any] = {
            "client": self.plan.client.value,
            "target": self.plan.upstream.value,
            "client_model": self.client_model,
            "upstream_model": self.upstream_model,
            "stream": self.stream,
            "dropped": list(self.ctx.dropped.fields),
            "lossy": self.ctx.dropped.as_list(),
        }
        if self.plan.upstream.value == "openai-chat" and not self.plan.identity:
            meta["profile"] = self.ctx.profile.name
        if self.upstream_name:
            meta["route"] = self.route
            meta["upstream"] = self.upstream_name
        if self.attempts:
            meta["attempts"] = list(self.attempts)
        if self.client_name:
            meta["client_name"] = self.client_name
        if self.ctx.adjusted:
            meta["adjusted"] = list(self.ctx.adjusted)
        if self.request_id:
            meta["request_id"] = self.request_id
        if self.lint is not None and self.lint.reports:
            meta["lint"] = list(self.lint.reports)
        if self.answer_tap is not None:
            meta["answer"] = self.answer_tap.acc.result().as_dict()
        elif self.upstream_whole is not None:
            meta["answer"] = self.upstream_whole.as_dict()
        if self.client_tap is not None:
            meta["client_answer"] = self.client_tap.acc.result().as_dict()
        return meta


class FlowStates:
    """A dict of ``FlowState`` by flow id, with explicit release (``pop``) in ``response``/``error``."""

    __slots__ = ("_states",)

    def __init__(self) -> None:
        self._states: dict[str, FlowState] = {}

    def put(self, flow_id: str, state: FlowState) -> None:
        self._states[flow_id] = state

    def get(self, flow_id: str) -> FlowState | None:
        return self._states.get(flow_id)

    def pop(self, flow_id: str) -> FlowState | None:
        return self._states.pop(flow_id, None)

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, flow_id: object) -> bool:
        return flow_id in self._states


def ended_stream(data: bytes) -> list[bytes]:
    """The stream callable of a flow whose answer has ended (``detach_stream``): nothing more to send."""
    return []


def inner_code(outer: Callable[..., Any], name: str) -> types.CodeType:
    """The code of the function ``name`` defined inside ``outer`` (a stream callable's closure)."""
    return next(c for c in outer.__code__.co_consts if isinstance(c, types.CodeType) and c.co_name == name)


def detach_stream(flow: http.HTTPFlow, codes: Collection[types.CodeType]) -> None:
    """At the end of a flow (its ``response`` or ``error`` hook): a stream callable of ours (its code among
    ``codes``) is replaced by ``ended_stream``, so the flow no longer holds the stream's state (translator, the
    request's IR and parsed JSON, the watchdog). mitmproxy's flow is freed only by the cyclic garbage
    collector (its connection, layers and flow refer to each other); what the flow still holds at its end goes
    with it, so each flow's translation state was freed by a collection instead of when the flow ended: about a
    third more young-generation collections per streamed flow, each ~0.3 ms of mitmdump's loop (issue 31,
    ``docs/performance.md``). A callable another addon put around ours is left alone (it is not ours to drop);
    the stream is over by then (mitmproxy calls ``response`` after the body's end), and a callable stays truthy
    for whatever reads ``response.stream`` after."""
    resp = flow.response
    if resp is not None and getattr(resp.stream, "__code__", None) in codes:
        resp.stream = ended_stream


#: distinct loss summaries remembered as warned about (past it, new ones are warned about every time)
WARNED_MAX = 1024


def log_done(flow: http.HTTPFlow, state: FlowState, status: int, warned: set[str] | None = None) -> None:
    if logger.isEnabledFor(logging.INFO):  # its parts are only put together for a line that is shown
        _log_done_line(flow, state, status)
    log_dropped(flow, state, warned)


def _log_done_line(flow: http.HTTPFlow, state: FlowState, status: int) -> None:
    plan = state.plan
    model = (
        state.client_model
        if state.client_model == state.upstream_model
        else f"{state.client_model} -> {state.upstream_model}"
    )
    how = "stream" if state.translator is not None else ("stream requested, JSON answered" if state.stream else "json")
    via = f" via {state.upstream_name}" if state.upstream_name else ""
    tries = f", {len(state.attempts)} attempts" if len(state.attempts) > 1 else ""
    rid = f", request id {state.request_id}" if state.request_id else ""
    logger.info(
        "flow %s: %s -> %s%s, model %s, status %d, %s%s%s",
        flow.id,
        plan.client.value,
        plan.upstream.value,
        logsafe(via),
        logsafe(model),
        status,
        how,
        tries,
        logsafe(rid, 200),
    )


def log_dropped(flow: http.HTTPFlow, state: FlowState, warned: set[str] | None = None) -> None:
    """One line per flow naming what the translation lost (field paths only; reasons are in the flow), and one
    WARNING naming what was adjusted to the model's declared limits.

    The loss line is a WARNING the first time its summary is seen (``warned``, the addon's set of summaries
    already warned about; ``None``: always) and INFO for later flows losing the same fields: a client that
    always sends what the upstream cannot carry (Claude Code's ``system[].cache_control`` toward Chat) is
    warned about once, not on every request, and every flow still has its line at INFO."""
    if state.ctx.adjusted:
        logger.warning(
            "flow %s: adjusted to the model's declared limits: %s", flow.id, logsafe(", ".join(state.ctx.adjusted))
        )
    report = state.ctx.dropped
    if not report.entries:
        return
    summary = report.summary()
    level = logging.WARNING
    if warned is not None:
        if summary in warned:
            level = logging.INFO
        elif len(warned) < WARNED_MAX:
            warned.add(summary)
    if logger.isEnabledFor(level):
        # a line per flow: the record is made directly (``Logger.warning`` also walks the stack for the
        # caller's file and line, which no handler of mitmproxy's shows), the rest as ``warning`` does it
        record = logger.makeRecord(
            logger.name,
            level,
            __file__,
            0,
            "flow %s: lossy translation, %d not carried as sent (%s)",
            (flow.id, report.count, logsafe(summary, 2000)),
            None,
            "log_dropped",
        )
        logger.handle(record)
