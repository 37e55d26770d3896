"""Credentials leave the flow once the request is on the wire.

mitmproxy sends ``flow.request`` as it stands after the request hooks, so a key Dragoman attaches (or the
client's own key it moves to the upstream's header) has to sit in the flow until then. Once the upstream
answers (``responseheaders``), fails (``error``) or mitmproxy shuts down with the flow in flight (``done``),
every credential header and query parameter is removed from the flow, before mitmproxy's own addons see it:
the flow file (``-w``, ``save_stream_file``), the console at any ``flow_detail``, and every later hook. Dragoman's
addons run before mitmproxy's ``save`` and ``dumper`` (scripts load ahead of them). The names removed are kept
in ``flow.metadata["dragoman_credentials_removed"]``.
"""

from __future__ import annotations

from typing import Any

from mitmproxy import ctx
from mitmproxy import http

from dragoman.mitm.keymask import KeyMask
from dragoman.mitm.outbound import strip_credentials

REMOVED_KEY = "dragoman_credentials_removed"


def scrub(flow: http.HTTPFlow) -> None:
    removed = strip_credentials(flow.request)
    if removed:
        before = flow.metadata.get(REMOVED_KEY) or []
        flow.metadata[REMOVED_KEY] = sorted({*before, *removed})


class Scrubber:
    """The flows that carry credentials until their request has been sent (by flow id)."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: dict[str, http.HTTPFlow] = {}

    def hold(self, flow: http.HTTPFlow) -> None:
        self.held[flow.id] = flow

    def sent(self, flow: http.HTTPFlow) -> None:
        """The request is on the wire (or never will be): remove its credentials."""
        if self.held.pop(flow.id, None) is not None:
            scrub(flow)

    def done(self) -> None:
        """mitmproxy is shutting down (its ``save`` addon then writes the flows still in flight)."""
        for flow in self.held.values():
            scrub(flow)
        self.held.clear()


class MetadataMask:
    """Listed after every other Dragoman addon: what they left in ``flow.metadata`` for the flow file (the raw
    upstream chunks of a streamed answer, attempt details) has the configured keys masked, as the client's
    answer has, before mitmproxy's ``save`` writes the flow."""

    def response(self, flow: http.HTTPFlow) -> None:
        self._mask(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self._mask(flow)

    @staticmethod
    def _mask(flow: http.HTTPFlow) -> None:
        if not flow.metadata:
            return
        translate = ctx.master.addons.get("translate")
        keys = getattr(translate, "keys", None)
        if not isinstance(keys, KeyMask) or not keys:
            return
        for name, value in list(flow.metadata.items()):
            masked = _masked(value, keys)
            if masked is not value:
                flow.metadata[name] = masked


def _masked(value: Any, keys: KeyMask) -> Any:
    """``value`` with the keys masked in every string and bytes inside (the same object when none is there)."""
    if isinstance(value, bytes):
        out = keys.mask(value)
        return value if out == value else out
    if isinstance(value, str):
        text = keys.mask_text(value)
        return value if text == value else text
    if isinstance(value, (list, tuple)):
        items = [_masked(v, keys) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
    if isinstance(value, dict):
        pairs = {k: _masked(v, keys) for k, v in value.items()}
        return value if all(pairs[k] is v for k, v in value.items()) else pairs
    return value
