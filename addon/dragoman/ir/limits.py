"""Per-model limits and context overflow, in neutral form.

``ModelLimits``: what the routes file declares about a model (its context window, its maximum output
tokens). ``Overflow``: what a context-length error says (the prompt's tokens and the window, each when
known; ``output`` when the upstream counted the requested output in the sum, Anthropic's "input length and
`max_tokens` exceed context limit" form). ``dragoman.translate.overflow`` recognises upstream messages and
builds these; each client codec's error encoder writes them in its own terms.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelLimits:
    #: tokens of input + output the model takes (None: not declared)
    context_window: int | None = None
    #: the most output tokens one request may ask for (None: not declared)
    max_output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Overflow:
    #: the prompt's tokens (the upstream's count, or Dragoman's estimate)
    tokens: int | None = None
    #: the model's window (the upstream's number, or the route's declared window)
    limit: int | None = None
    #: the output tokens the request asked for, when the upstream counted them into the overflow
    output: int | None = None
