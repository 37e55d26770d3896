"""Which flows Dragoman handles by default: the official API endpoints in every mode, any endpoint path in
reverse mode (the client was pointed at the proxy with a base URL). Everything else passes through.

Explicit-proxy (regular), upstream, transparent, WireGuard and local modes carry traffic for every host the
client talks to: only the official LLM hosts below are touched there, so an app that talks to another
provider directly through the same proxy is not hijacked.

Which host a flow belongs to is decided by where its connection really goes (``destination_host``), never
by its Host header: a client that connects to another host while writing ``Host: api.anthropic.com`` is
passed on untouched, so no configured key is ever attached to a request bound for a host the client picked.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import NamedTuple

from mitmproxy import ctx
from mitmproxy import http
from mitmproxy.proxy import mode_specs

from dragoman.protocols import Protocol
from dragoman.protocols import detect

logger = logging.getLogger(__name__)


class OfficialEndpoint(NamedTuple):
    host: str
    path: str  # exact path, query string ignored
    protocol: Protocol


#: the endpoints translated out of the box (``dragoman_match`` overrides)
OFFICIAL_ENDPOINTS: tuple[OfficialEndpoint, ...] = (
    OfficialEndpoint("api.anthropic.com", "/v1/messages", Protocol.ANTHROPIC_MESSAGES),
    OfficialEndpoint("api.openai.com", "/v1/chat/completions", Protocol.OPENAI_CHAT),
    OfficialEndpoint("api.openai.com", "/v1/responses", Protocol.OPENAI_RESPONSES),
    # Codex CLI signed in with ChatGPT
    OfficialEndpoint("chatgpt.com", "/backend-api/codex/responses", Protocol.OPENAI_RESPONSES),
)

ANTHROPIC_HOSTS = frozenset({"api.anthropic.com"})
OPENAI_HOSTS = frozenset({"api.openai.com", "chatgpt.com"})
OFFICIAL_HOSTS = ANTHROPIC_HOSTS | OPENAI_HOSTS

#: the prefix under which the other official calls (models, count_tokens, HEAD /) are handled per host;
#: on chatgpt.com only Codex's backend is ours, the rest of the site passes through
HOST_SCOPES = {
    "api.anthropic.com": "/",
    "api.openai.com": "/",
    "chatgpt.com": "/backend-api/codex/",
}


def bare_path(path: str) -> str:
    """The path without query string and trailing slash ("/" stays "/")."""
    p = path.split("?", 1)[0]
    return p.rstrip("/") or "/"


#: ``flow.metadata`` mark of a transparent-mode connection headed to this machine itself (``direct``): its
#: destination is the address it went to, never the name in its SNI
DIRECT_KEY = "dragoman_direct"


def destination_host(flow: http.HTTPFlow) -> str:
    """The host the flow's connection really goes to (lower case, no trailing dot), never the Host header:
    the absolute-form URL or CONNECT authority of the explicit proxy, the reverse target, the original
    destination of transparent/WireGuard/local modes — as mitmproxy resolved it into ``request.host``. An IP
    destination reached over TLS is named by the client's SNI, which mitmproxy checks the upstream's
    certificate against (unless ``ssl_insecure``: then the IP stands, as nothing vouches for the name); in
    reverse mode the SNI names the proxy itself and is not read, nor on a transparent-mode connection that
    went straight to this machine (``DIRECT_KEY``, see ``direct``)."""
    host = (flow.request.host or "").lower().rstrip(".")
    sni = flow.client_conn.sni
    if DIRECT_KEY in flow.metadata:
        return host
    if sni and flow.client_conn.tls and _is_ip(host) and not is_reverse(flow) and not _insecure():
        return sni.lower().rstrip(".")
    return host


def host_header_agrees(flow: http.HTTPFlow) -> bool:
    """The Host header (or ``:authority``), if any, names the host the connection goes to."""
    header = flow.request.host_header
    if not header:
        return True
    name = flow.request.pretty_host.lower().rstrip(".")
    return name == destination_host(flow) or name == (flow.request.host or "").lower().rstrip(".")


def _insecure() -> bool:
    try:
        return bool(ctx.options.ssl_insecure)
    except (AttributeError, KeyError):
        return False


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def is_reverse(flow: http.HTTPFlow) -> bool:
    """The client reached the proxy through a base URL (reverse mode): every endpoint path is ours."""
    return isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode)


def official_endpoint(flow: http.HTTPFlow) -> OfficialEndpoint | None:
    host = destination_host(flow)
    if host not in OFFICIAL_HOSTS:
        return None
    path = bare_path(flow.request.path)
    for ep in OFFICIAL_ENDPOINTS:
        if ep.host == host and ep.path == path:
            return ep
    return None


def on_official_host(flow: http.HTTPFlow) -> bool:
    """The flow goes to an official host, inside the part of it Dragoman answers for."""
    host = destination_host(flow)
    scope = HOST_SCOPES.get(host)
    if scope is None:
        return False
    return scope == "/" or flow.request.path.startswith(scope) or bare_path(flow.request.path) == scope.rstrip("/")


def in_scope(flow: http.HTTPFlow) -> bool:
    """Dragoman may answer or rewrite this flow: reverse mode, or an official host."""
    return is_reverse(flow) or on_official_host(flow)


def default_match(flow: http.HTTPFlow) -> bool:
    """The default of ``dragoman_match``: POSTs to an official endpoint, or to any endpoint path in reverse mode."""
    if flow.request.method != "POST":
        return False
    if is_reverse(flow):
        return detect(flow.request.path) is not None
    return official_endpoint(flow) is not None


def client_shape(flow: http.HTTPFlow) -> Protocol:
    """Which family the client belongs to, for calls whose path does not tell (``GET /v1/models``):
    the official host, else Anthropic's headers, else OpenAI."""
    host = destination_host(flow)
    if host in ANTHROPIC_HOSTS:
        return Protocol.ANTHROPIC_MESSAGES
    if host in OPENAI_HOSTS:
        return Protocol.OPENAI_CHAT
    headers = flow.request.headers
    if "anthropic-version" in headers or "x-api-key" in headers:
        return Protocol.ANTHROPIC_MESSAGES
    return Protocol.OPENAI_CHAT
