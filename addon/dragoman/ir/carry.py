"""Carrying opaque reasoning state across protocols with prefix-tagged values.

An Anthropic thinking block shown to a Responses client becomes a reasoning item whose
``encrypted_content`` is ``ANTHROPIC_TAG + base64url(json)``, holding the signature and the thinking
text (Anthropic needs both back). A Responses reasoning item shown to an Anthropic client becomes a
thinking block whose ``signature`` is ``RESPONSES_TAG + base64url(json)``, holding the item id and its
``encrypted_content``. On the next request the decoders unwrap them, so the upstream receives the
original values. OpenRouter's Chat ``reasoning_details`` entries become a thinking ``signature``
``OPENROUTER_TAG + base64url(json)`` (see ``dragoman.protocols.openai_chat.reasoning_details``), restored
on the assistant message when the next request goes to a Chat upstream; Gemini's thought signatures on Chat
tool calls become a thinking ``signature`` ``GEMINI_TAG + base64url(json {call id: signature})`` (see
``dragoman.protocols.openai_chat.gemini``), restored on those tool calls for a Chat upstream or a Chat client. Native values never start with our tags, so they are never confused, and a carried
value is only ever unwrapped for the protocol it came from: encoders drop (and log) a carried value
whose origin is not their own upstream.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

ANTHROPIC_TAG = "dragoman.v1.anthropic:"
RESPONSES_TAG = "dragoman.v1.responses:"
OPENROUTER_TAG = "dragoman.v1.openrouter:"
GEMINI_TAG = "dragoman.v1.gemini:"


def _pack(tag: str, payload: dict[str, Any]) -> str:
    return tag + base64.urlsafe_b64encode(orjson.dumps(payload)).decode().rstrip("=")


def _unpack(tag: str, value: str) -> dict[str, Any] | None:
    if not value.startswith(tag):
        return None
    raw = value[len(tag) :]
    try:
        obj = orjson.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def wrap_anthropic(signature: str | None, text: str, redacted_data: str | None = None) -> str:
    """Anthropic thinking -> a string a Responses client keeps as ``encrypted_content``."""
    payload: dict[str, Any] = {"text": text}
    if signature is not None:
        payload["sig"] = signature
    if redacted_data is not None:
        payload["redacted"] = redacted_data
    return _pack(ANTHROPIC_TAG, payload)


def unwrap_anthropic(value: str | None) -> dict[str, Any] | None:
    """Inverse of ``wrap_anthropic``: ``{"sig", "text", "redacted"?}`` or None if not ours."""
    if not value:
        return None
    return _unpack(ANTHROPIC_TAG, value)


def wrap_responses(item_id: str | None, encrypted_content: str | None) -> str:
    """Responses reasoning item -> a string an Anthropic client keeps as a thinking ``signature``."""
    return _pack(RESPONSES_TAG, {"id": item_id, "enc": encrypted_content})


def unwrap_responses(value: str | None) -> dict[str, Any] | None:
    """Inverse of ``wrap_responses``: ``{"id", "enc"}`` or None if not ours."""
    if not value:
        return None
    return _unpack(RESPONSES_TAG, value)


def wrap_openrouter(payload: dict[str, Any]) -> str:
    """OpenRouter ``reasoning_details`` (in the shape ``reasoning_details`` packs) -> a thinking ``signature``."""
    return _pack(OPENROUTER_TAG, payload)


def unwrap_openrouter(value: str | None) -> dict[str, Any] | None:
    """Inverse of ``wrap_openrouter``, or None if not ours."""
    if not value:
        return None
    return _unpack(OPENROUTER_TAG, value)


def is_openrouter(value: str | None) -> bool:
    return value is not None and value.startswith(OPENROUTER_TAG)


def wrap_gemini(signatures: dict[str, str]) -> str:
    """Gemini thought signatures by tool call id -> a thinking ``signature``."""
    return _pack(GEMINI_TAG, signatures)


def unwrap_gemini(value: str | None) -> dict[str, str] | None:
    """Inverse of ``wrap_gemini`` (the entries that are strings), or None if not ours."""
    if not value:
        return None
    obj = _unpack(GEMINI_TAG, value)
    if obj is None:
        return None
    return {k: v for k, v in obj.items() if isinstance(v, str) and v}


def is_gemini(value: str | None) -> bool:
    return value is not None and value.startswith(GEMINI_TAG)


def is_carried(value: str | None) -> bool:
    if not value:
        return False
    return (
        value.startswith(ANTHROPIC_TAG)
        or value.startswith(RESPONSES_TAG)
        or value.startswith(OPENROUTER_TAG)
        or value.startswith(GEMINI_TAG)
        or value == UNSIGNED
    )


#: The signature an Anthropic client gets for a thinking block whose source had no signature
#: (Chat ``reasoning_content``): Anthropic clients expect a ``signature_delta`` before the block
#: closes. Decoders read it back as "no signature"; it is never sent to an Anthropic upstream.
UNSIGNED = "dragoman.v1.unsigned"


def is_unsigned(value: str | None) -> bool:
    return value == UNSIGNED
