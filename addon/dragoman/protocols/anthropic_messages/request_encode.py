"""IR ``Request`` -> Anthropic Messages request (toward an Anthropic upstream).

* ``system``: ``req.system`` plus every system message BEFORE the first user/assistant message become
  the top-level ``system`` text blocks. A system message later in the conversation (Responses/Chat
  ``developer`` messages) is sent as a user-turn text block ``<system-reminder>...</system-reminder>``
  in place (the public API rejects ``role:"system"`` inside ``messages`` without a beta, and moving it to
  the top would change its position); ``system_message_moved`` is recorded in ``ctx.dropped``.
* Consecutive same-role messages are merged; all ``tool_result`` blocks of a user turn come first.
* A ``tool_use`` with no ``tool_result`` in the next user turn gets a synthetic error result
  ("tool call was not answered"); a ``tool_result`` with no matching ``tool_use`` in the previous
  assistant turn becomes a text block (``orphaned_tool_result`` recorded).
* Content blocks: see ``content_encode``.
* ``max_tokens`` defaults to ``DEFAULT_MAX_TOKENS`` (8192) plus the thinking budget when thinking is on,
  because Anthropic requires it and counts thinking inside it.
* ``Reasoning``: ``budget_tokens`` as given; an effort -> budget per ``EFFORT_BUDGET`` (clamped below
  ``max_tokens``, at least 1024, else dropped); ``adaptive`` -> ``{"type":"adaptive"}`` plus
  ``output_config.effort``. With thinking on, ``temperature``/``top_k`` are dropped (the API rejects them).
* Thinking in a tool loop: with thinking on, the API rejects a request whose last assistant turn (the one
  whose ``tool_use`` blocks the final user turn answers) does not start with a signed ``thinking`` /
  ``redacted_thinking`` block (a Chat client's history never carries one, an edited one was dropped). Such a
  request goes without ``thinking`` (``thinking.tool_loop_without_signature`` recorded) instead of failing
  with a 400; the next fresh user turn thinks again.
* ``response_format`` json_schema -> ``output_config.format`` ``{"type":"json_schema","schema":...}``.
* Custom (freeform) tools are offered as a function with one required string property ``input``.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.request import Message
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import Tool
from dragoman.ir.search import SEARCH_NATIVE
from dragoman.protocols._cache import mark_anthropic
from dragoman.protocols.anthropic_messages import search
from dragoman.protocols.anthropic_messages.content_encode import part_blocks
from dragoman.protocols.base import Context

DEFAULT_MAX_TOKENS = 8192
MIN_THINKING_BUDGET = 1024
EFFORT_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32000}
#: IR effort -> Anthropic ``output_config.effort``
EFFORT_TO_ANTHROPIC = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh"}
UNANSWERED_TOOL_CALL = "tool call was not answered"

#: Anthropic server tools are versioned: ``web_search_20250305``, ``bash_20250124``, ...
_SERVER_TOOL_TYPE = re.compile(r"^[a-z_]+_\d{8}$")

Block = dict[str, Any]


# ---------------------------------------------------------------- messages


class _Turn:
    __slots__ = ("role", "results", "blocks")

    def __init__(self, role: str) -> None:
        self.role = role
        self.results: list[Block] = []
        self.blocks: list[Block] = []

    def content(self) -> list[Block]:
        return self.results + self.blocks


def _system_text(m: Message) -> str:
    return "\n".join(p.text for p in m.parts if isinstance(p, TextPart))


def _system_blocks(req: Request) -> tuple[list[Block], list[Message]]:
    """(top-level ``system`` blocks, the messages after the leading system messages)."""
    system: list[Block] = [{"type": "text", "text": p.text} for p in req.system if p.text]
    msgs = req.messages
    i = 0
    while i < len(msgs) and msgs[i].role == "system":
        text = _system_text(msgs[i])
        if text:
            system.append({"type": "text", "text": text})
        i += 1
    return system, msgs[i:]


def _message_blocks(msg: Message, ctx: Context) -> tuple[str, list[Block], list[Block]]:
    """(role, tool results, other blocks) of one message."""
    if msg.role == "system":
        text = _system_text(msg)
        if not text:
            return "user", [], []
        ctx.dropped.add("system_message_moved")
        return "user", [], [{"type": "text", "text": f"<system-reminder>\n{text}\n</system-reminder>"}]
    results: list[Block] = []
    blocks: list[Block] = []
    for p in msg.parts:
        for b in part_blocks(p, ctx):
            if b["type"] != "tool_result":
                blocks.append(b)
            elif msg.role == "user":
                results.append(b)
            else:
                ctx.dropped.add("tool_result_in_assistant_turn")
    return msg.role, results, blocks


def _build_turns(messages: list[Message], ctx: Context) -> list[_Turn]:
    turns: list[_Turn] = []
    for msg in messages:
        ctx.dropped.at(msg.source)
        role, results, blocks = _message_blocks(msg, ctx)
        if not results and not blocks:
            continue
        if turns and turns[-1].role == role:
            turn = turns[-1]
        else:
            turn = _Turn(role)
            turns.append(turn)
        turn.results.extend(results)
        turn.blocks.extend(blocks)
    ctx.dropped.leave()
    return turns


def _orphan_result_text(block: Block) -> list[Block]:
    texts = [b["text"] for b in block.get("content", []) if b.get("type") == "text"]
    head = f"[result of tool call {block['tool_use_id']}{' (error)' if block.get('is_error') else ''}]"
    out = [{"type": "text", "text": "\n".join([head, *texts])}]
    out.extend(b for b in block.get("content", []) if b.get("type") != "text")
    return out


def _synthetic_result(tool_id: str) -> Block:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": UNANSWERED_TOOL_CALL, "is_error": True}


def _synthetic_results(ids: list[str], ctx: Context) -> _Turn:
    ctx.dropped.add("unanswered_tool_use")
    t = _Turn("user")
    t.results = [_synthetic_result(i) for i in ids]
    return t


def _answer_tool_uses(turn: _Turn, pending: list[str], ctx: Context) -> None:
    """Keep the user turn's results that answer ``pending``; the others become text, the missing synthetic."""
    answered: set[str] = set()
    kept: list[Block] = []
    moved: list[Block] = []
    for r in turn.results:
        if r["tool_use_id"] in pending and r["tool_use_id"] not in answered:
            answered.add(r["tool_use_id"])
            kept.append(r)
        else:
            ctx.dropped.add("orphaned_tool_result")
            moved.extend(_orphan_result_text(r))
    missing = [i for i in pending if i not in answered]
    if missing:
        ctx.dropped.add("unanswered_tool_use")
        kept.extend(_synthetic_result(i) for i in missing)
    turn.results = kept
    turn.blocks = moved + turn.blocks


