"""The routes file (YAML) and the single-upstream options -> ``Config``.

Every error is a ``ConfigError`` whose message names the file, the line, the entry and what is allowed; a
key is never part of a message (only the ``env:`` variable that should hold it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from dragoman.ir.limits import ModelLimits
from dragoman.protocols import Protocol
from dragoman.protocols import profiles
from dragoman.protocols._cache import CACHE_MODES
from dragoman.routing.keyspec import describe_key
from dragoman.routing.keyspec import resolve_key
from dragoman.routing.spec import ClientKey
from dragoman.routing.spec import Config
from dragoman.routing.spec import KeyRef
from dragoman.routing.spec import Limits
from dragoman.routing.spec import ModelSpec
from dragoman.routing.spec import Route
from dragoman.routing.spec import Target
from dragoman.routing.spec import Upstream
from dragoman.routing.url import UpstreamURL
from dragoman.routing.url import parse_upstream
from dragoman.translate.plan import ModelRule

PROTOCOLS = tuple(p.value for p in Protocol)
TOP_KEYS = ("upstreams", "routes", "clients", "limits", "models")
UPSTREAM_KEYS = ("name", "protocol", "base_url", "keys", "profile", "cache")
MODEL_KEYS = ("match", "upstream", "context_window", "max_output_tokens")
ROUTE_KEYS = ("match", "to")
CLIENT_KEYS = ("name", "key", "models", "routes")
LIMIT_KEYS = tuple(Limits.__dataclass_fields__)

#: the upstream name the single-upstream options create
DEFAULT_UPSTREAM = "default"


class ConfigError(ValueError):
    """A configuration that cannot be used; the message is meant for the user as is."""


class _Where:
    """Builds messages: ``FILE line N: upstreams[1] (deepseek): ...``."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, node: Any, path: str, problem: str, key: Any = None) -> ConfigError:
        return ConfigError(f"{self.source}{_line(node, key)}: {path}: {problem}")


def _line(node: Any, key: Any = None) -> str:
    lc = getattr(node, "lc", None)
    if lc is None:
        return ""
    try:
        if key is not None:
            pos = lc.key(key) if isinstance(key, str) else lc.item(key)
            return f" line {pos[0] + 1}"
        return f" line {lc.line + 1}"
    except (AttributeError, KeyError, IndexError, TypeError):
        return ""


def load_config(text: str, source: str, environ: Mapping[str, str]) -> Config:
    """Parse and check a routes file. ``source`` names it in messages."""
    try:
        doc = YAML(typ="rt", pure=True).load(text)
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{source}{where}: not valid YAML: {problem}") from None
    w = _Where(source)
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{source}: expected a mapping with 'upstreams' and 'routes' at the top")
    _no_unknown(w, doc, "top level", TOP_KEYS)
    upstreams = _upstreams(w, doc, environ)
    routes = _routes(w, doc, upstreams)
    clients = _clients(w, doc, environ, routes)
    limits = _limits(w, doc)
    return Config(upstreams, routes, clients, limits, source, _models(w, doc, upstreams))


