"""Keeping only the most recent images of a conversation (``dragoman_keep_images``), on the client's JSON.

Long computer-use and browser loops resend every screenshot they ever took; small-context models run out of
room. With a limit N, the images of user turns and tool results are counted from the newest back, and every
one before the N newest becomes the text ``PLACEHOLDER``, in the client's own protocol, before the request is
decoded: so a same-protocol upstream gets the trimmed body too. What was replaced is reported like any other
dropped content (one name in ``Request.dropped``).

Where the images are, per client protocol:
  Anthropic Messages  ``messages[role=user].content[type=image]`` and ``tool_result.content[type=image]``
  OpenAI Chat         ``messages[role=user|tool].content[type=image_url]``
  OpenAI Responses    ``input[message, role=user].content[type=input_image]`` and
                      ``input[function_call_output|custom_tool_call_output].output[type=input_image]``
"""

from __future__ import annotations

from typing import Any

from dragoman.protocols import Protocol

PLACEHOLDER = "[image removed to save context]"

#: a found image: the list holding it and its index there
_Slot = tuple[list[Any], int]


def keep_recent_images(obj: dict[str, Any], client: Protocol, keep: int) -> int:
    """Replace every image of ``obj`` (a client request in ``client``'s protocol) but the ``keep`` most recent
    with the placeholder text, in place. Returns how many were replaced (0 when ``keep`` is 0: off)."""
    if keep <= 0:
        return 0
    slots = list(_images(obj, client))
    older = slots[: max(0, len(slots) - keep)]
    text_type = "input_text" if client is Protocol.OPENAI_RESPONSES else "text"
    for parts, i in older:
        part: dict[str, Any] = {"type": text_type, "text": PLACEHOLDER}
        cache = parts[i].get("cache_control")
        if cache is not None:  # an Anthropic cache breakpoint stays where the client put it
            part["cache_control"] = cache
        parts[i] = part
    return len(older)


def dropped_name(replaced: int, keep: int) -> str:
    """The name the dropped-content report gives the replaced images."""
    return f"images older than the {keep} most recent ({replaced} replaced by text, dragoman_keep_images)"


def _images(obj: dict[str, Any], client: Protocol) -> list[_Slot]:
    if client is Protocol.ANTHROPIC_MESSAGES:
        return _anthropic(obj.get("messages"))
    if client is Protocol.OPENAI_CHAT:
        return _chat(obj.get("messages"))
    if client is Protocol.OPENAI_RESPONSES:
        return _responses(obj.get("input"))
    return []


def _of_type(parts: Any, kind: str) -> list[_Slot]:
    if not isinstance(parts, list):
        return []
    return [(parts, i) for i, p in enumerate(parts) if isinstance(p, dict) and p.get("type") == kind]


def _anthropic(messages: Any) -> list[_Slot]:
    found: list[_Slot] = []
    for msg in messages if isinstance(messages, list) else []:
        if not isinstance(msg, dict) or msg.get("role") != "user" or not isinstance(msg.get("content"), list):
            continue
        for i, block in enumerate(msg["content"]):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "image":
                found.append((msg["content"], i))
            elif block.get("type") == "tool_result":
                found += _of_type(block.get("content"), "image")
    return found


def _chat(messages: Any) -> list[_Slot]:
    found: list[_Slot] = []
    for msg in messages if isinstance(messages, list) else []:
        if isinstance(msg, dict) and msg.get("role") in ("user", "tool"):
            found += _of_type(msg.get("content"), "image_url")
    return found


def _responses(items: Any) -> list[_Slot]:
    found: list[_Slot] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            found += _of_type(item.get("content"), "input_image")
        elif kind in ("function_call_output", "custom_tool_call_output"):
            found += _of_type(item.get("output"), "input_image")
    return found
