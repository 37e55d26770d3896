"""Credentials leave the flow once the request is on the wire.

mitmproxy sends ``flow.request`` as it stands after the request hooks, so a key Dragoman attaches (or the
client's own key it moves to the upstream's header) has to sit in the flow until then. Once the upstream
answers (``responseheaders``), fails (``error``) or mitmproxy shuts down with the flow in flight (``done``),
every credential header and query parameter is removed from the flow, before mitmproxy's own addons see it:
the flow file (``-w``, ``save_stream_file``), the console at any ``flow_detail``, and every later hook. Dragoman's
addons run before mitmproxy's ``save`` and ``dumper`` (scripts load ahead of them). The names removed are kept
in ``flow.metadata["dragoman_credentials_removed"]``.

``FlowScrub`` closes the rest: every flow Dragoman is responsible for (its connection goes to an official host
or comes in reverse mode, or ``dragoman_match`` took it; marked by ``FlowScrub.mark``, listed first) loses its
credentials at its end whatever answered it: Dragoman itself (400, 401, 403, 404, 413...), the relay, the
upstream, an error. Every configured key and client key left in the flow (the request's path and body, the
metadata other addons keep for the flow file) is masked.
"""

from __future__ import annotations

from typing import Any

from mitmproxy import ctx
from mitmproxy import http

from dragoman.mitm import hosts
from dragoman.mitm.keymask import KeyMask
from dragoman.mitm.outbound import strip_credentials

REMOVED_KEY = "dragoman_credentials_removed"
#: set on a flow Dragoman is responsible for (``FlowScrub.mark``): scrubbed at its end
SCOPE_KEY = "dragoman_scope"

_known: tuple[object, tuple[Any, ...], KeyMask] | None = None


def known_keys() -> KeyMask:
    """Every key Dragoman holds: the configured upstream keys and the client keys (none before the addons load)."""
    global _known
    try:
        translate = ctx.master.addons.get("translate")
        auth = ctx.master.addons.get("clientauth")
    except AttributeError:
        return KeyMask()
    upstream = getattr(translate, "keys", None)
    clients = tuple(auth.clients()) if auth is not None else ()
    if _known is not None and _known[0] is upstream and _known[1] == clients:
        return _known[2]
    values = list(upstream.secrets) if isinstance(upstream, KeyMask) else []
    mask = KeyMask([v.decode() for v in values] + [c.key.value for c in clients])
    _known = (upstream, clients, mask)
    return mask


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


class FlowMark:
    """Listed first: marks the flows Dragoman is responsible for, before any addon rewrites where they go."""

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if hosts.in_scope(flow) or hosts.DIRECT_KEY in flow.metadata:
            flow.metadata[SCOPE_KEY] = True

    def request(self, flow: http.HTTPFlow) -> None:
        if SCOPE_KEY in flow.metadata:
            return
        translate = ctx.master.addons.get("translate")
        if hosts.in_scope(flow) or (translate is not None and translate.matches(flow)):
            flow.metadata[SCOPE_KEY] = True


class FlowScrub:
    """Listed after every other Dragoman addon (and so before mitmproxy's ``save`` and ``dumper``): at the end
    of a flow Dragoman is responsible for, its request loses every credential header and query parameter, and
    every key Dragoman holds is masked in its path, its body and the metadata the addons left for the flow file
    (the raw upstream chunks of a streamed answer, attempt details), as the client's answer has it masked."""

    def __init__(self) -> None:
        self.mark = FlowMark()

    def response(self, flow: http.HTTPFlow) -> None:
        self._end(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self._end(flow)

    def _end(self, flow: http.HTTPFlow) -> None:
        keys = known_keys()
        if flow.metadata.get(SCOPE_KEY):
            scrub(flow)
            if keys:
                _mask_request(flow.request, keys)
        if keys and flow.metadata:
            _mask_metadata(flow, keys)


#: the name earlier releases (and their tests) used for ``FlowScrub``
MetadataMask = FlowScrub


def _mask_request(req: http.Request, keys: KeyMask) -> None:
    if keys.in_bytes(req.data.path):
        req.data.path = keys.mask(req.data.path)
    body = req.raw_content
    if body:
        masked = keys.mask(body)
        if masked != body:
            req.raw_content = masked


def _mask_metadata(flow: http.HTTPFlow, keys: KeyMask) -> None:
    for name, value in list(flow.metadata.items()):
        if _holds(value, keys):
            flow.metadata[name] = _masked(value, keys)


def _holds(value: Any, keys: KeyMask) -> bool:
    """Some string or bytes inside ``value`` holds a key (a walk that builds nothing: the common case)."""
    texts, secrets = keys.texts, keys.secrets
    todo = [value]
    while todo:
        v = todo.pop()
        t = type(v)
        if t is str:
            if any(s in v for s in texts):
                return True
        elif t is dict:
            todo.extend(v.values())
        elif t is list or t is tuple:
            todo.extend(v)
        elif isinstance(v, str):
            if any(s in v for s in texts):
                return True
        elif isinstance(v, (bytes, bytearray)):
            if any(s in v for s in secrets):
                return True
        elif isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
    return False


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