def _no_unknown(w: _Where, node: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> None:
    for key in node:
        if key not in allowed:
            raise w.fail(node, path, f"unknown field {key!r} (allowed: {', '.join(allowed)})", key)


def _list(w: _Where, doc: Mapping[str, Any], name: str, required: bool) -> list[Any]:
    value = doc.get(name)
    if value is None:
        if required:
            raise w.fail(doc, name, f"missing: give a list of {name}")
        return []
    if not isinstance(value, list) or (required and not value):
        raise w.fail(doc, name, "must be a non-empty list" if required else "must be a list", name)
    return value


def _str(w: _Where, node: Mapping[str, Any], path: str, key: str, required: bool = True) -> str:
    value = node.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise w.fail(node, path, f"'{key}' must be a non-empty string", key if key in node else None)
    return value.strip()


def _keys(w: _Where, node: Mapping[str, Any], path: str, environ: Mapping[str, str]) -> tuple[KeyRef, ...]:
    raw = node.get("keys")
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        raise w.fail(node, path, "'keys' must be a list of strings (a literal key or env:NAME)", "keys")
    out = []
    for i, spec in enumerate(raw):
        try:
            value = resolve_key(spec, environ)
        except ValueError as e:
            raise w.fail(raw, f"{path}.keys[{i}]", str(e), i) from None
        if value is None:
            raise w.fail(raw, f"{path}.keys[{i}]", "empty key", i)
        out.append(KeyRef(value, describe_key(spec, i)))
    return tuple(out)


def _upstreams(w: _Where, doc: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Upstream]:
    out: dict[str, Upstream] = {}
    for i, node in enumerate(_list(w, doc, "upstreams", required=True)):
        path = f"upstreams[{i}]"
        if not isinstance(node, Mapping):
            raise w.fail(doc["upstreams"], path, "must be a mapping with name, protocol, base_url", i)
        _no_unknown(w, node, path, UPSTREAM_KEYS)
        name = _str(w, node, path, "name")
        path = f"{path} ({name})"
        if "/" in name:
            raise w.fail(node, path, "an upstream name cannot contain '/' (routes split UPSTREAM/MODEL there)", "name")
        if name in out:
            raise w.fail(node, path, "duplicate upstream name", "name")
        proto = _str(w, node, path, "protocol")
        if proto not in PROTOCOLS:
            raise w.fail(node, path, f"unknown protocol {proto!r} (allowed: {', '.join(PROTOCOLS)})", "protocol")
        base = _str(w, node, path, "base_url")
        try:
            url: UpstreamURL = parse_upstream(base)
        except ValueError as e:
            raise w.fail(node, path, f"bad base_url {base!r}: {e}", "base_url") from None
        keys = _keys(w, node, path, environ)
        out[name] = Upstream(
            name, Protocol(proto), url, keys, _profile(w, node, path, proto), _cache(w, node, path, proto)
        )
    return out


def _cache(w: _Where, node: Mapping[str, Any], path: str, proto: str) -> str:
    if "cache" not in node:
        return ""
    value = node["cache"]
    if not isinstance(value, str) or value not in CACHE_MODES:
        raise w.fail(node, path, f"unknown cache mode {value!r} (allowed: {', '.join(CACHE_MODES)})", "cache")
    if proto != Protocol.ANTHROPIC_MESSAGES.value:
        raise w.fail(
            node, path, f"'cache' applies to {Protocol.ANTHROPIC_MESSAGES.value} upstreams, not {proto}", "cache"
        )
    return value


def _models(w: _Where, doc: Mapping[str, Any], upstreams: dict[str, Upstream]) -> tuple[ModelSpec, ...]:
    out: list[ModelSpec] = []
    for i, node in enumerate(_list(w, doc, "models", required=False)):
        path = f"models[{i}]"
        if not isinstance(node, Mapping):
            raise w.fail(doc["models"], path, "must be a mapping with match and context_window/max_output_tokens", i)
        _no_unknown(w, node, path, MODEL_KEYS)
        match = _str(w, node, path, "match")
        path = f"{path} (match {match!r})"
        upstream = _str(w, node, path, "upstream", required=False)
        if upstream and upstream not in upstreams:
            raise w.fail(node, path, f"unknown upstream {upstream!r} (upstreams: {', '.join(upstreams)})", "upstream")
        numbers: dict[str, int | None] = {}
        for key in ("context_window", "max_output_tokens"):
            value = node.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise w.fail(node, f"{path}.{key}", "must be a number of tokens >= 1", key)
            numbers[key] = value
        if numbers["context_window"] is None and numbers["max_output_tokens"] is None:
            raise w.fail(node, path, "give context_window, max_output_tokens or both")
        out.append(ModelSpec(match, ModelLimits(**numbers), upstream))
    return tuple(out)


def _profile(w: _Where, node: Mapping[str, Any], path: str, proto: str) -> str:
    if "profile" not in node:
        return "auto"
    value = node["profile"]
    if not isinstance(value, str) or value not in profiles.CHOICES:
        raise w.fail(node, path, f"unknown profile {value!r} (allowed: {', '.join(profiles.CHOICES)})", "profile")
    if value != "auto" and proto != Protocol.OPENAI_CHAT.value:
        raise w.fail(node, path, f"a profile applies to openai-chat upstreams, not {proto}", "profile")
    return value


def parse_target(spec: str) -> Target:
    """``UPSTREAM`` or ``UPSTREAM/MODEL`` (split at the first "/")."""
    name, sep, model = spec.strip().partition("/")
    return Target(name.strip(), model.strip() if sep else None)


def _routes(w: _Where, doc: Mapping[str, Any], upstreams: dict[str, Upstream]) -> tuple[Route, ...]:
    out = []
    for i, node in enumerate(_list(w, doc, "routes", required=True)):
        path = f"routes[{i}]"
        if not isinstance(node, Mapping):
            raise w.fail(doc["routes"], path, "must be a mapping with match and to", i)
        _no_unknown(w, node, path, ROUTE_KEYS)
        match = _str(w, node, path, "match")
        path = f"{path} (match {match!r})"
        raw = node.get("to")
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list) or not raw:
            raise w.fail(
                node,
                path,
                "'to' must be a non-empty list of UPSTREAM or UPSTREAM/MODEL",
                "to" if "to" in node else None,
            )
        targets = []
        for j, spec in enumerate(raw):
            if not isinstance(spec, str) or not spec.strip():
                raise w.fail(raw, f"{path}.to[{j}]", "must be UPSTREAM or UPSTREAM/MODEL", j)
            t = parse_target(spec)
            if t.upstream not in upstreams:
                known = ", ".join(upstreams)
                raise w.fail(raw, f"{path}.to[{j}]", f"unknown upstream {t.upstream!r} (upstreams: {known})", j)
            if t.model == "":
                raise w.fail(raw, f"{path}.to[{j}]", "empty model after '/'", j)
            targets.append(t)
        out.append(Route(match, tuple(targets)))
    return tuple(out)


