"""Realistic long SSE streams in each upstream protocol's real wire format, plus small client requests.

The shapes follow the real recordings in ``tests/corpus/``:

* Anthropic: ``anthropic/pydantic-ai__stream-thinking-signature.yaml`` (``event:`` lines, thinking
  deltas then ``signature_delta``, ``ping``, usage with cache fields) and
  ``anthropic-sdk-python__stream-text-then-tool.sse.txt`` (``tool_use`` + ``input_json_delta``).
* Chat: ``chat/pydantic-ai__stream-deepseek-reasoning-content.yaml`` (``reasoning_content``) and
  ``chat/pydantic-ai__stream-parallel-tools-agent-loop.yaml`` (parallel ``tool_calls``, a final
  ``choices: []`` usage chunk, ``obfuscation``, ``[DONE]``).
* Responses: ``responses/pydantic-ai__stream-reasoning-summary-deltas.yaml`` and
  ``pydantic-ai__stream-text-then-function-call.yaml`` (``sequence_number``, ``*.done`` events carrying
  the full text, a ``response.completed`` snapshot holding the whole output).

Every stream has: a thinking block (with its signature / encrypted content), a text block, two tool
calls whose argument deltas are INTERLEAVED (as Chat upstreams send parallel calls; Anthropic's come one
after the other, as its grammar has one open block at a time), and usage
(including cache tokens). ``generate(protocol, n)`` returns a list of complete SSE events (bytes), one
per list element, about ``n`` long. Deterministic (seeded).

Stdlib + orjson only: this module is imported by the fake upstream and by the in-process benchmark.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import orjson

ANTHROPIC = "anthropic"
CHAT = "openai-chat"
RESPONSES = "openai-responses"
GEMINI = "gemini"
PROTOCOLS = (ANTHROPIC, CHAT, RESPONSES, GEMINI)
SHORT = {ANTHROPIC: "anthropic", CHAT: "chat", RESPONSES: "responses", GEMINI: "gemini"}
#: client request paths (what a client of that protocol POSTs to)
CLIENT_PATHS = {
    ANTHROPIC: "/v1/messages",
    CHAT: "/v1/chat/completions",
    RESPONSES: "/v1/responses",
    GEMINI: "/v1beta/models/bench:streamGenerateContent?alt=sse",
}

TOOL_A = "exec_command"
TOOL_B = "read_file"

_WORDS = (
    "the",
    " function",
    " returns",
    " a",
    " list",
    " of",
    " events",
    ",",
    " and",
    " the",
    " caller",
    " must",
    " handle",
    " each",
    " one",
    " in",
    " order",
    ".",
    "\n\n",
    "First",
    " we",
    " check",
    " whether",
    " `",
    "config",
    ".yaml",
    "`",
    " exists",
    ";",
    " then",
    " we",
    " parse",
    " it",
    " with",
    " the",
    " loader",
    " café",
    " naïve",
    " “quoted”",
    " —",
    " 日本語",
    " 🙂",
    " x",
    "=",
    "42",
    "\n",
    "- ",
    "item",
    " résumé",
    ' {"k":',
    ' "v"}',
    " \\path\\to",
    " tab\t",
    " end",
)


def _rng_text(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(_WORDS) for _ in range(n)]


def _args_fragments(rng: random.Random, n: int, tool: str) -> list[str]:
    """``n`` fragments (~8 chars) whose concatenation is a valid JSON object of arguments."""
    target = max(n * 8, 40)
    words = []
    size = 0
    while size < target:
        w = rng.choice(_WORDS)
        words.append(w)
        size += len(w)
    body = "".join(words)
    if tool == TOOL_A:
        obj = {"cmd": body, "workdir": "/home/user/project", "timeout_ms": 120000}
    else:
        obj = {"path": "/home/user/project/src/main.py", "note": body}
    text = orjson.dumps(obj).decode()
    # split into exactly n fragments (never empty unless text is shorter than n)
    k = max(1, n)
    step = max(1, len(text) // k)
    frags = [text[i * step : (i + 1) * step] for i in range(k - 1)]
    frags.append(text[(k - 1) * step :])
    return [f for f in frags if f] or [text]


@dataclass(frozen=True)
class Plan:
    thinking: int
    text: int
    tool_a: int
    tool_b: int


def _plan(n: int, overhead: int) -> Plan:
    body = max(n - overhead, 8)
    thinking = body * 25 // 100
    tool_a = body * 15 // 100
    tool_b = body * 15 // 100
    text = body - thinking - tool_a - tool_b
    return Plan(max(thinking, 2), max(text, 2), max(tool_a, 1), max(tool_b, 1))


def _interleave(a: list, b: list) -> list:
    out = []
    for i in range(max(len(a), len(b))):
        if i < len(a):
            out.append(a[i])
        if i < len(b):
            out.append(b[i])
    return out


def _sse(event: str | None, payload) -> bytes:
    body = orjson.dumps(payload)
    if event is None:
        return b"data: " + body + b"\n\n"
    return b"event: " + event.encode() + b"\ndata: " + body + b"\n\n"


# -- Anthropic Messages ------------------------------------------------------------------------------------


def anthropic_stream(n: int, seed: int = 0, model: str = "claude-sonnet-4-5-20250929") -> list[bytes]:
    rng = random.Random(seed)
    p = _plan(n, overhead=13)
    out: list[bytes] = []
    usage0 = {
        "input_tokens": 2841,
        "cache_creation_input_tokens": 1203,
        "cache_read_input_tokens": 71342,
        "cache_creation": {"ephemeral_5m_input_tokens": 1203, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 1,
        "service_tier": "standard",
    }
    out.append(
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "model": model,
                    "id": "msg_01ALwQ87pTS7hH1PjSdC9wJD",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage0,
                },
            },
        )
    )
    out.append(
        _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        )
    )
    out.append(_sse("ping", {"type": "ping"}))
    for t in _rng_text(rng, p.thinking):
        out.append(
            _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": t}},
            )
        )
    sig = "EqQBCkYIBRgCIkB" + "".join(
        rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(400)
    )
    out.append(
        _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": sig}},
        )
    )
    out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    out.append(
        _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        )
    )
    for t in _rng_text(rng, p.text):
        out.append(
            _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": t}},
            )
        )
    out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 1}))
    # Anthropic's grammar has one open block at a time: the two calls come one after the other (the other
    # protocols' streams interleave their argument deltas)
    calls = (("toolu_01A09q90qw90lq917835lq9", TOOL_A, p.tool_a), ("toolu_01B19r91rx91mr928946mr0", TOOL_B, p.tool_b))
    for idx, (tid, name, n_frags) in enumerate(calls, start=2):
        out.append(
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": idx,
                    "content_block": {"type": "tool_use", "id": tid, "name": name, "input": {}},
                },
            )
        )
        for f in _args_fragments(rng, n_frags, name):
            delta = {"type": "input_json_delta", "partial_json": f}
            out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": idx, "delta": delta}))
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": idx}))
    out.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {
                    "input_tokens": 2841,
                    "cache_creation_input_tokens": 1203,
                    "cache_read_input_tokens": 71342,
                    "output_tokens": n,
                },
            },
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return out


# -- OpenAI Chat Completions -------------------------------------------------------------------------------


def chat_stream(n: int, seed: int = 0, model: str = "deepseek-reasoner") -> list[bytes]:
    rng = random.Random(seed)
    p = _plan(n, overhead=7)
    base = {
        "id": "chatcmpl-C2QD1kGWsTW5OWiqAtOSFEAOfPfQH",
        "object": "chat.completion.chunk",
        "created": 1754693439,
        "model": model,
        "system_fingerprint": "fp_07871e2ad8",
    }

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        obf = "".join(rng.choice("abcdefghijKLMNOP0123") for _ in range(rng.randint(2, 12)))
        return _sse(
            None,
            {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                "usage": None,
                "obfuscation": obf,
            },
        )

    out: list[bytes] = [chunk({"role": "assistant", "content": None, "reasoning_content": ""})]
    for t in _rng_text(rng, p.thinking):
        out.append(chunk({"content": None, "reasoning_content": t}))
    for t in _rng_text(rng, p.text):
        out.append(chunk({"content": t}))
    out.append(
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_q2UyBRP7eXNTzAoR8lEhjc9Z",
                        "type": "function",
                        "function": {"name": TOOL_A, "arguments": ""},
                    }
                ]
            }
        )
    )
    out.append(
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b51ijcpFkDiTQG1bQzsrmtW5",
                        "type": "function",
                        "function": {"name": TOOL_B, "arguments": ""},
                    }
                ]
            }
        )
    )
    deltas_a = [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]})
        for f in _args_fragments(rng, p.tool_a, TOOL_A)
    ]
    deltas_b = [
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": f}}]})
        for f in _args_fragments(rng, p.tool_b, TOOL_B)
    ]
    out.extend(_interleave(deltas_a, deltas_b))
    out.append(chunk({}, "tool_calls"))
    out.append(
        _sse(
            None,
            {
                **base,
                "choices": [],
                "usage": {
                    "prompt_tokens": 75386,
                    "completion_tokens": n,
                    "total_tokens": 75386 + n,
                    "prompt_tokens_details": {"cached_tokens": 71342, "audio_tokens": 0},
                    "completion_tokens_details": {
                        "reasoning_tokens": p.thinking,
                        "audio_tokens": 0,
                        "accepted_prediction_tokens": 0,
                        "rejected_prediction_tokens": 0,
                    },
                },
                "obfuscation": "F1wZCrV0lEsbu",
            },
        )
    )
    out.append(b"data: [DONE]\n\n")
    return out


# -- OpenAI Responses --------------------------------------------------------------------------------------


def _response_obj(model: str, status: str, output: list, usage) -> dict:
    return {
        "id": "resp_0fabc13af1ee0049006a691dfdab8881a1a75f2db7ff78cb83",
        "object": "response",
        "created_at": 1785273853,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": "You are a coding agent running in the Codex CLI.",
        "max_output_tokens": None,
        "max_tool_calls": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "prompt_cache_key": "019a2b3c-bench",
        "reasoning": {"effort": "medium", "summary": "auto"},
        "safety_identifier": None,
        "service_tier": "auto",
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [
            {
                "type": "function",
                "name": TOOL_A,
                "description": "Runs a shell command",
                "parameters": _TOOL_SCHEMA_A,
                "strict": False,
            },
            {
                "type": "function",
                "name": TOOL_B,
                "description": "Reads a file",
                "parameters": _TOOL_SCHEMA_B,
                "strict": False,
            },
        ],
        "top_logprobs": 0,
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def responses_stream(n: int, seed: int = 0, model: str = "gpt-5.5-2026-04-23") -> list[bytes]:
    rng = random.Random(seed)
    p = _plan(n, overhead=22)
    seq = 0
    out: list[bytes] = []

    def emit(payload: dict) -> None:
        nonlocal seq
        payload["sequence_number"] = seq
        seq += 1
        out.append(_sse(payload["type"], payload))

    rs_id = "rs_0fabc13af1ee0049006a691dfe60b081a1baa444d3cf19afba"
    msg_id = "msg_0fabc13af1ee0049006a691dfebdc881a1ae18d027c313d8ce"
    fc = [
        ("fc_0fabc13af1ee0049006a691dff0c1481a1b4a0eec7e3c753bb", "call_LabG58Uhrq9kZvR52BYKjToD", TOOL_A),
        ("fc_0fabc13af1ee0049006a691dff0c1481a1b4a0eec7e3c753cc", "call_MbcH69Visr0lAwS63CZLkUpE", TOOL_B),
    ]
    enc = "gAAAAABoxC0m_" + "".join(
        rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") for _ in range(1200)
    )
    emit({"type": "response.created", "response": _response_obj(model, "in_progress", [], None)})
    emit({"type": "response.in_progress", "response": _response_obj(model, "in_progress", [], None)})
    emit(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": rs_id, "type": "reasoning", "encrypted_content": enc, "summary": []},
        }
    )
    emit(
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": rs_id,
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        }
    )
    thinking = _rng_text(rng, p.thinking)
    for t in thinking:
        emit(
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": rs_id,
                "output_index": 0,
                "summary_index": 0,
                "delta": t,
                "obfuscation": "obWDa",
            }
        )
    th = "".join(thinking)
    emit(
        {
            "type": "response.reasoning_summary_text.done",
            "item_id": rs_id,
            "output_index": 0,
            "summary_index": 0,
            "text": th,
        }
    )
    emit(
        {
            "type": "response.reasoning_summary_part.done",
            "item_id": rs_id,
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": th},
        }
    )
    rs_item = {
        "id": rs_id,
        "type": "reasoning",
        "encrypted_content": enc,
        "summary": [{"type": "summary_text", "text": th}],
    }
    emit({"type": "response.output_item.done", "output_index": 0, "item": rs_item})
    emit(
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"id": msg_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
        }
    )
    emit(
        {
            "type": "response.content_part.added",
            "item_id": msg_id,
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "output_text", "annotations": [], "logprobs": [], "text": ""},
        }
    )
    text = _rng_text(rng, p.text)
    for t in text:
        emit(
            {
                "type": "response.output_text.delta",
                "item_id": msg_id,
                "output_index": 1,
                "content_index": 0,
                "delta": t,
                "logprobs": [],
                "obfuscation": "uGUWqgltWG6mc",
            }
        )
    tx = "".join(text)
    emit(
        {
            "type": "response.output_text.done",
            "item_id": msg_id,
            "output_index": 1,
            "content_index": 0,
            "text": tx,
            "logprobs": [],
        }
    )
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": tx}
    emit({"type": "response.content_part.done", "item_id": msg_id, "output_index": 1, "content_index": 0, "part": part})
    msg_item = {"id": msg_id, "type": "message", "status": "completed", "content": [part], "role": "assistant"}
    emit({"type": "response.output_item.done", "output_index": 1, "item": msg_item})
    for i, (item_id, call_id, name) in enumerate(fc):
        emit(
            {
                "type": "response.output_item.added",
                "output_index": 2 + i,
                "item": {
                    "id": item_id,
                    "type": "function_call",
                    "status": "in_progress",
                    "arguments": "",
                    "call_id": call_id,
                    "name": name,
                },
            }
        )
    frags = [_args_fragments(rng, p.tool_a, TOOL_A), _args_fragments(rng, p.tool_b, TOOL_B)]
    tagged = _interleave([(0, f) for f in frags[0]], [(1, f) for f in frags[1]])
    for i, f in tagged:
        emit(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": fc[i][0],
                "output_index": 2 + i,
                "delta": f,
                "obfuscation": "g1Ne32Jx8rlULp",
            }
        )
    fc_items = []
    for i, (item_id, call_id, name) in enumerate(fc):
        args = "".join(frags[i])
        emit(
            {
                "type": "response.function_call_arguments.done",
                "item_id": item_id,
                "output_index": 2 + i,
                "arguments": args,
            }
        )
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "completed",
            "arguments": args,
            "call_id": call_id,
            "name": name,
        }
        fc_items.append(item)
        emit({"type": "response.output_item.done", "output_index": 2 + i, "item": item})
    usage = {
        "input_tokens": 75386,
        "input_tokens_details": {"cached_tokens": 71342},
        "output_tokens": n,
        "output_tokens_details": {"reasoning_tokens": p.thinking},
        "total_tokens": 75386 + n,
    }
    emit(
        {
            "type": "response.completed",
            "response": _response_obj(model, "completed", [rs_item, msg_item, *fc_items], usage),
        }
    )
    return out


# -- Gemini generateContent -------------------------------------------------------------------------------


def gemini_stream(n: int, seed: int = 0, model: str = "gemini-3-pro-preview") -> list[bytes]:
    """As ``tests/corpus/gemini`` shows it: every event a whole response with the new parts (thought summaries,
    text), each function call whole in one event (the first signed), running usage, the finish on the last."""
    rng = random.Random(seed)
    p = _plan(n, overhead=3)
    rid = "M3iLaY-AI7zTxN8P3Piw4Qg"

    def ev(parts: list, finish: str | None = None) -> bytes:
        cand: dict = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            cand["finishReason"] = finish
        usage = {
            "promptTokenCount": 75386,
            "candidatesTokenCount": 1812,
            "totalTokenCount": 77710,
            "cachedContentTokenCount": 71342,
            "thoughtsTokenCount": 512,
        }
        return _sse(None, {"candidates": [cand], "usageMetadata": usage, "modelVersion": model, "responseId": rid})

    out = [ev([{"text": t, "thought": True}]) for t in _rng_text(rng, p.thinking)]
    out += [ev([{"text": t}]) for t in _rng_text(rng, p.text)]
    for i, tool in enumerate((TOOL_A, TOOL_B)):
        args = orjson.loads("".join(_args_fragments(rng, p.tool_a if i == 0 else p.tool_b, tool)))
        part: dict = {"functionCall": {"name": tool, "args": args}}
        if i == 0:
            part["thoughtSignature"] = "EpEgCo4gAb4+9vvWwdN+NkNiCCwrqvFI8uf9IiD2A47Bm4Sga0kUTm4e" * 8
        out.append(ev([part]))
    out.append(ev([{"text": ""}], "STOP"))
    return out


GENERATORS = {ANTHROPIC: anthropic_stream, CHAT: chat_stream, RESPONSES: responses_stream, GEMINI: gemini_stream}


def generate(protocol: str, n: int, seed: int = 0) -> list[bytes]:
    """About ``n`` complete SSE events (bytes) in ``protocol``'s upstream wire format."""
    return GENERATORS[protocol](n, seed)


