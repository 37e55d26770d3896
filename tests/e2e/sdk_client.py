"""Drive one official SDK call and print a JSON result (run in a subprocess by the e2e tests).

Usage: ``python sdk_client.py '<json scenario>'`` (or the JSON on stdin), or ``python sdk_client.py --serve``:
one JSON scenario per stdin line, one JSON result per stdout line. The scenario:
  sdk       anthropic | openai-chat | openai-responses | langchain-responses (needs ``langchain-openai``)
  base_url  the proxy's base URL in that SDK's convention
  mode      create | stream
  scenario  the fake upstream scenario (sent as header x-fake-scenario)
  test_id   sent as header x-test-id so the test can find the upstream request
  api_key   the client's key (default "test-client-key")

  n         (Chat only, optional) the number of choices to ask for

The result: {"ok": true, text, thinking, signature, tool_calls: [{id, name, arguments}], stop, model,
refusal, first_delta_s, total_s} or {"ok": false, error_type, status, message, first_delta_s, total_s}.
``text``/``refusal``/``stop`` are choice 0's; a Chat result also has ``choices`` (every choice's text).
Runs on any interpreter that has the ``anthropic`` and ``openai`` SDKs (kept out of the proxy's venv on 3.11).
"""

from __future__ import annotations

import json
import sys
import time

TOOLS = [
    (
        "get_weather",
        "Weather for a city",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    ),
    (
        "get_time",
        "Time in a time zone",
        {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
    ),
]
PROMPT = "Say hello."
#: the freeform tool of the "custom" scenario; clients without custom tools offer it as a function
PATCH_TOOL_DESC = "Apply a patch to files"
PATCH_FUNCTION_SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}


class Timer:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.first: float | None = None

    def delta(self) -> None:
        if self.first is None:
            self.first = time.monotonic() - self.t0

    def result(self) -> dict:
        return {"first_delta_s": self.first, "total_s": time.monotonic() - self.t0}


def run_anthropic(sc: dict, timer: Timer) -> dict:
    import anthropic

    client = anthropic.Anthropic(
        base_url=sc["base_url"],
        api_key=sc.get("api_key", "test-client-key"),
        max_retries=0,
        timeout=30,
        default_headers=sc["headers"],
    )
    kwargs: dict = {
        "model": sc.get("model", "claude-test"),
        "max_tokens": 256,
        "messages": [{"role": "user", "content": PROMPT}],
    }
    if sc["scenario"] == "tools":
        kwargs["tools"] = [{"name": n, "description": d, "input_schema": s} for n, d, s in TOOLS]
    if sc["scenario"] == "custom":
        kwargs["tools"] = [
            {"name": "apply_patch", "description": PATCH_TOOL_DESC, "input_schema": PATCH_FUNCTION_SCHEMA}
        ]
    if sc["scenario"] == "thinking":
        kwargs["thinking"] = {"type": "enabled", "budget_tokens": 1024}
        kwargs["max_tokens"] = 2048
    if sc["mode"] == "create":
        msg = client.messages.create(**kwargs)
    else:
        with client.messages.stream(**kwargs) as stream:
            for ev in stream:
                if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                    timer.delta()
            msg = stream.get_final_message()
    out: dict = {
        "ok": True,
        "text": "",
        "thinking": "",
        "signature": None,
        "tool_calls": [],
        "stop": msg.stop_reason,
        "model": msg.model,
    }
    for block in msg.content:
        if block.type == "text":
            out["text"] += block.text
        elif block.type == "thinking":
            out["thinking"] += block.thinking
            out["signature"] = block.signature
        elif block.type == "tool_use":
            out["tool_calls"].append({"id": block.id, "name": block.name, "arguments": block.input})
    out["usage"] = {"input": msg.usage.input_tokens, "output": msg.usage.output_tokens}
    return out


