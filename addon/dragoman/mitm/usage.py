"""The usage ledger's hook in the addon: one ``UsageRecord`` per finished translated request.

The ledger is ``dragoman_ledger`` (a path, ``sqlite://PATH``, ``redis://...``), else ``$DRAGOMAN_LEDGER``,
else ``~/.dragoman/usage.sqlite3``; ``off`` disables it. Usage is what the upstream reported (read from the
stream as it passes, or from the whole answer); when it reported none, an estimate marked as estimated.
"""

from __future__ import annotations

import logging
import os
import time

from mitmproxy import http

from dragoman.ir.common import Usage
from dragoman.ledger import DEFAULT_LEDGER
from dragoman.ledger import Ledger
from dragoman.ledger import UsageRecord
from dragoman.ledger import open_ledger
from dragoman.mitm.flowstate import FlowState
from dragoman.translate.usage import estimate_usage
from dragoman.translate.usage import usage_of_body

logger = logging.getLogger(__name__)

OFF = "off"


def ledger_spec(option: str) -> str | None:
    spec = option.strip() or os.environ.get("DRAGOMAN_LEDGER", "").strip() or DEFAULT_LEDGER
    return None if spec.lower() == OFF else spec


class UsageBook:
    """Opens the ledger (``LedgerError`` for a bad spec: the caller turns it into ``OptionsError``)."""

    def __init__(self) -> None:
        self.ledger: Ledger | None = None
        self.spec: str | None = None

    def open(self, option: str) -> None:
        spec = ledger_spec(option)
        if spec == self.spec and (self.ledger is not None or spec is None):
            return
        new = open_ledger(spec) if spec is not None else None
        self.close()
        self.ledger, self.spec = new, spec
        if new is not None:
            logger.info("usage ledger: %s", new.describe())

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()
            self.ledger = None
        self.spec = None

    @property
    def on(self) -> bool:
        return self.ledger is not None

    def record(self, flow: http.HTTPFlow, state: FlowState, status: int, failed: bool) -> None:
        ledger = self.ledger
        if ledger is None:
            return
        usage, estimated = self._usage(flow, state, status)
        cache_read = usage.cache_read_tokens or 0
        cache_write = usage.cache_creation_tokens or 0
        translator = state.translator
        error = failed or status >= 400 or getattr(translator, "error_info", None) is not None
        ledger.add(
            UsageRecord(
                ts=time.time(),
                client=state.client_name,
                route=state.route,
                upstream=state.upstream_name or "default",
                model=state.upstream_model,
                client_model=state.client_model,
                status=status,
                error=error,
                input_tokens=max(0, (usage.input_tokens or 0) - cache_read - cache_write),
                output_tokens=usage.output_tokens or 0,
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
                estimated=estimated,
                stream=state.stream,
                attempts=max(1, len(state.attempts)),
            )
        )

    @staticmethod
    def _usage(flow: http.HTTPFlow, state: FlowState, status: int) -> tuple[Usage, bool]:
        usage = state.usage_tap.usage if state.usage_tap is not None else state.whole_usage
        if usage is not None and (usage.input_tokens is not None or usage.output_tokens is not None):
            return usage, False
        if not 200 <= status < 300:
            return Usage(input_tokens=0, output_tokens=0), False  # nothing was generated
        try:
            return estimate_usage(state.ctx.request), True
        except Exception:  # noqa: BLE001 - the ledger must never break a flow
            logger.debug("flow %s: usage estimate failed", flow.id, exc_info=True)
            return Usage(input_tokens=0, output_tokens=0), True


def whole_usage(state: FlowState, body: bytes) -> None:
    """Read a whole answer's usage (the protocol the upstream spoke) into the state."""
    state.whole_usage = usage_of_body(body, state.plan.upstream, state.ctx)