def _fix_tool_pairs(turns: list[_Turn], ctx: Context) -> list[_Turn]:
    out: list[_Turn] = []
    pending: list[str] = []  # tool_use ids of the previous assistant turn
    for turn in turns:
        if turn.role == "assistant":
            if pending:  # the previous assistant turn was never answered
                out.append(_synthetic_results(pending, ctx))
            out.append(turn)
            pending = [b["id"] for b in turn.blocks if b["type"] == "tool_use"]
            continue
        _answer_tool_uses(turn, pending, ctx)
        out.append(turn)
        pending = []
    if pending and out and out[-1].role == "assistant":
        # a trailing assistant turn with tool calls is a prefill; the API rejects unanswered tool_use
        out.append(_synthetic_results(pending, ctx))
    return out


# ---------------------------------------------------------------- tools


def _is_anthropic_server_tool(raw: dict[str, Any] | None) -> bool:
    if not raw or "function" in raw or not isinstance(raw.get("name"), str):
        return False
    t = raw.get("type")
    return isinstance(t, str) and bool(_SERVER_TOOL_TYPE.match(t))


def _custom_tool(t: Tool) -> dict[str, Any]:
    desc = t.description or ""
    if t.format:
        desc = (desc + "\n\n" if desc else "") + "Input format: " + orjson.dumps(t.format).decode()
    out: dict[str, Any] = {"name": t.name}
    if t.description:
        out["description"] = t.description
    out["input_schema"] = {
        "type": "object",
        "properties": {CUSTOM_TOOL_PARAM: {"type": "string", "description": desc or "The raw tool input."}},
        "required": [CUSTOM_TOOL_PARAM],
    }
    return out


