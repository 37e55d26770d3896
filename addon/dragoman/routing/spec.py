"""The parsed routing configuration: frozen values, rebuilt whole on every (re)load."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from dataclasses import field

from dragoman.ir.limits import ModelLimits
from dragoman.protocols import Protocol
from dragoman.protocols import profiles
from dragoman.routing.url import UpstreamURL
from dragoman.translate.plan import ModelRule


@dataclass(frozen=True, slots=True)
class KeyRef:
    """A secret and how logs may name it (``env:NAME`` or ``key #N``). ``repr`` never shows the value."""

    value: str = field(repr=False)
    label: str


@dataclass(frozen=True, slots=True)
class Upstream:
    name: str
    protocol: Protocol
    #: None: keep the host the client asked for, with the protocol's standard path (single-upstream shorthand)
    url: UpstreamURL | None
    #: the key pool, used in turn; empty: the client's own key moves across
    keys: tuple[KeyRef, ...] = ()
    #: the provider profile of an openai-chat upstream (``dragoman.protocols.profiles``); "auto": from the host
    profile: str = "auto"
    #: how an anthropic-messages upstream is asked to cache other protocols' requests (``protocols._cache``):
    #: "auto" (request-level ``cache_control``), "breakpoints", "off"; "" picks per host (``anthropic_cache``)
    cache: str = ""


@dataclass(frozen=True, slots=True)
class Target:
    upstream: str
    #: None: the client's model (after the route's model map) is kept
    model: str | None = None

    def __str__(self) -> str:
        return self.upstream if self.model is None else f"{self.upstream}/{self.model}"


@dataclass(frozen=True, slots=True)
class Route:
    match: str  # glob on the model the client asked for
    to: tuple[Target, ...]
    #: the single-upstream shorthand's ``dragoman_model_map`` (applies to bare targets)
    model_map: tuple[ModelRule, ...] = ()


@dataclass(frozen=True, slots=True)
class ClientKey:
    name: str
    key: KeyRef
    #: globs on the model the client asks for; empty: every model
    models: tuple[str, ...] = ()
    #: route ``match`` patterns this client may use; empty: every route
    routes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Limits:
    #: attempts per request, over every key and upstream of its route
    max_attempts: int = 4
    #: seconds after the first attempt began during which another attempt may still start
    deadline: float = 120.0
    #: seconds to establish an upstream connection (TCP + TLS)
    connect_timeout: float = 10.0
    #: seconds from sending the request until the upstream's response headers
    first_byte_timeout: float = 300.0
    #: seconds a key rests after a 429 without ``retry-after``
    cooldown: float = 30.0
    #: seconds a key is benched after a 401/403 (a revoked or wrong key)
    bench: float = 3600.0


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model's declared limits (routes file ``models:``): ``match`` globs the model sent upstream."""

    match: str
    limits: ModelLimits
    #: only for this upstream ("" : any)
    upstream: str = ""


@dataclass(frozen=True, slots=True)
class Config:
    upstreams: dict[str, Upstream]
    routes: tuple[Route, ...]
    clients: tuple[ClientKey, ...] = ()
    limits: Limits = Limits()
    #: where it came from, for messages: a file path, or "options"
    source: str = "options"
    models: tuple[ModelSpec, ...] = ()

    def model_limits(self, upstream: str, model: str) -> ModelLimits | None:
        """The declared limits of ``model`` on ``upstream`` (first matching entry), None when none match."""
        for spec in self.models:
            if (not spec.upstream or spec.upstream == upstream) and fnmatch.fnmatchcase(model, spec.match):
                return spec.limits
        return None

    @property
    def holds_keys(self) -> bool:
        """Some upstream spends a key of ours (so who may reach this proxy matters)."""
        return any(u.keys for u in self.upstreams.values())


def upstream_profile(up: Upstream, host: str, port: int) -> profiles.Profile:
    """The provider profile of a request to ``up``; an upstream without a URL goes to the host the client asked
    for (``host``/``port``), which then identifies the profile. Only openai-chat upstreams have one."""
    if up.protocol is not Protocol.OPENAI_CHAT:
        return profiles.GENERIC
    h, p = (up.url.host, up.url.port) if up.url is not None else (host, port)
    return profiles.choose(up.profile, h, p)[0]


def describe_profile(up: Upstream) -> str | None:
    """How an openai-chat upstream's profile is chosen, for the start-up log (None: not a Chat upstream)."""
    if up.protocol is not Protocol.OPENAI_CHAT:
        return None
    if up.profile != "auto":
        return f"{up.profile} (set)"
    if up.url is None:
        return "auto (detected per request from the host the client asked for)"
    found, _ = profiles.choose(None, up.url.host, up.url.port)
    return f"{found.name} (detected from {up.url.host})"


#: hosts known to take Anthropic's request-level (automatic) ``cache_control``
AUTO_CACHE_HOSTS = ("api.anthropic.com",)


def anthropic_cache(up: Upstream, host: str) -> str:
    """The cache mode of a request to ``up`` (see ``Upstream.cache``): as set, else "auto" toward Anthropic's
    own API and explicit "breakpoints" toward other Anthropic-compatible servers (which may lack the form)."""
    if up.cache:
        return up.cache
    h = (up.url.host if up.url is not None else host).lower().rstrip(".")
    return "auto" if any(h == d or h.endswith("." + d) for d in AUTO_CACHE_HOSTS) else "breakpoints"