def _clients(
    w: _Where, doc: Mapping[str, Any], environ: Mapping[str, str], routes: tuple[Route, ...]
) -> tuple[ClientKey, ...]:
    out: list[ClientKey] = []
    matches = {r.match for r in routes}
    for i, node in enumerate(_list(w, doc, "clients", required=False)):
        path = f"clients[{i}]"
        if not isinstance(node, Mapping):
            raise w.fail(doc["clients"], path, "must be a mapping with name and key", i)
        _no_unknown(w, node, path, CLIENT_KEYS)
        name = _str(w, node, path, "name")
        path = f"{path} ({name})"
        spec = _str(w, node, path, "key")
        try:
            value = resolve_key(spec, environ)
        except ValueError as e:
            raise w.fail(node, path, f"key: {e}", "key") from None
        assert value is not None  # _str refused an empty spec
        if any(c.name == name for c in out):
            raise w.fail(node, path, "duplicate client name", "name")
        if any(c.key.value == value for c in out):
            raise w.fail(node, path, "two clients share one key (give each client its own)", "key")
        models = _globs(w, node, path, "models")
        allowed_routes = _globs(w, node, path, "routes")
        for r in allowed_routes:
            if r not in matches:
                known = ", ".join(repr(m) for m in sorted(matches))
                raise w.fail(node, path, f"routes: no route matches {r!r} (route match patterns: {known})", "routes")
        out.append(ClientKey(name, KeyRef(value, f"client {name}"), models, allowed_routes))
    return tuple(out)


def _globs(w: _Where, node: Mapping[str, Any], path: str, key: str) -> tuple[str, ...]:
    raw = node.get(key)
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(x, str) and x.strip() for x in raw):
        raise w.fail(node, path, f"'{key}' must be a list of non-empty strings", key)
    return tuple(x.strip() for x in raw)


def _limits(w: _Where, doc: Mapping[str, Any]) -> Limits:
    node = doc.get("limits")
    if node is None:
        return Limits()
    if not isinstance(node, Mapping):
        raise w.fail(doc, "limits", f"must be a mapping ({', '.join(LIMIT_KEYS)})", "limits")
    _no_unknown(w, node, "limits", LIMIT_KEYS)
    values: dict[str, Any] = {}
    for key, value in node.items():
        if key == "max_attempts":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise w.fail(node, "limits.max_attempts", "must be an integer >= 1", key)
            values[key] = value
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise w.fail(node, f"limits.{key}", "must be a number of seconds > 0", key)
        values[key] = float(value)
    return Limits(**values)


def config_from_options(
    target: Protocol, url: UpstreamURL | None, key: str | None, model_map: list[ModelRule], profile: str = "auto"
) -> Config:
    """The single-upstream options as a config: one upstream and a catch-all route."""
    keys = (KeyRef(key, "dragoman_api_key"),) if key else ()
    upstream = Upstream(DEFAULT_UPSTREAM, target, url, keys, profile)
    route = Route("*", (Target(DEFAULT_UPSTREAM),), tuple(model_map))
    return Config({DEFAULT_UPSTREAM: upstream}, (route,), (), Limits(), "options")
