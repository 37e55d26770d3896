"""Stop-reason tables for every protocol, in one place."""

from __future__ import annotations

from dragoman.ir.common import StopReason

# Anthropic stop_reason <-> IR (identity except for unknown values)
ANTHROPIC_TO_IR = {s.value: s for s in StopReason if s is not StopReason.ERROR}
IR_TO_ANTHROPIC = {
    StopReason.END_TURN: "end_turn",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.TOOL_USE: "tool_use",
    StopReason.STOP_SEQUENCE: "stop_sequence",
    StopReason.REFUSAL: "refusal",
    StopReason.PAUSE_TURN: "pause_turn",
    StopReason.ERROR: "end_turn",
}

# Chat finish_reason <-> IR
CHAT_TO_IR = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "content_filter": StopReason.REFUSAL,
}
IR_TO_CHAT = {
    StopReason.END_TURN: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.TOOL_USE: "tool_calls",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.REFUSAL: "content_filter",
    StopReason.PAUSE_TURN: "stop",
    StopReason.ERROR: "stop",
}

# Responses: status + incomplete_details.reason; tool use is inferred from function_call items
IR_TO_RESPONSES_STATUS = {
    StopReason.END_TURN: ("completed", None),
    StopReason.TOOL_USE: ("completed", None),
    StopReason.STOP_SEQUENCE: ("completed", None),
    StopReason.PAUSE_TURN: ("completed", None),
    StopReason.MAX_TOKENS: ("incomplete", "max_output_tokens"),
    StopReason.REFUSAL: ("incomplete", "content_filter"),
    StopReason.ERROR: ("failed", None),
}
RESPONSES_INCOMPLETE_TO_IR = {
    "max_output_tokens": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
}


def anthropic_stop(value: str | None) -> StopReason | None:
    if value is None:
        return None
    return ANTHROPIC_TO_IR.get(value, StopReason.END_TURN)


def refused_stop(stop: StopReason | None, refused: bool) -> StopReason | None:
    """The stop reason for a client whose protocol says "refused" only by its stop reason (Anthropic).

    A reply that carried refusal content (Chat ``refusal``, a Responses ``refusal`` part; ``refused``) and
    otherwise ended normally ended because the model refused. Chat and Responses keep the upstream's own
    reason next to their refusal content (``stop``, ``completed``), as OpenAI sends them."""
    if refused and (stop is None or stop is StopReason.END_TURN):
        return StopReason.REFUSAL
    return stop


def chat_stop(value: str | None, tool_calls: bool = False) -> StopReason | None:
    """A Chat ``finish_reason``; ``tool_calls``: the choice made tool calls. Gemini's compat layer and some local
    servers end a tool-call turn with ``stop``: the calls are the answer, a tool-use stop."""
    if value is None:
        return None
    stop = CHAT_TO_IR.get(value, StopReason.END_TURN)
    return StopReason.TOOL_USE if tool_calls and stop is StopReason.END_TURN else stop
