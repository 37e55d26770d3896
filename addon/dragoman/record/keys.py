"""Request keys for replay matching (the ``ServerPlayback._hash`` pattern).

``request_key``: sha256 of the client protocol plus the canonical JSON of the client body (sorted keys,
compact) without the volatile fields named in ``ignore`` (dotted paths, e.g. ``metadata.user_id``). Two
requests with the same key are the same request.

``conversation_key``: a protocol-neutral key of what was asked: the request decoded into the IR and
reduced to system text, message roles with their text, tool calls and tool results, the tool names, the
stream flag and whether reasoning was asked for. It lets a request of one protocol find an exchange
recorded with another (a Chat client replaying an Anthropic client's session).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from typing import Any

from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols import Protocol
from dragoman.protocols.registry import get_codec

logger = logging.getLogger(__name__)

#: volatile per-session/per-user fields (Claude Code's metadata.user_id holds the session; Codex's
#: prompt_cache_key is its conversation id)
DEFAULT_IGNORE = (
    "metadata.user_id",
    "metadata.session_id",
    "prompt_cache_key",
    "user",
    "safety_identifier",
    "session_id",
    "conversation_id",
)


def _without(obj: Any, path: list[str]) -> Any:
    """``obj`` with the field at ``path`` removed (copies only along the path)."""
    if not isinstance(obj, dict) or not path or path[0] not in obj:
        return obj
    head, rest = path[0], path[1:]
    out = dict(obj)
    if not rest:
        del out[head]
    else:
        out[head] = _without(out[head], rest)
    return out


def canonical(obj: Any, ignore: Iterable[str] = DEFAULT_IGNORE) -> bytes:
    for name in ignore:
        if name:
            obj = _without(obj, name.split("."))
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def request_key(protocol: str | None, body: Any, ignore: Iterable[str] = DEFAULT_IGNORE) -> str:
    """Exact key of a client request (``body`` parsed JSON; anything else is keyed as is)."""
    h = hashlib.sha256()
    h.update((protocol or "").encode())
    h.update(b"\0")
    h.update(canonical(body, ignore))
    return h.hexdigest()


def _conversation(req: Request) -> dict[str, Any]:
    messages = []
    for m in req.messages:
        parts: list[Any] = []
        for p in m.parts:
            if isinstance(p, TextPart):
                if parts and isinstance(parts[-1], str):
                    parts[-1] += p.text
                else:
                    parts.append(p.text)
            elif isinstance(p, ToolCallPart):
                try:
                    args = json.loads(p.arguments) if p.arguments.strip() else {}
                except ValueError:
                    args = p.arguments
                parts.append({"call": p.name, "args": args})
            elif isinstance(p, ToolResultPart):
                parts.append({"result": "".join(c.text for c in p.content if isinstance(c, TextPart))})
        messages.append([m.role, parts])
    reasoning = req.reasoning
    thinking = bool(
        reasoning and (reasoning.enabled or reasoning.effort not in (None, "none") or reasoning.budget_tokens)
    )
    return {
        "system": "".join(p.text for p in req.system),
        "messages": messages,
        "tools": sorted(t.name for t in req.tools),
        "stream": bool(req.stream),
        "thinking": thinking,
    }


def conversation_key(protocol: str | None, body: Any) -> str | None:
    """Protocol-neutral key, or None when the body does not decode as a request of ``protocol``."""
    if not protocol or not isinstance(body, dict):
        return None
    try:
        req = get_codec(Protocol(protocol)).decode_request(body)
    except Exception:  # noqa: BLE001 - any undecodable body simply has no conversation key
        return None
    data = json.dumps(_conversation(req), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()
