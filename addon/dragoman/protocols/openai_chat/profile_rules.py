"""The request rules a Chat upstream's profile adds (``dragoman.protocols.profiles``): which reasoning goes
back, what stands in for reasoning state the history lacks, and the tool-schema keywords the provider refuses.

Placeholders are named in ``ctx.placeholders`` (one log line per flow says what was sent in place of what):

* ``reasoning_content``: DeepSeek V4 and Kimi answer 400 when an assistant message with tool calls comes back
  without ``reasoning_content`` in thinking mode; a history another model produced has none, so every assistant
  message gets the field, empty where there was no thinking (the API ignores it on turns without tool calls);
* ``thought_signature``: Gemini 3 answers 400 when a step's first function call has no thought signature;
  a call another model produced gets the signature Gemini documents for that case,
  ``skip_thought_signature_validator``.
"""

from __future__ import annotations

from typing import Any

from dragoman.protocols import profiles as pf
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import gemini

#: schema members whose values are maps of names to schemas (the names are not keywords)
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def echoes_reasoning(ctx: Context) -> bool:
    """Prior thinking text goes back as ``reasoning_content`` (generic: as ``dragoman_chat_reasoning`` says)."""
    p = ctx.profile
    if p is pf.GENERIC:
        return ctx.chat_reasoning_field == "reasoning_content"
    return p.echo == "reasoning_content"


def fill_history(messages: list[dict[str, Any]], ctx: Context, reasoning_field: bool) -> None:
    """Add what the provider demands on assistant messages that lack it (see the module doc)."""
    placeholder = ctx.profile.placeholder
    assistant = [m for m in messages if m["role"] == "assistant"]
    if placeholder == pf.EMPTY_REASONING and reasoning_field:
        for m in assistant:
            if "reasoning_content" not in m:
                m["reasoning_content"] = ""
                if "tool_calls" in m:
                    ctx.placeholders.add("reasoning_content")
                    ctx.dropped.invent(
                        "reasoning_content", "empty placeholder for a history without this provider's reasoning"
                    )
    elif placeholder == pf.DUMMY_SIGNATURE:
        for m in assistant:
            calls = m.get("tool_calls")
            if calls and not any("extra_content" in c for c in calls):
                calls[0]["extra_content"] = gemini.extra_content(pf.GEMINI_SKIP_SIGNATURE)
                ctx.placeholders.add("thought_signature")
                ctx.dropped.invent(
                    "tool_calls[0].extra_content.google.thought_signature",
                    "Gemini's skip-validation signature for a history from another model",
                )
    elif ctx.profile is pf.GENERIC and reasoning_field and any("reasoning_content" in m for m in assistant):
        # an unknown server that speaks reasoning_content (this conversation carries it): DeepSeek's rule, as
        # before profiles existed, for every tool-call message once the conversation has the field at all
        for m in assistant:
            if "tool_calls" in m and "reasoning_content" not in m:
                m["reasoning_content"] = ""


def schema(node: Any, ctx: Context) -> Any:
    """A copy of a tool's JSON schema without the keywords the profile's provider refuses (named as dropped)."""
    drop = ctx.profile.schema_drop
    if isinstance(node, list):
        return [schema(v, ctx) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k in drop:
            ctx.dropped.add(f"tools.parameters.{k}")
        elif k in _NAMED_SCHEMAS and isinstance(v, dict):
            out[k] = {name: schema(sub, ctx) for name, sub in v.items()}
        else:
            out[k] = schema(v, ctx)
    return out
