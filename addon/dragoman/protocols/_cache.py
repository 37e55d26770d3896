"""Prompt caching across protocols: what each encoder adds so a client's session is cached upstream.

* OpenAI caches prefixes automatically and routes them by ``prompt_cache_key``: a Chat upstream whose provider
  profile takes the key (``Profile.cache_key``) and a Responses upstream get the client's own key (Codex sends
  one) or one derived from its session identity (Anthropic ``metadata.user_id``: ``session_cache_key``), and
  the client's ``prompt_cache_retention`` ("in_memory", "24h").
* Anthropic caches only what a request marks. A request from a client of another protocol (which has no such
  marker) is marked per the upstream's ``cache`` setting (``Context.anthropic_cache``): "auto" puts the
  request-level ``cache_control`` (Anthropic's automatic caching: the breakpoint moves to the last cacheable
  block as the conversation grows); "breakpoints" marks explicit ones (for Anthropic-compatible servers
  without the top-level form): the system prompt (or the last tool when there is none: the prefix order is
  tools, system, messages), the last block of the user turn before the last assistant turn (what the
  previous request cached) and the last block of the final turn; "off" marks nothing. Never more than
  Anthropic's four breakpoints, counting any already present. A TTL the client asked for maps: "24h"/"1h" ->
  ``"ttl": "1h"``, else the default five minutes. An Anthropic client's own ``cache_control`` never passes
  here (same protocol: its bytes go as sent).

Source: Anthropic's prompt caching guide (breakpoints, automatic caching, 20-block lookback, ``ttl`` 5m/1h,
thinking blocks cannot be marked) and OpenAI's prompt caching guide (``prompt_cache_key``,
``prompt_cache_retention``), read 2026-11.
"""

from __future__ import annotations

import hashlib
from typing import Any

OPENAI_RETENTIONS = ("in_memory", "24h")
MAX_BREAKPOINTS = 4
CACHE_MODES = ("auto", "breakpoints", "off")
#: block types Anthropic does not let a request mark
_UNMARKABLE = ("thinking", "redacted_thinking")


def session_cache_key(user: str | None) -> str | None:
    """A stable ``prompt_cache_key`` for a session identity (a digest: the identity itself never travels
    in another field, and the key stays short)."""
    if not user:
        return None
    return "dragoman-" + hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def anthropic_ttl(retention: str | None) -> str | None:
    """The Anthropic ``ttl`` for a client's retention ("24h" -> "1h"; default five minutes -> None)."""
    return "1h" if retention in ("24h", "1h") else None


def _marker(ttl: str | None) -> dict[str, Any]:
    return {"type": "ephemeral", "ttl": ttl} if ttl else {"type": "ephemeral"}


def _markable(blocks: Any) -> dict[str, Any] | None:
    """The last block of a content list that may carry ``cache_control``."""
    if not isinstance(blocks, list):
        return None
    for b in reversed(blocks):
        if (
            isinstance(b, dict)
            and b.get("type") not in _UNMARKABLE
            and not (b.get("type") == "text" and not b.get("text"))
        ):
            return b
    return None


def count_breakpoints(out: dict[str, Any]) -> int:
    n = sum(1 for t in out.get("tools") or () if isinstance(t, dict) and "cache_control" in t)
    n += sum(1 for b in out.get("system") or () if isinstance(b, dict) and "cache_control" in b)
    for m in out.get("messages") or ():
        content = m.get("content")
        if isinstance(content, list):
            n += sum(1 for b in content if isinstance(b, dict) and "cache_control" in b)
    return n


def _targets(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Where explicit breakpoints go, most valuable first: the final turn, the prefix (system or tools), the
    user turn the previous request ended with."""
    messages = out.get("messages") or []
    found: list[dict[str, Any] | None] = [_markable(messages[-1]["content"]) if messages else None]
    system = out.get("system")
    found.append(_markable(system) if system else _markable(out.get("tools")))
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    if last_assistant > 0 and messages[last_assistant - 1].get("role") == "user":
        found.append(_markable(messages[last_assistant - 1]["content"]))
    seen: list[dict[str, Any]] = []
    for b in found:
        if b is not None and all(b is not s for s in seen):
            seen.append(b)
    return seen


def mark_anthropic(out: dict[str, Any], mode: str, retention: str | None) -> int:
    """Ask Anthropic to cache ``out`` (an Anthropic request body built from another protocol's request) per
    ``mode``; returns the number of breakpoints it added."""
    if mode == "off":
        return 0
    free = MAX_BREAKPOINTS - count_breakpoints(out)
    if free <= 0:
        return 0
    marker = _marker(anthropic_ttl(retention))
    if mode == "auto":
        out["cache_control"] = marker
        return 1
    added = 0
    for block in _targets(out)[:free]:
        if "cache_control" not in block:
            block["cache_control"] = dict(marker)
            added += 1
    return added
