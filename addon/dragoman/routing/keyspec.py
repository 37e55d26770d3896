"""Keys as users write them: a literal, or ``env:NAME`` read from the environment at load time."""

from __future__ import annotations

from collections.abc import Mapping


def resolve_key(spec: str, environ: Mapping[str, str]) -> str | None:
    """A literal key, ``env:NAME`` (read now; missing or empty is a ``ValueError``), or "" -> None.

    Error messages name the variable, never a value."""
    spec = spec.strip()
    if not spec:
        return None
    if spec.startswith("env:"):
        name = spec[4:].strip()
        if not name:
            raise ValueError("env: needs a variable name (env:NAME)")
        value = environ.get(name, "").strip()
        if not value:
            raise ValueError(f"environment variable {name} is not set or empty")
        return value
    return spec


def describe_key(spec: str, index: int) -> str:
    """How logs name a key: ``env:NAME`` as written, a literal only by its position."""
    spec = spec.strip()
    if spec.startswith("env:"):
        return spec
    return f"key #{index + 1}"