def run_chat(sc: dict, timer: Timer) -> dict:
    import openai

    client = openai.OpenAI(
        base_url=sc["base_url"],
        api_key=sc.get("api_key", "test-client-key"),
        max_retries=0,
        timeout=30,
        default_headers=sc["headers"],
    )
    kwargs: dict = {
        "model": sc.get("model", "gpt-test"),
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 256,
    }
    if sc["scenario"] == "tools":
        kwargs["tools"] = [
            {"type": "function", "function": {"name": n, "description": d, "parameters": s}} for n, d, s in TOOLS
        ]
    if sc["scenario"] == "custom":
        kwargs["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": "apply_patch",
                    "description": PATCH_TOOL_DESC,
                    "parameters": PATCH_FUNCTION_SCHEMA,
                },
            }
        ]
    if sc["scenario"] == "thinking":
        kwargs["reasoning_effort"] = "low"
    if sc.get("n"):
        kwargs["n"] = sc["n"]
    out: dict = {
        "ok": True,
        "text": "",
        "thinking": "",
        "signature": None,
        "tool_calls": [],
        "stop": None,
        "model": None,
    }
    if sc["mode"] == "create":
        resp = client.chat.completions.create(**kwargs)
        msg = resp.choices[0].message
        out["text"] = msg.content or ""
        out["refusal"] = msg.refusal
        out["choices"] = [c.message.content or "" for c in resp.choices]
        out["thinking"] = (msg.model_extra or {}).get("reasoning_content") or ""
        for tc in msg.tool_calls or []:
            out["tool_calls"].append(
                {"id": tc.id, "name": tc.function.name, "arguments": json.loads(tc.function.arguments)}
            )
        out["stop"] = resp.choices[0].finish_reason
        out["model"] = resp.model
        return out
    calls: dict[int, dict] = {}
    texts: dict[int, str] = {}
    stream = client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs)
    for chunk in stream:
        out["model"] = chunk.model
        for choice in chunk.choices:
            d = choice.delta
            if d.content:
                timer.delta()
                texts[choice.index] = texts.get(choice.index, "") + d.content
            if choice.index != 0:  # another choice (n > 1): only its text is kept
                continue
            if d.refusal:
                out["refusal"] = (out.get("refusal") or "") + d.refusal
            rc = (d.model_extra or {}).get("reasoning_content")
            if rc:
                out["thinking"] += rc
            for tc in d.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function and tc.function.name:
                    slot["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    slot["arguments"] += tc.function.arguments
            if choice.finish_reason:
                out["stop"] = choice.finish_reason
    for i in sorted(calls):
        c = calls[i]
        out["tool_calls"].append({"id": c["id"], "name": c["name"], "arguments": json.loads(c["arguments"] or "{}")})
    out["text"] = texts.get(0, "")
    out["choices"] = [texts[i] for i in sorted(texts)]
    return out


def run_responses(sc: dict, timer: Timer) -> dict:
    import openai

    client = openai.OpenAI(
        base_url=sc["base_url"],
        api_key=sc.get("api_key", "test-client-key"),
        max_retries=0,
        timeout=30,
        default_headers=sc["headers"],
    )
    kwargs: dict = {"model": sc.get("model", "gpt-test"), "input": PROMPT, "max_output_tokens": 256}
    if sc["scenario"] == "tools":
        kwargs["tools"] = [
            {"type": "function", "name": n, "description": d, "parameters": s, "strict": False} for n, d, s in TOOLS
        ]
    if sc["scenario"] == "custom":
        kwargs["tools"] = [{"type": "custom", "name": "apply_patch", "description": PATCH_TOOL_DESC}]
    if sc["scenario"] == "thinking":
        kwargs["reasoning"] = {"effort": "low", "summary": "auto"}
    if sc["mode"] == "create":
        resp = client.responses.create(**kwargs)
    else:
        incomplete = None
        with client.responses.stream(**kwargs) as stream:
            for ev in stream:
                if ev.type == "response.output_text.delta":
                    timer.delta()
                elif ev.type == "response.incomplete":
                    # the SDK's accumulator only finishes on response.completed (as with OpenAI itself):
                    # a length stop is read from the terminal event, as real clients (Codex) do
                    incomplete = ev.response
                elif ev.type == "error":
                    return {"ok": False, "error_type": "error-event", "status": None, "message": ev.message}
                elif ev.type == "response.failed":
                    err = ev.response.error
                    return {
                        "ok": False,
                        "error_type": "response.failed",
                        "status": None,
                        "message": err.message if err else "",
                    }
            resp = incomplete if incomplete is not None else stream.get_final_response()
    out: dict = {
        "ok": True,
        "text": "",
        "thinking": "",
        "signature": None,
        "tool_calls": [],
        "stop": resp.status,
        "model": resp.model,
        "custom_calls": [],
    }
    for item in resp.output:
        if item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    out["text"] += part.text
                elif part.type == "refusal":
                    out["refusal"] = (out.get("refusal") or "") + part.refusal
        elif item.type == "reasoning":
            out["thinking"] += "".join(s.text for s in item.summary or [])
            out["signature"] = item.encrypted_content
        elif item.type == "function_call":
            out["tool_calls"].append(
                {"id": item.call_id, "name": item.name, "arguments": json.loads(item.arguments or "{}")}
            )
        elif item.type == "custom_tool_call":
            out["custom_calls"].append({"id": item.call_id, "name": item.name, "input": item.input})
    if resp.incomplete_details is not None:
        out["incomplete_reason"] = resp.incomplete_details.reason
    return out


def run_langchain_responses(sc: dict, timer: Timer) -> dict:
    """LangChain's ``ChatOpenAI(use_responses_api=True)`` streaming with two tools bound; the chunks are merged
    with ``+`` as LangChain's agents do (issue 14: overlapping output items broke this merge)."""
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        model=sc.get("model", "gpt-test"),
        base_url=sc["base_url"],
        api_key=sc.get("api_key", "test-client-key"),
        use_responses_api=True,
        streaming=True,
        max_retries=0,
        timeout=30,
        default_headers=sc["headers"],
    )
    tools = [{"type": "function", "function": {"name": n, "description": d, "parameters": s}} for n, d, s in TOOLS]
    merged = None
    for chunk in llm.bind_tools(tools).stream(PROMPT):
        timer.delta()
        merged = chunk if merged is None else merged + chunk
    if merged is None:
        return {"ok": False, "error_type": "no-chunks", "status": None, "message": "the stream gave no chunk"}
    text = merged.text
    return {
        "ok": True,
        "text": text() if callable(text) else text,
        "tool_calls": [{"id": tc["id"], "name": tc["name"], "arguments": tc["args"]} for tc in merged.tool_calls],
        "invalid_tool_calls": [dict(tc) for tc in merged.invalid_tool_calls],
        "stop": merged.response_metadata.get("status"),
        "model": merged.response_metadata.get("model_name"),
    }


