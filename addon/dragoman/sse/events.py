from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched SSE event. ``data`` is the joined ``data:`` lines (``\\n`` between them)."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None
