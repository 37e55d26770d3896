"""Thought signatures: Gemini's opaque ``thoughtSignature`` on a part, carried statelessly through other clients.

From a Gemini upstream, a part's signature becomes a thinking part (or the open thinking block's signature)
right before that part, valued ``carry.wrap_gemini({key: signature})``: ``key`` is the function call's id, or
``PART_KEY`` for a text part. That is the value the Chat layer already uses for Gemini's OpenAI-compatible
endpoint (``openai_chat.gemini``), so a conversation keeps its signatures whichever of the two it runs on. An
Anthropic client keeps it as a thinking ``signature``, a Responses client as ``encrypted_content``, and hands
it back; toward Gemini (``Signer``) each signature goes back on its call, a ``PART_KEY`` one on the next part.

Toward a Gemini client, other reasoning state rides on the next part's ``thoughtSignature`` (Gemini's own
place for it, which Gemini clients keep in their history): an Anthropic thinking block as ``carry.wrap_anthropic``
(signature and text, since a Gemini client need not send thought text back), a Responses reasoning item as
``carry.wrap_responses``; ``client_thinking`` reads them back from the client's parts. A ``thoughtSignature``
is bytes in Gemini's schema (base64 on the wire; the google-genai SDK refuses anything else), so such a carried
value is sent base64-encoded (``to_client``) and recognised on its way back by the tag it decodes to.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from dragoman.ir import carry
from dragoman.ir.common import Dropped
from dragoman.ir.request import ThinkingPart

#: the key of a signature that sat on a text part (not a function call)
PART_KEY = "@part"


_CARRIED_PREFIX = b"dragoman.v1."
#: what Gemini's docs tell clients to send on a call they have no signature for (Gemini CLI does): no signature
SKIP_VALIDATOR = "skip_thought_signature_validator"


def to_client(value: str) -> str:
    """A carried value as the base64 a ``thoughtSignature`` must be."""
    return base64.b64encode(value.encode()).decode()


def from_client(signature: str) -> str:
    """A client's ``thoughtSignature``: the carried value it encodes, or the native signature as it is."""
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return signature
    return raw.decode("utf-8", "replace") if raw.startswith(_CARRIED_PREFIX) else signature


def wrap(key: str, signature: str) -> str:
    return carry.wrap_gemini({key: signature})


def client_thinking(value: str, call_id: str | None) -> ThinkingPart | None:
    """A Gemini client's ``thoughtSignature`` on a part (a function call's when ``call_id``) -> the thinking part
    that goes before it: a carried value as it was, a native one wrapped by key; None for ``UNSIGNED``."""
    value = from_client(value)
    if not value or carry.is_unsigned(value) or value == SKIP_VALIDATOR:
        return None
    anthropic = carry.unwrap_anthropic(value)
    if anthropic is not None:
        sig, redacted = anthropic.get("sig"), anthropic.get("redacted")
        text = anthropic.get("text")
        return ThinkingPart(
            text=text if isinstance(text, str) else "",
            signature=sig if isinstance(sig, str) else None,
            redacted_data=redacted if isinstance(redacted, str) else None,
        )
    responses = carry.unwrap_responses(value)
    if responses is not None:
        return ThinkingPart(encrypted_content=responses.get("enc"), item_id=responses.get("id"))
    if carry.is_carried(value):  # OpenRouter details, or Gemini signatures already wrapped
        return ThinkingPart(signature=value)
    return ThinkingPart(signature=wrap(call_id or PART_KEY, value))


def client_value(p: ThinkingPart) -> str | None:
    """The ``thoughtSignature`` a Gemini client keeps for a non-Gemini thinking part (None: nothing to keep)."""
    sig = p.signature if p.signature and not carry.is_unsigned(p.signature) else None
    if p.encrypted_content and not carry.is_carried(p.encrypted_content):
        return carry.wrap_responses(p.item_id, p.encrypted_content)
    if sig is not None and carry.is_carried(sig):
        return sig  # OpenRouter's details pass as they came
    if sig is not None or p.redacted_data:
        return carry.wrap_anthropic(sig, p.text, p.redacted_data)
    return None


class Signer:
    """Puts signatures on the parts of one model turn, in order: ``add`` a thinking part's state, then ``sign``
    each part as it is written; ``rest`` gives the signatures no part took (sent on empty text parts).

    ``native``: toward a Gemini upstream only Gemini's own signatures can go; others are named in ``dropped``.
    """

    __slots__ = ("by_id", "pending", "native", "dropped")

    def __init__(self, native: bool, dropped: Dropped) -> None:
        self.by_id: dict[str, str] = {}
        self.pending: list[str] = []
        self.native = native
        self.dropped = dropped

    def add(self, p: ThinkingPart) -> None:
        sigs = carry.unwrap_gemini(p.signature)
        if sigs is not None:
            for key, sig in sigs.items():
                (self.pending.append(sig) if key == PART_KEY else self.by_id.__setitem__(key, sig))
            return
        if self.native:
            if (p.signature and not carry.is_unsigned(p.signature)) or p.encrypted_content or p.redacted_data:
                self.dropped.add("thinking.signature")
            return
        value = client_value(p)
        if value is not None:
            self.pending.append(to_client(value))

    def sign(self, part: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
        sig = self.by_id.pop(call_id, None) if call_id is not None else None
        if sig is None and self.pending:
            sig = self.pending.pop(0)
        if sig is not None:
            part["thoughtSignature"] = sig
        return part

    def rest(self) -> list[dict[str, Any]]:
        """Empty text parts for the signatures no part took (Gemini sends ``{"text": "", "thoughtSignature"}``)."""
        out = [{"text": "", "thoughtSignature": s} for s in self.pending]
        self.pending.clear()
        if self.by_id:  # a signed call that is no longer in the history
            self.dropped.add("thoughtSignature")
            self.by_id.clear()
        return out