def _tool_to_wire(t: Tool, ctx: Context) -> dict[str, Any] | None:
    if t.kind == "builtin":
        if _is_anthropic_server_tool(t.raw):
            return dict(t.raw or {})
        ctx.dropped.add(f"{t.source or 'tools'}.builtin.{(t.raw or {}).get('type', t.name)}")
        return None
    if t.kind == "custom":
        return _custom_tool(t)
    out: dict[str, Any] = {"name": t.name}
    if t.description is not None:
        out["description"] = t.description
    out["input_schema"] = t.parameters if t.parameters else {"type": "object", "properties": {}}
    if t.strict:
        ctx.dropped.add(f"{t.source or 'tools'}.strict")
    return out


def _tool_choice(req: Request, thinking_on: bool, ctx: Context) -> dict[str, Any] | None:
    tc = req.tool_choice
    choice: dict[str, Any] | None = None
    if tc is not None:
        choice = {"type": tc.mode}
        if tc.mode == "tool":
            if tc.name:
                choice["name"] = tc.name
            else:
                choice = {"type": "any"}
    if req.parallel_tool_calls is False:
        if choice is None:
            choice = {"type": "auto"}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    if thinking_on and choice is not None and choice["type"] in ("any", "tool"):
        # the API rejects forced tool use with extended thinking
        ctx.dropped.add("tool_choice")
        choice = {k: v for k, v in choice.items() if k == "disable_parallel_tool_use"}
        if not choice:
            return None
        choice["type"] = "auto"
    return choice


def _put_tools(out: dict[str, Any], req: Request, thinking_on: bool, ctx: Context) -> None:
    tools = [w for w in (_tool_to_wire(t, ctx) for t in req.tools) if w is not None]
    if req.web_search is not None:
        tools.append(search.tool_from_spec(req.web_search, ctx))
        ctx.search = SEARCH_NATIVE
    if tools:
        out["tools"] = tools
        choice = _tool_choice(req, thinking_on, ctx)
        if choice is not None:
            out["tool_choice"] = choice
    elif req.tool_choice is not None and req.tool_choice.mode != "none":
        ctx.dropped.add("tool_choice")


# ---------------------------------------------------------------- limits, thinking, sampling


def _thinking_config(req: Request, max_tokens: int, ctx: Context) -> tuple[dict[str, Any] | None, str | None]:
    """(``thinking`` param, ``output_config.effort``)."""
    r = req.reasoning
    if r is None:
        return None, None
    if r.summary:
        ctx.dropped.add("reasoning.summary")
    if r.enabled is False:
        return {"type": "disabled"}, None
    effort = EFFORT_TO_ANTHROPIC.get(r.effort) if r.effort else None
    if r.effort and effort is None:
        if r.effort != "none":
            ctx.dropped.add("reasoning.effort")
        return ({"type": "disabled"}, None) if r.effort == "none" else (None, None)
    if r.adaptive:
        return {"type": "adaptive"}, effort
    budget = r.budget_tokens
    if budget is None and r.effort:
        budget = EFFORT_BUDGET.get(r.effort)
    if budget is None:
        if r.enabled:
            budget = EFFORT_BUDGET["medium"]
        else:
            return None, None
    budget = min(budget, max_tokens - 1)
    if budget < MIN_THINKING_BUDGET:
        ctx.dropped.add("reasoning")
        return None, None
    return {"type": "enabled", "budget_tokens": budget}, None


