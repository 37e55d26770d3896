"""Per-flow state of the Translate addon, keyed by ``flow.id`` (live objects never go into ``flow.metadata``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from dataclasses import field
from typing import Any

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
    #: the ``dragoman.mitm.faults.IdleWatchdog`` of a streamed flow (cancelled in ``response``/``error``)
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
