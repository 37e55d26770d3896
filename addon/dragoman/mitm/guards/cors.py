"""``Cors``: browser clients (opt-in with ``dragoman_cors_origins``; unset, nothing changes).

On the flows Dragoman answers for (the three endpoints incl. count_tokens, model lists, the Responses state
endpoints: the paths and hosts ``ClientAuth`` guards) a request carrying ``Origin`` is handled here:

preflight (OPTIONS + Access-Control-Request-Method)
    allowed origin     answered 204 locally (before ClientAuth: a preflight carries no key): Allow-Origin
                       (the origin, or ``*`` when ``*`` is configured), Allow-Methods, Allow-Headers (the
                       requested ones echoed), Max-Age, ``Vary: Origin``
    other origin       answered 403 locally, without allow headers (the upstream never decides)
request, allowed       forwarded without its ``Origin`` (Dragoman is the CORS boundary: an upstream such as
                       api.anthropic.com treats a request with Origin as a browser's); the answer, streamed,
                       translated, or Dragoman's own (401/403 of ClientAuth, 4xx/5xx, models, count_tokens),
                       gets Allow-Origin, Expose-Headers and ``Vary: Origin``; the upstream's own
                       Access-Control-* headers are replaced
request, other origin  refused 403 in the client's protocol shape: a page from another site cannot spend the
                       keys through a browser (CORS alone only hides the answer from it)

Without the option, the safe default (``Cors.guard``): while Dragoman holds upstream keys (``dragoman_api_key`` or
a key pool in the routes file) and no client keys are configured, a browser's request to those flows is refused
403 in the client's protocol shape, preflight or not, before anything reaches an upstream; otherwise any page
the user visits could make the browser POST (a "simple" text/plain request needs no preflight) and spend the
keys, CORS hiding only the answer. A browser's request is one carrying ``Origin`` (any value, ``null`` from
file:// pages and sandboxed iframes included: it cannot be allowed by name, only with client keys), or, without
it, ``Sec-Fetch-Site: cross-site|same-site``. The rule holds in every mode, interception of the official hosts
included: a browser or an Electron renderer behind the proxy sends ``Origin`` there too (SDKs, Claude Code,
Codex, curl send none). Opt-outs: ``dragoman_cors_origins`` (the Cors rules above), or client keys (a page
cannot know one). When Dragoman holds no key (the client's own key moves upstream), nothing changes.

Requests without ``Origin`` (SDKs, curl) and other hosts are untouched. Two halves: ``Cors`` is registered
first (preflights, refusals), ``Cors.after`` right after Translate, so the upstream's headers are recorded as
they came and the CORS headers are set on the answer the client gets: in ``responseheaders`` (before a
streamed body starts) and again in ``response`` (answers made locally, bodies rewritten whole).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any
from typing import NamedTuple

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm import hosts
from dragoman.mitm.guards.client_auth import guarded
from dragoman.mitm.relay import headers as hdr
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.translate.response import error_body

logger = logging.getLogger(__name__)

OPTION = "dragoman_cors_origins"
#: flow.metadata: the Access-Control-Allow-Origin value of a flow whose answer carries CORS headers
ORIGIN_KEY = "dragoman_cors_origin"
#: flow.metadata: what Cors answered itself (saved with -w)
METADATA_KEY = "dragoman_cors"
#: ``Sec-Fetch-Site`` values of a request a page from another origin made
FOREIGN_SITES = frozenset({"cross-site", "same-site"})

ALLOW_METHODS = "GET, POST, DELETE, OPTIONS"  # DELETE: the Responses state endpoints (DELETE /v1/responses/ID)
DEFAULT_ALLOW_HEADERS = (
    "authorization, x-api-key, content-type, anthropic-version, anthropic-beta, "
    "anthropic-dangerous-direct-browser-access, openai-beta, openai-organization, openai-project, x-stainless-retry-count"
)
EXPOSE_HEADERS = (
    "request-id, x-request-id, retry-after, retry-after-ms, x-dragoman-route, x-dragoman-estimate, "
    "openai-processing-ms, anthropic-ratelimit-requests-remaining, anthropic-ratelimit-tokens-remaining, "
    "x-ratelimit-remaining-requests, x-ratelimit-remaining-tokens"
)
MAX_AGE = "600"
DEFAULT_PORTS = {"http": 80, "https": 443}
ORIGIN_RE = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<host>\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::(?P<port>[0-9]{1,5}))?/?",
    re.IGNORECASE,
)
#: a list of header names, as Access-Control-Request-Headers carries it
HEADER_LIST_RE = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+(\s*,\s*[!#$%&'*+.^_`|~0-9a-z-]+)*", re.IGNORECASE)


class CorsSpec(NamedTuple):
    any_origin: bool
    origins: frozenset[str]

    @property
    def on(self) -> bool:
        return self.any_origin or bool(self.origins)


def normalize_origin(value: str) -> str | None:
    """``scheme://host[:port]`` in lower case, default port dropped; None when ``value`` is no such origin."""
    m = ORIGIN_RE.fullmatch(value.strip())
    if m is None:
        return None
    scheme, host, port = m["scheme"].lower(), m["host"].lower(), m["port"]
    if port is not None:
        if not 0 < int(port) < 65536:
            return None
        if DEFAULT_PORTS.get(scheme) == int(port):
            port = None
    return f"{scheme}://{host}" + (f":{int(port)}" if port is not None else "")


