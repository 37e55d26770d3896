"""Where a translated request goes and which credentials it carries: the flow's URL, auth and headers.

The rule for keys: when the upstream has keys of its own, none of the client's credentials for any provider
leave (every header and query parameter with a credential's name: ``dragoman.record.secret_names``, the one
list that recordings redact too; cookies);
otherwise the client's own key moves to the upstream protocol's header (``x-api-key`` +
``anthropic-version`` for Anthropic, ``Authorization: Bearer`` for OpenAI).
"""

from __future__ import annotations

from collections.abc import Container
from collections.abc import Iterable
from collections.abc import Sequence
from functools import lru_cache
from urllib.parse import parse_qsl
from urllib.parse import urlencode

from mitmproxy import http
from mitmproxy.net.http.url import hostport

from dragoman.mitm.relay import headers as hdr
from dragoman.protocols import Protocol
from dragoman.record.secret_names import is_secret_header
from dragoman.record.secret_names import is_secret_query
from dragoman.routing.url import UpstreamURL
from dragoman.routing.url import default_path
from dragoman.routing.url import gemini_endpoint
from dragoman.routing.url import join_endpoint

ANTHROPIC_VERSION = "2023-06-01"
#: client headers that carry credentials
AUTH_HEADERS = ("x-api-key", "authorization", "x-goog-api-key")
_AUTH_HEADER_NAMES = frozenset(n.encode() for n in AUTH_HEADERS)
#: headers that carry a credential for some provider (Anthropic, OpenAI, Azure OpenAI, Google) or a proxy; the
#: rule is ``secret_names.is_secret_header`` (the one list recordings redact too): these are examples of it
CREDENTIAL_HEADERS = (*AUTH_HEADERS, "api-key", "proxy-authorization", "cookie")
#: headers never copied from the client's request to a relayed attempt
NOT_RELAYED = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "cookie",
        "proxy-authorization",
        "accept-encoding",
        "content-encoding",
        "upgrade",
        "te",
        "trailer",
        *AUTH_HEADERS,
    }
)


def is_credential_header(name: str) -> bool:
    """A header that carries a credential (``authorization``, ``x-api-key``, ``cookie``, ``*-api-key``...)."""
    return is_secret_header(name)


@lru_cache(maxsize=4096)
def _credential_name(raw: bytes) -> str | None:
    """A header's name as it comes (bytes) -> its lower-case name when it carries a credential, else None."""
    low = raw.decode("latin-1").lower()
    return low if is_credential_header(low) else None


def pop_credential_headers(headers: http.Headers) -> list[str]:
    """Remove every credential header; returns their names (lower case, first occurrence order)."""
    names: list[str] = []
    kept: list[tuple[bytes, bytes]] = []
    for field in headers.fields:  # not ``headers.keys()``: each of its names is looked up again (quadratic)
        low = _credential_name(field[0])
        if low is None:
            kept.append(field)
        elif low not in names:
            names.append(low)
    if names:
        headers.fields = tuple(kept)
    return names


def client_key(headers: http.Headers, query: str = "") -> str | None:
    """The credential the client sent (``x-api-key``, ``Authorization: Bearer``, Gemini's ``x-goog-api-key`` or
    its ``?key=`` query parameter), if any."""
    if isinstance(headers, http.Headers):  # one scan per name, not mitmproxy's lookup
        key = hdr.get(headers, b"x-api-key") or hdr.get(headers, b"x-goog-api-key")
        auth = (hdr.get(headers, b"authorization", "") or "") if not key else ""
    else:  # any mapping with ``get`` (a WebSocket turn keeps its connection's headers as a list)
        key = headers.get("x-api-key") or headers.get("x-goog-api-key")
        auth = (headers.get("authorization", "") or "") if not key else ""
    if key:
        return key
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if query:
        for k, v in parse_qsl(query, keep_blank_values=True):
            if k == "key" and v:
                return v
    return None


def endpoint_path(
    url: UpstreamURL | None, target: Protocol, model: str = "", stream: bool = False, identity: bool = False
) -> str:
    """The upstream's path; Gemini's names the model and method (``identity``: the client's query follows)."""
    if target is Protocol.GEMINI:
        return gemini_endpoint(url.path if url is not None else "", model, stream, sse=not identity)
    return join_endpoint(url.path, target.endpoint) if url is not None else default_path(target)


def rewrite_url(
    req: http.Request, url: UpstreamURL | None, target: Protocol, identity: bool, model: str = "", stream: bool = False
) -> None:
    """Point the flow at the upstream (``url`` None: keep the host the client asked for)."""
    _, sep, query = req.path.partition("?")
    if url is not None:
        point_at(req, url.scheme, url.host, url.port)
        path = endpoint_path(url, target, model, stream, identity)
    elif identity and target is not Protocol.GEMINI:
        return
    else:
        path = endpoint_path(None, target, model, stream, identity)
    if identity and sep:
        path += "?" + query
    req.path = path


