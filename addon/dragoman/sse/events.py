from __future__ import annotations

from typing import NamedTuple


class SSEEvent(NamedTuple):
    """One dispatched SSE event (immutable). ``data`` is the joined ``data:`` lines (``\\n`` between them).

    A NamedTuple rather than a dataclass: it is built once per upstream event on the hot path, and tuple
    construction is several times cheaper than a frozen dataclass ``__init__``.
    """

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


#: what ``SSEDecoder(comments=True)`` returns for each comment line (``: keepalive``), in order with the events;
#: recognise it by identity (``ev is COMMENT``), never by value
COMMENT = SSEEvent("", ":comment")
