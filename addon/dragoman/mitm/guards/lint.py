"""The ``dragoman_lint`` option at the flow level: which streams and bodies are linted, the log line of
each violation, and ``strict``'s error event when our own output breaks its protocol's grammar.
The checking itself is ``dragoman.lint`` (sans-I/O)."""

from __future__ import annotations

import logging
from typing import Any

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.lint.flow import FlowLint
from dragoman.lint.flow import describe
from dragoman.logsafe import logsafe
from dragoman.mitm.flowstate import FlowState
from dragoman.protocols.gemini.request_decode import WRAPPED

logger = logging.getLogger(__name__)


def start(state: FlowState, mode: str, ours: bool, ours_array: bool = False, upstream_array: bool = False) -> None:
    """Attach a ``FlowLint`` (``ours``: our output is linted too, False when the bytes pass untouched;
    ``*_array``: that side is a Gemini JSON-array stream, a ``:streamGenerateContent`` without ``alt=sse``)."""
    if mode in ("log", "strict"):
        plan = state.plan
        req = state.ctx.request
        state.lint = FlowLint(
            mode,
            plan.client.value,
            plan.upstream.value,
            ours=ours and not plan.identity,
            ours_array=ours_array,
            upstream_array=upstream_array,
            ours_wrapped=bool(req is not None and req.extra.get(WRAPPED)),
        )


def _log(flow_id: str, rep: dict[str, Any] | None) -> dict[str, Any] | None:
    if rep is not None:
        logger.warning("flow %s: %s", flow_id, logsafe(describe(rep), 500))
    return rep


def log_found(flow_id: str, found: list[dict[str, Any]]) -> None:
    """The reports a ``log`` mode batch check found (``FlowLint.feed``), each one log line."""
    for each in found:
        _log(flow_id, each)


def on_stream(flow_id: str, state: FlowState, upstream: bytes, out: bytes, final: bool) -> bytes:
    """One step of a stream: lint the upstream bytes and our output; -> the output to send. In strict
    mode a violation in our output appends an error event and mutes the rest of the stream."""
    lint: FlowLint = state.lint
    if not lint.strict and not final:  # log mode: both sides gathered, checked per batch
        found = lint.feed(upstream, out)
        if found is not None:
            log_found(flow_id, found)
        return out
    if lint.muted:
        return b""
    _log(flow_id, lint.feed_upstream(upstream, final))
    rep = _log(flow_id, lint.feed_ours(out, final))
    if rep is None or not lint.strict or final:
        return out
    lint.muted = True
    info = ErrorInfo(kind=ErrorKind.API_ERROR, message=f"Dragoman {describe(rep)}", status=500)
    try:
        return out + state.translator.fail(info)
    except Exception:  # noqa: BLE001 - never break the stream callable
        logger.exception("flow %s: could not emit the lint error event", flow_id)
        return out


def on_abort(flow_id: str, state: FlowState) -> None:
    """The flow failed mid-stream: lint what ``log`` mode gathered but had not checked yet."""
    lint: FlowLint | None = state.lint
    if lint is not None:
        for rep in lint.flush():
            _log(flow_id, rep)


def on_body(
    flow_id: str, state: FlowState, upstream: bytes, upstream_ok: bool, out: bytes, ok: bool
) -> dict[str, Any] | None:
    """Lint a whole answer (upstream body and ours; ``ok``: a 2xx body, else an error body).
    -> the report on our body when strict mode must replace it with an error."""
    lint: FlowLint = state.lint
    if upstream:
        _log(flow_id, lint.body("upstream", upstream, error=not upstream_ok))
    if lint.ours is None:
        return None
    rep = _log(flow_id, lint.body("ours", out, error=not ok))
    return rep if rep is not None and lint.strict else None


def whole_before(flow: Any, state: FlowState, mode: str) -> bytes | None:
    """Before a whole (non-streamed) answer is translated: start the lint, keep the upstream's JSON body."""
    resp = flow.response
    if mode == "off" or resp is None or "json" not in resp.headers.get("content-type", "").lower():
        return None
    start(state, mode, ours=True)
    return resp.get_content(strict=False) or b""


def whole_after(flow: Any, state: FlowState, upstream: bytes | None, upstream_status: int) -> None:
    """After translation: lint both bodies; strict mode answers a broken body of ours with a 502 error in
    the client's protocol (the violation in its message)."""
    resp = flow.response
    if upstream is None or state.lint is None or resp is None:
        return
    out = resp.get_content(strict=False) or b""
    ok = 200 <= resp.status_code < 300
    rep = on_body(flow.id, state, upstream, 200 <= upstream_status < 300, out, ok)
    if rep is None:
        return
    from dragoman.translate.response import error_body  # the protocol encoders, only on this rare path

    info = ErrorInfo(kind=ErrorKind.API_ERROR, message=f"Dragoman {describe(rep)}", status=502)
    resp.status_code = 502
    resp.content = error_body(info, state.plan.client)
