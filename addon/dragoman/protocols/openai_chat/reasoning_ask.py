"""How a Chat upstream is asked for reasoning: the client's thinking budget or effort, in the words of the
upstream's profile (``dragoman.protocols.profiles``). One function per way of asking; ``encode_reasoning``
picks by ``ctx.profile.ask``.
"""

from __future__ import annotations

from typing import Any

from dragoman.ir.request import Reasoning
from dragoman.ir.request import Request
from dragoman.protocols import profiles as pf
from dragoman.protocols.base import Context

#: efforts from least to most, to fit an asked effort to what a provider accepts
EFFORT_ORDER = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
#: the thinking budgets Gemini documents for its OpenAI endpoint's reasoning_effort levels
GEMINI_BUDGETS = {"minimal": 512, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 24576, "max": 32768}


def effort_from_budget(budget: int) -> str:
    if budget <= 2048:
        return "low"
    if budget <= 8192:
        return "medium"
    return "high"


def asked_effort(r: Reasoning) -> str | None:
    """The effort the client asked for (None: thinking not asked, or asked off)."""
    if r.enabled is False:
        return None
    if r.effort:
        return r.effort
    if r.budget_tokens is not None:
        return effort_from_budget(r.budget_tokens)
    if r.adaptive or r.enabled:
        return "medium"
    return None


def fit(effort: str, accepted: tuple[str, ...]) -> str:
    """``effort`` if the provider accepts it, else the nearest accepted one at or above it (else the highest);
    no list: passed as asked."""
    if not accepted or effort in accepted:
        return effort
    rank = EFFORT_ORDER.index(effort) if effort in EFFORT_ORDER else EFFORT_ORDER.index("medium")
    for e in accepted:
        if e in EFFORT_ORDER and EFFORT_ORDER.index(e) >= rank:
            return e
    return accepted[-1]


def encode_reasoning(req: Request, ctx: Context, out: dict[str, Any]) -> None:
    r = req.reasoning
    if r is None:
        return
    p = ctx.profile
    if r.summary and not p.thought_tags:  # Gemini's thought summaries are what include_thoughts asks for
        ctx.dropped.add("reasoning.summary")
    effort = asked_effort(r)
    off = r.enabled is False or effort == "none"
    _ASK[p.ask](p, r, effort, off, out)


def _effort(p: pf.Profile, r: Reasoning, effort: str | None, off: bool, out: dict[str, Any]) -> None:
    if effort is not None:
        out["reasoning_effort"] = fit(effort, p.efforts)


def _thinking_type(p: pf.Profile, r: Reasoning, effort: str | None, off: bool, out: dict[str, Any]) -> None:
    if off:
        out["thinking"] = {"type": "disabled"}
    elif effort is not None:
        out["thinking"] = {"type": "enabled"}
        if p.efforts:
            out["reasoning_effort"] = fit(effort, p.efforts)


def _enable_thinking(p: pf.Profile, r: Reasoning, effort: str | None, off: bool, out: dict[str, Any]) -> None:
    if off:
        out["enable_thinking"] = False
    elif effort is not None:
        out["enable_thinking"] = True
        if r.budget_tokens is not None:
            out["thinking_budget"] = r.budget_tokens


def _openrouter(p: pf.Profile, r: Reasoning, effort: str | None, off: bool, out: dict[str, Any]) -> None:
    if off:
        out["reasoning"] = {"enabled": False}
    elif r.budget_tokens is not None:
        out["reasoning"] = {"max_tokens": r.budget_tokens}
    elif effort is not None:
        out["reasoning"] = {"effort": fit(effort, p.efforts)}


def _gemini(p: pf.Profile, r: Reasoning, effort: str | None, off: bool, out: dict[str, Any]) -> None:
    """Thought summaries need ``thinking_config``, which cannot go with ``reasoning_effort``: the effort becomes
    the budget Gemini maps it to. The body carries ``extra_body`` literally, as Gemini's REST examples do."""
    if off or effort is None:
        return
    budget = r.budget_tokens if r.budget_tokens is not None else GEMINI_BUDGETS.get(effort, 8192)
    cfg = {"include_thoughts": True, "thinking_budget": budget}
    out["extra_body"] = {"google": {"thinking_config": cfg}}


def _template(p: pf.Profile, r: Reasoning, effort: str | None, off: bool, out: dict[str, Any]) -> None:
    if off:
        out["chat_template_kwargs"] = {"enable_thinking": False}
    elif effort is not None:
        out["chat_template_kwargs"] = {"enable_thinking": True}
        out["reasoning_effort"] = fit(effort, p.efforts)


def _none(p: pf.Profile, r: Reasoning, effort: str | None, off: bool, out: dict[str, Any]) -> None:
    return


_ASK = {
    pf.ASK_EFFORT: _effort,
    pf.ASK_THINKING_TYPE: _thinking_type,
    pf.ASK_ENABLE_THINKING: _enable_thinking,
    pf.ASK_OPENROUTER: _openrouter,
    pf.ASK_GEMINI: _gemini,
    pf.ASK_TEMPLATE: _template,
    pf.ASK_NONE: _none,
}