def parse_origins(values: Iterable[str]) -> CorsSpec:
    """The option's values (each may hold several, comma-separated). Raises ``ValueError``."""
    any_origin, origins = False, set()
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            if item == "*":
                any_origin = True
                continue
            origin = normalize_origin(item)
            if origin is None:
                raise ValueError(f"{item!r} is not an origin: use scheme://host[:port] (http://localhost:3000) or *")
            origins.add(origin)
    return CorsSpec(any_origin, frozenset(origins))


def browser_origin(headers: http.Headers) -> str | None:
    """Who made a browser's request: its ``Origin`` (``null`` included), else its foreign ``Sec-Fetch-Site``;
    None for a request no browser page made (SDKs, curl, Node, a URL typed into the address bar)."""
    origin = hdr.get(headers, b"origin")
    if origin is not None:
        return origin
    site = (hdr.get(headers, b"sec-fetch-site", "") or "").strip().lower()
    return f"(no Origin; Sec-Fetch-Site: {site})" if site in FOREIGN_SITES else None


def spends_own_keys() -> bool:
    """Dragoman holds upstream keys and has no client keys: anyone who reaches it spends them."""
    translate = ctx.master.addons.get("translate")
    config = getattr(getattr(translate, "routing", None), "config", None)
    if config is None or not config.holds_keys:
        return False
    auth = ctx.master.addons.get("clientauth")
    return not (auth is not None and auth.clients())


def client_protocol(flow: http.HTTPFlow) -> Protocol:
    """The protocol whose error shape a refusal takes (count_tokens is Anthropic's, whatever the headers)."""
    path = hosts.bare_path(flow.request.path)
    if path.endswith("/messages/count_tokens"):
        return Protocol.ANTHROPIC_MESSAGES
    return detect(path) or hosts.client_shape(flow)


def is_preflight(req: http.Request) -> bool:
    return req.method == "OPTIONS" and "access-control-request-method" in req.headers


def add_vary(headers: http.Headers, *names: str) -> None:
    present = {v.strip().lower() for v in headers.get("vary", "").split(",") if v.strip()}
    if "*" in present:
        return
    missing = [n for n in names if n.lower() not in present]
    if missing:
        headers["vary"] = ", ".join([*(v.strip() for v in headers.get_all("vary") if v.strip()), *missing])


def drop_cors_headers(headers: http.Headers) -> None:
    for name in [k for k in headers if k.lower().startswith("access-control-")]:
        headers.pop(name, None)


def set_answer_headers(headers: http.Headers, allow_origin: str) -> None:
    """The CORS headers of an answer (idempotent: ``response`` repeats what ``responseheaders`` did)."""
    drop_cors_headers(headers)
    headers["access-control-allow-origin"] = allow_origin
    headers["access-control-expose-headers"] = EXPOSE_HEADERS
    if allow_origin != "*":
        add_vary(headers, "Origin")


def answer_header_lines(flow: http.HTTPFlow) -> list[tuple[str, str]]:
    """The CORS headers for an answer written to the client directly (``faults.deliver_error_answer``)."""
    allow_origin = flow.metadata.get(ORIGIN_KEY)
    if not isinstance(allow_origin, str):
        return []
    lines = [("access-control-allow-origin", allow_origin), ("access-control-expose-headers", EXPOSE_HEADERS)]
    return lines if allow_origin == "*" else [*lines, ("vary", "Origin")]