def _limits(req: Request, ctx: Context) -> tuple[int, dict[str, Any] | None, str | None]:
    """(``max_tokens``, ``thinking`` param, ``output_config.effort``)."""
    if req.max_tokens is not None:
        thinking, effort = _thinking_config(req, req.max_tokens, ctx)
        return req.max_tokens, thinking, effort
    # No limit from the client (Codex never sends one): Anthropic requires max_tokens and counts
    # thinking inside it, so the default answer budget comes on top of the thinking budget.
    thinking, effort = _thinking_config(req, 1 << 30, ctx)
    max_tokens = DEFAULT_MAX_TOKENS
    if thinking is not None and thinking.get("type") == "enabled":
        max_tokens += thinking["budget_tokens"]
    return max_tokens, thinking, effort


def _output_config(req: Request, effort: str | None, ctx: Context) -> dict[str, Any]:
    output_config: dict[str, Any] = {}
    if effort:
        output_config["effort"] = effort
    rf = req.response_format
    if rf is not None and rf.type != "text":
        if rf.type == "json_schema" and rf.schema is not None:
            output_config["format"] = {"type": "json_schema", "schema": rf.schema}
        else:
            ctx.dropped.add(f"response_format.{rf.type}")
    return output_config


def _put_sampling(out: dict[str, Any], req: Request, thinking_on: bool, ctx: Context) -> None:
    """``temperature``, ``top_p``, ``top_k``: with thinking on, only the values the API accepts."""
    if req.temperature is not None:
        if thinking_on and req.temperature != 1:
            ctx.dropped.add("temperature")
        else:
            out["temperature"] = req.temperature
    if req.top_p is not None:
        if thinking_on and req.top_p < 0.95:
            ctx.dropped.add("top_p")
        else:
            out["top_p"] = req.top_p
    if req.top_k is not None:
        if thinking_on:
            ctx.dropped.add("top_k")
        else:
            out["top_k"] = req.top_k


def _unsigned_tool_loop(messages: list[dict[str, Any]]) -> bool:
    """True when the final user turn answers ``tool_use`` blocks of an assistant turn that does not start
    with a signed thinking block: the API's "a final assistant message must start with a thinking block"."""
    if len(messages) < 2 or messages[-1]["role"] != "user" or messages[-2]["role"] != "assistant":
        return False
    answer, turn = messages[-1]["content"], messages[-2]["content"]
    if isinstance(answer, str) or not any(b.get("type") == "tool_result" for b in answer):
        return False
    if isinstance(turn, str) or not any(b.get("type") == "tool_use" for b in turn):
        return False
    return turn[0].get("type") not in ("thinking", "redacted_thinking")


# ---------------------------------------------------------------- the request


def encode_request(req: Request, ctx: Context) -> dict[str, Any]:
    """IR -> Anthropic request; keys in the order the official SDKs send them."""
    out: dict[str, Any] = {"model": req.model}
    system, messages = _system_blocks(req)
    if system:
        out["system"] = system
    turns = _fix_tool_pairs(_build_turns(messages, ctx), ctx)
    out["messages"] = [{"role": t.role, "content": t.content()} for t in turns]
    max_tokens, thinking, effort = _limits(req, ctx)
    if thinking is not None and thinking["type"] == "enabled" and _unsigned_tool_loop(out["messages"]):
        ctx.dropped.add("thinking.tool_loop_without_signature")
        thinking = None
    out["max_tokens"] = max_tokens
    if thinking is not None:
        out["thinking"] = thinking
    thinking_on = thinking is not None and thinking["type"] != "disabled"
    output_config = _output_config(req, effort, ctx)
    if output_config:
        out["output_config"] = output_config
    _put_sampling(out, req, thinking_on, ctx)
    if req.stop:
        out["stop_sequences"] = list(req.stop)
    out["stream"] = req.stream
    if req.user:
        out["metadata"] = {"user_id": req.user}
    _put_tools(out, req, thinking_on, ctx)
    if req.prompt_cache_key:
        ctx.dropped.add("prompt_cache_key")  # Anthropic routes caches by prefix; there is no key to give
    mark_anthropic(out, ctx.anthropic_cache, req.cache_retention)
    return out
