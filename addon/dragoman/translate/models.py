"""Model lists (``GET /v1/models``) in the Anthropic and the OpenAI shape, converted both ways.

Anthropic: ``{"data": [{"type": "model", "id", "display_name", "created_at": RFC 3339}], "has_more",
"first_id", "last_id"}``. OpenAI (Chat and Responses share it): ``{"object": "list", "data": [{"id",
"object": "model", "created": epoch seconds, "owned_by"}]}``. Gemini: ``{"models": [{"name": "models/ID",
"baseModelId", "displayName", "supportedGenerationMethods"}]}``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from collections.abc import Hashable
from collections.abc import Iterable
from collections.abc import Mapping
from datetime import UTC
from datetime import datetime
from typing import Any
from typing import NamedTuple

from dragoman.ir.limits import ModelLimits
from dragoman.protocols import Protocol
from dragoman.translate.plan import ModelRule

logger = logging.getLogger(__name__)

#: RFC 3339 for ``created_at`` when the source has no date (the epoch)
EPOCH_RFC3339 = "1970-01-01T00:00:00Z"
OWNED_BY = "dragoman"


class ModelInfo(NamedTuple):
    id: str
    display_name: str | None = None
    created: int = 0  # epoch seconds
    #: the routes file's declared limits: Anthropic ``max_input_tokens``/``max_tokens``, OpenAI-shape
    #: ``context_length``/``max_completion_tokens`` (as OpenRouter lists them)
    limits: ModelLimits | None = None


def family(protocol: Protocol) -> Protocol:
    """The list shape a protocol's clients expect: Anthropic, Gemini, or OpenAI (Chat and Responses share one)."""
    if protocol is Protocol.ANTHROPIC_MESSAGES or protocol is Protocol.GEMINI:
        return protocol
    return Protocol.OPENAI_CHAT


def _epoch(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str) and value:
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
        except ValueError:
            return 0
    return 0


def _rfc3339(epoch: int) -> str:
    if epoch <= 0:
        return EPOCH_RFC3339
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_model_list(body: Any) -> list[ModelInfo] | None:
    """The models of a list in either shape, or None when ``body`` is not a model list."""
    if not isinstance(body, Mapping):
        return None
    if isinstance(body.get("models"), list):  # Gemini
        return [
            ModelInfo(
                m["name"].removeprefix("models/"),
                m.get("displayName") if isinstance(m.get("displayName"), str) else None,
            )
            for m in body["models"]
            if isinstance(m, Mapping) and isinstance(m.get("name"), str) and m["name"]
        ]
    data = body.get("data")
    if not isinstance(data, list):
        return None
    out: list[ModelInfo] = []
    for item in data:
        if not isinstance(item, Mapping):
            continue
        mid = item.get("id")
        if not isinstance(mid, str) or not mid:
            continue
        name = item.get("display_name")
        created = item.get("created") if "created" in item else item.get("created_at")
        out.append(ModelInfo(mid, name if isinstance(name, str) else None, _epoch(created)))
    return out


#: what a Gemini client looks for in a model's methods
GEMINI_METHODS = ["generateContent", "streamGenerateContent", "countTokens"]


def model_object(info: ModelInfo, shape: Protocol) -> dict[str, Any]:
    lim = info.limits
    if shape is Protocol.GEMINI:
        gem: dict[str, Any] = {
            "name": "models/" + info.id,
            "baseModelId": info.id,
            "version": "001",
            "displayName": info.display_name or info.id,
            "supportedGenerationMethods": GEMINI_METHODS,
        }
        if lim is not None and lim.context_window:
            gem["inputTokenLimit"] = lim.context_window
        if lim is not None and lim.max_output_tokens:
            gem["outputTokenLimit"] = lim.max_output_tokens
        return gem
    if family(shape) is Protocol.ANTHROPIC_MESSAGES:
        out: dict[str, Any] = {
            "type": "model",
            "id": info.id,
            "display_name": info.display_name or info.id,
            "created_at": _rfc3339(info.created),
        }
        names = ("max_input_tokens", "max_tokens")
    else:
        out = {"id": info.id, "object": "model", "created": info.created, "owned_by": OWNED_BY}
        names = ("context_length", "max_completion_tokens")
    if lim is not None:
        for name, value in zip(names, (lim.context_window, lim.max_output_tokens), strict=True):
            if value is not None:
                out[name] = value
    return out


def model_list(models: Iterable[ModelInfo], shape: Protocol) -> dict[str, Any]:
    """A complete, single-page list in the shape of ``shape``'s clients."""
    data = [model_object(m, shape) for m in models]
    if shape is Protocol.GEMINI:
        return {"models": data}
    if family(shape) is Protocol.ANTHROPIC_MESSAGES:
        return {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    return {"object": "list", "data": data}


def model_map_models(rules: Iterable[ModelRule]) -> list[ModelInfo]:
    """The names a client may send given the model map: every literal (non-glob) pattern and every target.

    ``claude-*=deepseek-chat`` lists ``deepseek-chat``; ``claude-opus-4-8=qwen3`` lists both names."""
    seen: dict[str, None] = {}
    for rule in rules:
        if rule.pattern is not None and not any(c in rule.pattern for c in "*?["):
            seen.setdefault(rule.pattern, None)
        seen.setdefault(rule.model, None)
    return [ModelInfo(m) for m in seen]


def merge(models: list[ModelInfo], extra: Iterable[ModelInfo]) -> list[ModelInfo]:
    """``models`` followed by the ``extra`` ids they lack (the model map's aliases after the upstream's list),
    each id once (the first entry for an id wins, so an upstream's own duplicate goes too)."""
    seen: dict[str, ModelInfo] = {}
    for m in (*models, *extra):
        seen.setdefault(m.id, m)
    return list(seen.values())


class ModelListCache:
    """Upstream model lists kept ``ttl`` seconds, per key (the upstream and the credential asking, see
    ``Endpoints``); ``ttl`` 0 keeps nothing. ``clock`` is injected (monotonic seconds) so tests can move time."""

    def __init__(self, ttl: float = 300, clock: Callable[[], float] = time.monotonic, max_entries: int = 64) -> None:
        self.ttl = ttl
        self.clock = clock
        self.max_entries = max_entries
        self._entries: dict[Hashable, tuple[float, list[ModelInfo]]] = {}

    def get(self, key: Hashable) -> list[ModelInfo] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self.ttl <= 0 or self.clock() >= entry[0]:
            del self._entries[key]
            return None
        return list(entry[1])

    def put(self, key: Hashable, models: list[ModelInfo]) -> None:
        if self.ttl <= 0:
            return
        if key not in self._entries and len(self._entries) >= self.max_entries:
            del self._entries[next(iter(self._entries))]  # the oldest entry goes first
        self._entries[key] = (self.clock() + self.ttl, list(models))

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