class Cors:
    """Preflights and refusals (registered first), or, without the option, ``guard``; ``after`` sets the
    headers of the answers."""

    def __init__(self) -> None:
        self.spec = CorsSpec(False, frozenset())
        self.after = CorsHeaders()

    def load(self, loader: Any) -> None:
        loader.add_option(
            OPTION,
            Sequence[str],
            [],
            "Origins of browser pages allowed to call Dragoman (CORS): exact origins such as "
            "http://localhost:3000 (repeat the option or separate with commas), or * for any. Preflights are "
            "answered locally and answers carry Access-Control-Allow-Origin; requests from other origins are "
            "refused with 403. Empty: no CORS handling, OPTIONS passes through; but while Dragoman holds upstream "
            "keys and no client keys are set, requests from browser pages (Origin) are refused with 403.",
        )

    def configure(self, updated: set[str]) -> None:
        if OPTION in updated:
            try:
                self.spec = parse_origins(ctx.options.dragoman_cors_origins)
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot use {OPTION}: {e}") from e

    def allow_origin(self, origin: str) -> str | None:
        """The Access-Control-Allow-Origin value for a request from ``origin``; None: not allowed."""
        if self.spec.any_origin:
            return "*"
        normalized = normalize_origin(origin)
        return origin.strip() if normalized is not None and normalized in self.spec.origins else None

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None or flow.is_replay:
            return
        if not self.spec.on:
            self.guard(flow)
            return
        req = flow.request
        origin = hdr.get(req.headers, b"origin")
        if origin is None or not guarded(flow):
            return
        allow_origin = self.allow_origin(origin)
        if is_preflight(req):
            self._preflight(flow, origin, allow_origin)
        elif allow_origin is None:
            self._refuse(flow, origin)
        else:
            req.headers.pop("origin", None)
            flow.metadata[ORIGIN_KEY] = allow_origin

    def guard(self, flow: http.HTTPFlow) -> None:
        """The default without ``dragoman_cors_origins``: no browser page spends the keys Dragoman holds."""
        origin = browser_origin(flow.request.headers)
        if origin is None or not guarded(flow) or not spends_own_keys():
            return
        info = ErrorInfo(
            kind=ErrorKind.PERMISSION,
            message=f"a browser page (origin {origin!r}) may not spend the upstream keys Dragoman holds: allow "
            f"the page's origin with --set {OPTION}=ORIGIN, or configure client keys (dragoman_client_keys) "
            "and send one",
            status=403,
        )
        flow.response = http.Response.make(
            403, error_body(info, client_protocol(flow)), {"content-type": "application/json"}
        )
        flow.metadata[METADATA_KEY] = "browser-refused"
        logger.warning(
            "flow %s: %s %s from browser origin %r refused (403): Dragoman holds upstream keys, no client keys "
            "and no %s",
            flow.id,
            logsafe(flow.request.method),
            logsafe(flow.request.path),
            origin,
            OPTION,
        )

    def _preflight(self, flow: http.HTTPFlow, origin: str, allow_origin: str | None) -> None:
        if allow_origin is None:
            flow.response = http.Response.make(403, b"origin not allowed\n", {"content-type": "text/plain"})
            flow.metadata[METADATA_KEY] = "preflight-refused"
            logger.warning("flow %s: preflight from origin %r refused (403): not in %s", flow.id, origin, OPTION)
            return
        requested = flow.request.headers.get("access-control-request-headers", "").strip()
        allow_headers = requested if HEADER_LIST_RE.fullmatch(requested) else DEFAULT_ALLOW_HEADERS
        flow.response = http.Response.make(
            204,
            b"",
            {
                "access-control-allow-origin": allow_origin,
                "access-control-allow-methods": ALLOW_METHODS,
                "access-control-allow-headers": allow_headers,
                "access-control-max-age": MAX_AGE,
            },
        )
        flow.response.headers.pop("content-length", None)  # a 204 has no body and no Content-Length
        add_vary(flow.response.headers, "Origin", "Access-Control-Request-Headers")
        flow.metadata[METADATA_KEY] = "preflight"
        logger.debug("flow %s: preflight from %s answered (204)", flow.id, origin)

    def _refuse(self, flow: http.HTTPFlow, origin: str) -> None:
        info = ErrorInfo(
            kind=ErrorKind.PERMISSION,
            message=f"requests from origin {origin!r} are not allowed (dragoman_cors_origins)",
            status=403,
        )
        flow.response = http.Response.make(
            403, error_body(info, client_protocol(flow)), {"content-type": "application/json"}
        )
        flow.metadata[METADATA_KEY] = "refused"
        logger.warning(
            "flow %s: %s %s from origin %r refused (403)",
            flow.id,
            logsafe(flow.request.method),
            logsafe(flow.request.path),
            origin,
        )


class CorsHeaders:
    """The second half of ``Cors``, registered after Translate: the CORS headers of the client's answer."""

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        self._apply(flow)

    def response(self, flow: http.HTTPFlow) -> None:
        self._apply(flow)

    def _apply(self, flow: http.HTTPFlow) -> None:
        allow_origin = flow.metadata.get(ORIGIN_KEY)
        if not isinstance(allow_origin, str) or flow.response is None or flow.is_replay:
            return
        set_answer_headers(flow.response.headers, allow_origin)
