"""``Plan``: which codecs a flow needs, and how the model name maps."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from dragoman.protocols import Protocol


@dataclass(frozen=True, slots=True)
class ModelRule:
    pattern: str | None  # None: maps every model
    model: str


def parse_model_map(specs: list[str] | tuple[str, ...]) -> list[ModelRule]:
    """``PATTERN=MODEL`` (glob, first match wins) or a bare ``MODEL`` (maps everything).

    Raises ``ValueError`` with a message naming the bad entry."""
    rules: list[ModelRule] = []
    for spec in specs:
        spec = spec.strip()
        if not spec:
            raise ValueError("empty model map entry")
        if "=" in spec:
            pattern, _, model = spec.partition("=")
            pattern, model = pattern.strip(), model.strip()
            if not pattern or not model:
                raise ValueError(f"model map entry {spec!r} must be PATTERN=MODEL with both sides non-empty")
            rules.append(ModelRule(pattern, model))
        else:
            rules.append(ModelRule(None, spec))
    return rules


def map_model(rules: list[ModelRule], model: str) -> str:
    for rule in rules:
        if rule.pattern is None or fnmatch.fnmatchcase(model, rule.pattern):
            return rule.model
    return model


@dataclass(frozen=True, slots=True)
class Plan:
    client: Protocol
    upstream: Protocol

    @property
    def identity(self) -> bool:
        return self.client is self.upstream
