"""Context overflow: recognise every provider's "the prompt is longer than the model's window" error.

``recognise(info)`` returns the error marked as an overflow (``ErrorInfo.overflow``, code
``context_length_exceeded``, HTTP 400) with the numbers its message gives, or ``None`` for any other error.
Each client codec then answers in its own terms: an Anthropic client gets ``invalid_request_error`` "prompt is
too long: M tokens > N maximum" (the form Claude Code parses to compact), a Chat or Responses client code
``context_length_exceeded`` (what Codex recovers from). Forms recognised (provider documentation and issue
trackers, read 2026-11):

* OpenAI: code ``context_length_exceeded``; "This model's maximum context length is N tokens. However, your
  messages resulted in M tokens" (Chat), "Your input exceeds the context window of this model" (Responses);
* OpenAI-compatible servers (vLLM, DeepSeek, OpenRouter, Groq, Together): "maximum context length is N tokens.
  However, you requested M tokens (X in the messages, Y in the completion)", vLLM's "your request has M input
  tokens", "'max_tokens' ... is too large: Y. This model's maximum context length is N tokens and your request
  has X input tokens", "The decoder prompt (length M) is longer than the maximum model length of N";
  Mistral's "Prompt contains M tokens ... too large for model with N maximum context length";
* llama.cpp ``exceed_context_size_error`` "the request exceeds the available context size"; Ollama "prompt too
  long; exceeded max context length by K tokens", "input length exceeds the context length";
* Gemini: "The input token count (M) exceeds the maximum number of tokens allowed (N)";
* Anthropic: "prompt is too long: M tokens > N maximum", "input length and `max_tokens` exceed context limit:
  X + Y > N"; Bedrock "Input is too long for requested model".

Pure: no I/O (the caller logs the upstream's original message).
"""

from __future__ import annotations

import dataclasses
import re

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.limits import Overflow

CODE = "context_length_exceeded"
#: upstream codes/types that name an overflow whatever the message says
_CODES = frozenset({CODE, "exceed_context_size_error", "context_window_exceeded", "model_context_window_exceeded"})
#: statuses an overflow comes with (a 429 "tokens per minute" is a rate limit, never an overflow)
_STATUSES = frozenset({400, 413, 422})

_N = r"(\d[\d,]*)"
_I = re.IGNORECASE | re.DOTALL
#: (pattern, group of the prompt's tokens, group of the window, group of the requested output), 0: none
_NUMBERED: tuple[tuple[re.Pattern[str], int, int, int], ...] = (
    (re.compile(r"prompt is too long:?\s*" + _N + r"\s*tokens?\s*>\s*" + _N, _I), 1, 2, 0),
    (re.compile(r"exceed context limit:\s*" + _N + r"\s*\+\s*" + _N + r"\s*>\s*" + _N, _I), 1, 3, 2),
    (re.compile(r"is too large:\s*" + _N + r".*?context length is " + _N + r" tokens.*?has " + _N, _I), 3, 2, 1),
    (
        re.compile(
            r"context length is "
            + _N
            + r" tokens.*?(?:requested|resulted in|has)\s+(?:about\s+)?"
            + _N
            + r"(?:\s+input)?\s+tokens(?:\s*\("
            + _N
            + r" in the messages,\s*"
            + _N
            + r" in the completion)?",
            _I,
        ),
        -2,
        1,
        -4,
    ),
    (re.compile(r"prompt \(length " + _N + r"\) is longer than the maximum model length of " + _N, _I), 1, 2, 0),
    (re.compile(r"contains " + _N + r" tokens.*?too large for model with " + _N, _I), 1, 2, 0),
    (
        re.compile(r"input token count \(" + _N + r"\) exceeds the maximum number of tokens allowed \(" + _N, _I),
        1,
        2,
        0,
    ),
)
#: messages that name an overflow without numbers we can use
_WORDED = re.compile(
    r"context[ _-]?(?:length|window|size|limit)|maximum model length|prompt (?:is )?too long|input is too long"
    r"|too many (?:input )?tokens|input token count|reduce the length of the (?:messages|input)",
    re.IGNORECASE,
)


def _int(s: str | None) -> int | None:
    return int(s.replace(",", "")) if s else None


def parse(message: str) -> Overflow | None:
    """The overflow a message describes (numbers where it gives them), or None when it describes none."""
    for pattern, gt, gl, go in _NUMBERED:
        m = pattern.search(message)
        if m is None:
            continue
        if gt < 0:  # the "N in the messages, Y in the completion" split when present, else the total
            split = m.group(3)
            tokens = _int(split) if split is not None else _int(m.group(2))
            output = _int(m.group(4)) if split is not None else None
            return Overflow(tokens, _int(m.group(gl)), output or None)
        return Overflow(_int(m.group(gt)), _int(m.group(gl)), _int(m.group(go)) if go else None)
    return Overflow() if _WORDED.search(message) else None


def recognise(info: ErrorInfo, estimate: int | None = None, window: int | None = None) -> ErrorInfo | None:
    """``info`` as an overflow (a copy), or None when it is some other error. ``estimate`` (the request's
    estimated input tokens) and ``window`` (the route's declared window) fill numbers the message lacks."""
    if info.overflow is None:
        if info.status is not None and info.status not in _STATUSES:
            return None
        if info.kind not in (ErrorKind.INVALID_REQUEST, ErrorKind.REQUEST_TOO_LARGE, ErrorKind.API_ERROR):
            return None
        found = parse(info.message)
        if found is None and (info.code or "") in _CODES:
            found = Overflow()
        if found is None:
            return None
    else:
        found = info.overflow
    tokens, limit = found.tokens, found.limit if found.limit is not None else window
    if tokens is None and estimate is not None:
        # an estimate at or under the window the upstream says was exceeded undercounted: at least one more
        tokens = max(estimate, limit + 1) if limit is not None and found.output is None else estimate
    return dataclasses.replace(
        info,
        kind=ErrorKind.INVALID_REQUEST,
        status=400,
        code=CODE,
        overflow=Overflow(tokens, limit, found.output),
    )