def payloads(events: list[bytes]) -> list[bytes]:
    """The JSON ``data:`` payload of each event (``[DONE]`` skipped): the orjson floor's input."""
    out = []
    for ev in events:
        i = ev.find(b"data: ")
        data = ev[i + 6 : -2]
        if data != b"[DONE]":
            out.append(data)
    return out


def output_text_bytes(events: list[bytes]) -> int:
    """Bytes of generated text (thinking + text + tool arguments) in a stream, for the memory budget."""
    total = 0
    for data in payloads(events):
        obj = orjson.loads(data)
        t = obj.get("type")
        if t == "content_block_delta":
            d = obj["delta"]
            total += len((d.get("thinking") or d.get("text") or d.get("partial_json") or "").encode())
        elif t in (
            "response.reasoning_summary_text.delta",
            "response.output_text.delta",
            "response.function_call_arguments.delta",
        ):
            total += len(obj["delta"].encode())
        elif "candidates" in obj:
            for part in obj["candidates"][0]["content"]["parts"]:
                total += len((part.get("text") or "").encode())
                if "functionCall" in part:
                    total += len(orjson.dumps(part["functionCall"].get("args") or {}))
        elif "choices" in obj:
            for c in obj["choices"]:
                d = c.get("delta") or {}
                total += len((d.get("reasoning_content") or d.get("content") or "").encode())
                for tc in d.get("tool_calls") or []:
                    total += len(((tc.get("function") or {}).get("arguments") or "").encode())
    return total