RUNNERS = {
    "anthropic": run_anthropic,
    "openai-chat": run_chat,
    "openai-responses": run_responses,
    "langchain-responses": run_langchain_responses,
}


def run(sc: dict) -> dict:
    sc["headers"] = {"x-fake-scenario": sc["scenario"], "x-test-id": sc.get("test_id", "none"), **sc.get("headers", {})}
    timer = Timer()
    try:
        out = RUNNERS[sc["sdk"]](sc, timer)
    except Exception as e:  # noqa: BLE001 - every failure becomes a JSON result
        out = {
            "ok": False,
            "error_type": type(e).__name__,
            "status": getattr(e, "status_code", None),
            "message": getattr(e, "message", None) or str(e),
            "body": getattr(e, "body", None) if isinstance(getattr(e, "body", None), (dict, list, str)) else None,
        }
    out.update(timer.result())
    return out


def main() -> None:
    if sys.argv[1:] == ["--serve"]:
        # one JSON scenario per stdin line, one JSON result per stdout line (the SDK imports are slow: pay once)
        import anthropic  # noqa: F401
        import openai  # noqa: F401

        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(run(json.loads(line)), default=str), flush=True)
        return
    raw = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    print(json.dumps(run(json.loads(raw)), default=str))


if __name__ == "__main__":
    main()
