"""Per-model limits applied to one attempt's request (sans-I/O): the declared context window and maximum
output tokens of the upstream model (routes file ``models:``, ``ModelLimits`` in ``Context.model_limits``).

* A request whose estimated input (``translate.tokens``, the same estimate ``count_tokens`` answers) already
  exceeds the window raises ``ContextOverflowError``: the client gets its own API's overflow error and no
  upstream call is spent (a routed request tries its next target first).
* A request asking for more output than the model allows, or than the window leaves after the input, is
  clamped; the change is listed in ``Context.adjusted`` (logged once per flow).
"""

from __future__ import annotations

from typing import Any

from dragoman.errors import ContextOverflowError
from dragoman.ir.limits import ModelLimits
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context

#: the output-limit field of each protocol's request body (for a same-protocol request sent as it came)
MAX_FIELDS = {
    Protocol.ANTHROPIC_MESSAGES: ("max_tokens",),
    Protocol.OPENAI_CHAT: ("max_completion_tokens", "max_tokens"),
    Protocol.OPENAI_RESPONSES: ("max_output_tokens",),
}


def output_cap(limits: ModelLimits, estimate: int | None) -> int | None:
    """The most output tokens this request may ask for: the declared maximum, and what the window leaves."""
    cap = limits.max_output_tokens
    if limits.context_window is not None and estimate is not None:
        room = max(1, limits.context_window - estimate)
        cap = room if cap is None else min(cap, room)
    return cap


def check_window(ctx: Context, model: str) -> int | None:
    """Raise ``ContextOverflowError`` when the estimated input exceeds the declared window; the estimate
    (None when no window is declared)."""
    limits = ctx.model_limits
    if limits is None or limits.context_window is None:
        return None
    estimate = ctx.estimate_input_tokens()
    if estimate is not None and estimate > limits.context_window:
        raise ContextOverflowError(estimate, limits.context_window, model)
    return estimate


def clamp(asked: int | None, ctx: Context, estimate: int | None) -> int | None:
    """The max output to send: ``asked``, or the cap when it asks for more (recorded in ``ctx.adjusted``)."""
    limits = ctx.model_limits
    if limits is None or asked is None:
        return asked
    cap = output_cap(limits, estimate)
    if cap is None or asked <= cap:
        return asked
    ctx.adjusted.append(f"max_tokens {asked} -> {cap}")
    return cap


def clamp_body(obj: dict[str, Any], protocol: Protocol, ctx: Context, estimate: int | None) -> bool:
    """Clamp the output-limit field of a request sent in its own protocol; True when it changed."""
    changed = False
    for name in MAX_FIELDS.get(protocol, ()):
        value = obj.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            new = clamp(value, ctx, estimate)
            if new != value:
                obj[name] = new
                changed = True
    return changed
