"""Client keys: who may spend the upstream keys (sans-I/O). Compared in constant time; named, never shown."""

from __future__ import annotations

import fnmatch
import hmac
from collections.abc import Iterable
from collections.abc import Mapping

from dragoman.routing.keyspec import resolve_key
from dragoman.routing.spec import ClientKey
from dragoman.routing.spec import KeyRef


def parse_client_keys(specs: Iterable[str], environ: Mapping[str, str]) -> tuple[ClientKey, ...]:
    """``NAME=KEY`` or ``NAME=env:VAR`` entries. Raises ``ValueError`` naming the entry (never its key)."""
    out: list[ClientKey] = []
    for i, spec in enumerate(specs):
        name, sep, key_spec = spec.partition("=")
        name = name.strip()
        if not sep or not name or not key_spec.strip():
            raise ValueError(f"entry {i + 1} must be NAME=KEY or NAME=env:VAR")
        try:
            value = resolve_key(key_spec, environ)
        except ValueError as e:
            raise ValueError(f"entry {i + 1} ({name}): {e}") from None
        assert value is not None
        if any(c.name == name for c in out):
            raise ValueError(f"entry {i + 1}: duplicate client name {name!r}")
        out.append(ClientKey(name, KeyRef(value, f"client {name}")))
    return tuple(out)


def identify(presented: str | None, clients: tuple[ClientKey, ...]) -> ClientKey | None:
    """The client whose key was presented, comparing against every key in constant time (no early exit)."""
    if not presented:
        return None
    given = presented.encode()
    found: ClientKey | None = None
    for client in clients:
        if hmac.compare_digest(given, client.key.value.encode()):
            found = client
    return found


def allowed(client: ClientKey, model: str | None, route: str | None) -> bool:
    """The client may use this model (its ``models`` globs) and route (its ``routes`` match patterns)."""
    if client.models and (model is None or not any(fnmatch.fnmatchcase(model, g) for g in client.models)):
        return False
    if client.routes and (route is None or route not in client.routes):
        return False
    return True