# -- small client requests (one per client protocol) --------------------------------------------------------

_TOOL_SCHEMA_A = {
    "type": "object",
    "properties": {
        "cmd": {"type": "string", "description": "The shell command to execute."},
        "workdir": {"type": "string", "description": "The working directory."},
        "timeout_ms": {"type": "integer", "description": "Timeout in milliseconds."},
    },
    "required": ["cmd"],
    "additionalProperties": False,
}
_TOOL_SCHEMA_B = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "note": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}
_SYSTEM = "You are a coding agent. Use the tools to inspect the repository before answering."
_USER = "Run the test suite and read src/main.py, then tell me why the build fails."


def small_request(client: str, model: str) -> dict:
    """A short streaming request of a real client's shape (2 tools, thinking on) in ``client``'s protocol."""
    if client == ANTHROPIC:
        return {
            "model": model,
            "max_tokens": 32000,
            "stream": True,
            "thinking": {"type": "enabled", "budget_tokens": 16000},
            "system": [{"type": "text", "text": _SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": _USER}]}],
            "tools": [
                {"name": TOOL_A, "description": "Runs a shell command", "input_schema": _TOOL_SCHEMA_A},
                {"name": TOOL_B, "description": "Reads a file", "input_schema": _TOOL_SCHEMA_B},
            ],
        }
    if client == GEMINI:  # the model and streaming are in the URL; Code Assist's wrapped form names the model
        decls = [
            {"name": TOOL_A, "description": "Runs a shell command", "parametersJsonSchema": _TOOL_SCHEMA_A},
            {"name": TOOL_B, "description": "Reads a file", "parametersJsonSchema": _TOOL_SCHEMA_B},
        ]
        return {
            "model": model,
            "request": {
                "systemInstruction": {"parts": [{"text": _SYSTEM}]},
                "contents": [{"role": "user", "parts": [{"text": _USER}]}],
                "tools": [{"functionDeclarations": decls}],
                "generationConfig": {"maxOutputTokens": 32000, "thinkingConfig": {"includeThoughts": True}},
            },
        }
    if client == CHAT:
        return {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 32000,
            "messages": [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _USER}],
            "tools": [
                {
                    "type": "function",
                    "function": {"name": TOOL_A, "description": "Runs a shell command", "parameters": _TOOL_SCHEMA_A},
                },
                {
                    "type": "function",
                    "function": {"name": TOOL_B, "description": "Reads a file", "parameters": _TOOL_SCHEMA_B},
                },
            ],
        }
    return {
        "model": model,
        "stream": True,
        "store": False,
        "instructions": _SYSTEM,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": _USER}]}],
        "tools": [
            {
                "type": "function",
                "name": TOOL_A,
                "description": "Runs a shell command",
                "parameters": _TOOL_SCHEMA_A,
                "strict": False,
            },
            {
                "type": "function",
                "name": TOOL_B,
                "description": "Reads a file",
                "parameters": _TOOL_SCHEMA_B,
                "strict": False,
            },
        ],
        "reasoning": {"effort": "medium", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "parallel_tool_calls": True,
    }


def bench_model(n: int) -> str:
    """The model name that tells the fake upstream how many events to stream."""
    return f"bench-n{n}"


# -- checking a client-side output stream -------------------------------------------------------------------


def check_output(client: str, sse_bytes: bytes) -> tuple[int, str | None]:
    """(number of SSE events, problem or None) for a stream in ``client``'s protocol.

    A problem is an in-band error event or a missing terminal event. Minimal SSE parsing (LF or CRLF).
    """
    text = sse_bytes.replace(b"\r\n", b"\n")
    n = 0
    terminal = False
    for block in text.split(b"\n\n"):
        if not block.strip():
            continue
        datas = [ln[5:].lstrip(b" ") for ln in block.split(b"\n") if ln.startswith(b"data:")]
        if not datas:
            continue
        n += 1
        data = b"\n".join(datas)
        if data == b"[DONE]":
            terminal = terminal or client == CHAT
            continue
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return n, f"event {n} is not JSON"
        if not isinstance(obj, dict):
            continue
        t = obj.get("type")
        if t in ("error", "response.failed", "response.error") or (obj.get("error") and t is None):
            err = obj.get("error") or (obj.get("response") or {}).get("error") or obj
            msg = err.get("message") if isinstance(err, dict) else str(err)
            return n, f"error event: {str(msg)[:200]}"
        if (client == ANTHROPIC and t == "message_stop") or (
            client == RESPONSES and t in ("response.completed", "response.incomplete")
        ):
            terminal = True
        if client == GEMINI and any("finishReason" in c for c in obj.get("candidates") or ()):
            terminal = True
    if not terminal:
        return n, "no terminal event"
    return n, None
