"""A fake OpenAI-compatible Chat upstream with a small context window that answers overflows the vLLM/DeepSeek
way (issue 36): HTTP 400 ``This model's maximum context length is W tokens. However, you requested T tokens (T in
the messages, 0 in the completion)`` (``code`` 400 / ``context_length_exceeded`` for the OpenAI form), and
otherwise plays a small agent: the first turn calls a shell tool whose output is larger than the window, a
request that asks for a summary (a compaction) gets one, any other request ends the task with ``FINAL_MARK``.

Tokens: 1 per 4 characters of the compact JSON of ``messages`` and ``tools`` (an upstream-side count; Dragoman's
estimate differs, as a real server's would). Every request is kept (``requests``) with the status answered.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any

FINAL_MARK = "OVERFLOW-SURVIVED-7Q2"
SUMMARY_MARK = "SUMMARY-OF-EARLIER-WORK"
BIG_FILES = ("big1.txt", "big2.txt")
COMMANDS = ("echo first-step", *(f"cat {name}" for name in BIG_FILES))


def tokens(body: dict[str, Any]) -> int:
    return len(json.dumps([body.get("messages"), body.get("tools")], separators=(",", ":"))) // 4


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class OverflowUpstream:
    def __init__(self, window: int, style: str = "vllm", tool: str = "Bash") -> None:
        self.window = window
        self.style = style  # "vllm" (the family DeepSeek shares) or "openai" (code context_length_exceeded)
        self.tool = tool
        self.requests: list[tuple[int, int, dict[str, Any]]] = []  # (status, tokens, body)
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self._send(200, "text/plain", b"")

            def do_GET(self) -> None:
                self._send(200, "application/json", b'{"object":"list","data":[]}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                status, ctype, data = fake.answer(body)
                self._send(status, ctype, data)

            def _send(self, status: int, ctype: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OverflowUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the agent

    def overflow_body(self, n: int) -> bytes:
        if self.style == "openai":
            err = {
                "message": f"This model's maximum context length is {self.window} tokens. However, your messages "
                f"resulted in {n} tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
            return json.dumps({"error": err}).encode()
        return json.dumps(
            {
                "object": "error",
                "message": f"This model's maximum context length is {self.window} tokens. However, you requested "
                f"{n} tokens ({n} in the messages, 0 in the completion). Please reduce the length of the messages "
                "or completion.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ).encode()

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message for a request that fits."""
        messages = body.get("messages") or []
        last_msg = messages[-1] if messages else {}
        last = _text(last_msg.get("content")) if last_msg.get("role") == "user" else ""
        everything = "\n".join(_text(m.get("content")) for m in messages)
        low = last.lower()
        if "summar" in low and any(w in low for w in ("text only", "checkpoint", "compact", "handoff")):  # compaction
            summary = f"<summary>{SUMMARY_MARK}: the user asked to read the files; they were read.</summary>"
            return {"role": "assistant", "content": summary}
        offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        results = sum(1 for m in messages if m.get("role") == "tool")
        if SUMMARY_MARK not in everything and self.tool in offered and results < len(COMMANDS):
            # three tool rounds (a small one, then two reading files of ~6,000 tokens each): the second file
            # overflows the window; a client compacts whole rounds and keeps the latest one
            command = COMMANDS[results]
            args = {"command": command} if self.tool == "Bash" else {"cmd": command}
            call = {
                "id": f"call_{results + 1}",
                "type": "function",
                "function": {"name": self.tool, "arguments": json.dumps(args)},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": "assistant", "content": f"Done. {FINAL_MARK}"}

    def answer(self, body: dict[str, Any]) -> tuple[int, str, bytes]:
        n = tokens(body)
        if n > self.window:
            with self.lock:
                self.requests.append((400, n, body))
            return 400, "application/json", self.overflow_body(n)
        msg = self.reply(body)
        with self.lock:
            self.requests.append((200, n, body))
        finish = "tool_calls" if msg.get("tool_calls") else "stop"
        cid = f"chatcmpl-{len(self.requests)}"  # one id per answer, as real servers give
        usage = {"prompt_tokens": n, "completion_tokens": 10, "total_tokens": n + 10}
        if not body.get("stream"):
            obj = {
                "id": cid,
                "object": "chat.completion",
                "created": 1,
                "model": body.get("model"),
                "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                "usage": usage,
            }
            return 200, "application/json", json.dumps(obj).encode()
        base = {"id": cid, "object": "chat.completion.chunk", "created": 1, "model": body.get("model")}
        delta: dict[str, Any] = {"role": "assistant"}
        if msg.get("content"):
            delta["content"] = msg["content"]
        if msg.get("tool_calls"):
            delta["tool_calls"] = [{"index": 0, **msg["tool_calls"][0]}]
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**base, "choices": [], "usage": usage},
        ]
        data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        return 200, "text/event-stream", data