def point_at(req: http.Request, scheme: str, host: str, port: int) -> None:
    """``req.scheme, req.host, req.port = scheme, host, port`` with the Host header (where present) and the
    authority (where set) fixed once, as mitmproxy's setters do each time (a header scan per setter)."""
    req.scheme = scheme
    data = req.data
    data.host = host  # (mitmproxy's setter keeps a str as it is)
    data.port = port
    value = hostport(scheme, host, port)
    hdr.replace(req.headers, b"host", value)
    if data.authority:
        req.authority = value


def rewrite_auth(
    req: http.Request, target: Protocol, key: str | None, drop: Container[bytes] = (), put: Sequence[Put] = ()
) -> None:
    """``key``: the upstream's own key (every client credential removed), or None to move the client's key.
    ``drop``/``put``: more header edits made in the same pass over the headers (``headers.edit``)."""
    headers = req.headers
    if key is not None:
        strip_query_credentials(req)
        gone: Container[bytes] = CredentialNames()
    else:
        key = client_key(headers, req.path.partition("?")[2])
        gone = _AUTH_HEADER_NAMES
    hdr.edit(headers, _Drop(gone, drop, target), [*put, *_auth_puts(headers, target, key)])


def strip_credentials(req: http.Request) -> list[str]:
    """Remove every credential header and query parameter from ``req``; returns the names removed."""
    removed = pop_credential_headers(req.headers)
    return removed + strip_query_credentials(req)


def strip_query_credentials(req: http.Request) -> list[str]:
    """Remove every credential query parameter from ``req``'s path; returns their names."""
    path, sep, query = req.path.partition("?")
    if sep:
        kept, dropped = clean_query(query)
        if dropped:
            req.path = path + ("?" + kept if kept else "")
            return dropped
    return []


def clean_query(query: str) -> tuple[str, list[str]]:
    """``query`` without credential parameters (untouched when it has none), and the names dropped."""
    pairs = parse_qsl(query, keep_blank_values=True)
    dropped = [k for k, _ in pairs if is_secret_query(k)]
    if not dropped:
        return query, []
    return urlencode([(k, v) for k, v in pairs if not is_secret_query(k)]), dropped


def set_auth(headers: http.Headers, target: Protocol, key: str | None) -> None:
    hdr.edit(headers, _Drop((), (), target), _auth_puts(headers, target, key))


Put = tuple[bytes, str]


class CredentialNames:
    """Every credential header's name (``is_credential_header``), as a container of lower-case bytes."""

    def __contains__(self, low: object) -> bool:
        return isinstance(low, bytes) and _credential_name(low) is not None


class _Drop:
    """The names one ``rewrite_auth`` removes: ``gone`` (credentials), ``more``, and ``anthropic-*`` headers when
    the target is not Anthropic (they mean nothing elsewhere)."""

    __slots__ = ("gone", "more", "anthropic")

    def __init__(self, gone: Container[bytes], more: Container[bytes], target: Protocol) -> None:
        self.gone, self.more = gone, more
        self.anthropic = target is not Protocol.ANTHROPIC_MESSAGES

    def __contains__(self, low: object) -> bool:
        assert isinstance(low, bytes)
        return low in self.gone or low in self.more or (self.anthropic and low.startswith(b"anthropic-"))


def _auth_puts(headers: http.Headers, target: Protocol, key: str | None) -> list[Put]:
    if target is Protocol.ANTHROPIC_MESSAGES:
        puts: list[Put] = []
        if not hdr.has(headers, b"anthropic-version"):
            puts.append((b"anthropic-version", ANTHROPIC_VERSION))
        if key:
            puts.append((b"x-api-key", key))
        return puts
    if not key:
        return []
    if target is Protocol.GEMINI:
        return [(b"x-goog-api-key", key)]
    return [(b"authorization", f"Bearer {key}")]


def relayed_headers(
    client_headers: Iterable[tuple[str, str]], target: Protocol, key: str | None, configured: bool = False
) -> list[tuple[str, str]]:
    """Headers for one relayed attempt: the client's (minus credentials and framing; minus every provider's
    credentials when ``key`` is a ``configured`` one) plus the attempt's auth."""
    out: list[tuple[str, str]] = []
    anthropic = target is Protocol.ANTHROPIC_MESSAGES
    has_version = False
    for name, value in client_headers:
        low = name.lower()
        if low in NOT_RELAYED or (configured and is_credential_header(low)):
            continue
        if low.startswith("anthropic-"):
            if not anthropic:
                continue
            has_version = has_version or low == "anthropic-version"
        if low == "content-type":
            continue
        out.append((low, value))
    out.append(("content-type", "application/json"))
    out.append(("accept-encoding", "identity"))
    if anthropic:
        if not has_version:
            out.append(("anthropic-version", ANTHROPIC_VERSION))
        if key:
            out.append(("x-api-key", key))
    elif key and target is Protocol.GEMINI:
        out.append(("x-goog-api-key", key))
    elif key:
        out.append(("authorization", f"Bearer {key}"))
    return out
