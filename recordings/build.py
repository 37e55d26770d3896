"""Rebuild the shipped recordings: ``.venv/bin/python recordings/build.py [corpus|fake|all]``.

corpus  sessions built from the real provider traffic in tests/corpus/ (source and license in each file's
        ``source``; chunk boundaries are the SSE event boundaries and the timing is synthetic, 20 ms per
        event, because the cassettes do not keep either)
fake    sessions recorded through a real mitmdump with the Recorder in front of the local fake upstream
        (``dragoman.demo``): real chunking and timing, all three protocols
"""

from __future__ import annotations

import csv
import http.client
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "recordings"
sys.path.insert(0, str(ROOT / "tests"))

from corpus_loader import CORPUS  # noqa: E402
from corpus_loader import load_all  # noqa: E402
from dragoman.mitm import store  # noqa: E402
from dragoman.protocols import Protocol  # noqa: E402
from dragoman.record.model import Body  # noqa: E402
from dragoman.record.model import Exchange  # noqa: E402
from dragoman.record.model import HttpRequest  # noqa: E402
from dragoman.record.model import HttpResponse  # noqa: E402

#: session name -> corpus file (every interaction of the cassette, in order)
CORPUS_SESSIONS = {
    "corpus-anthropic-text": "anthropic/pydantic-ai__stream-plain-text.yaml",
    "corpus-anthropic-thinking": "anthropic/pydantic-ai__stream-thinking-signature.yaml",
    "corpus-anthropic-error-400": "anthropic/pydantic-ai__json-error-400.yaml",
    "corpus-chat-parallel-tools-loop": "chat/pydantic-ai__stream-parallel-tools-agent-loop.yaml",
    "corpus-chat-deepseek-reasoning": "chat/pydantic-ai__stream-deepseek-reasoning-content.yaml",
    "corpus-chat-midstream-error": "chat/pydantic-ai__stream-openrouter-midstream-error.yaml",
    "corpus-responses-reasoning-tool": "responses/pydantic-ai__stream-reasoning-function-call.yaml",
}
HOSTS = {"anthropic": "https://api.anthropic.com", "openai-chat": "https://api.openai.com/v1", "openai-responses": "https://api.openai.com/v1"}
EVENT_GAP_S = 0.02


def _split_events(body: bytes) -> list[bytes]:
    out, start = [], 0
    while True:
        i = body.find(b"\n\n", start)
        if i < 0:
            break
        out.append(body[start : i + 2])
        start = i + 2
    if start < len(body):
        out.append(body[start:])
    return out


def build_corpus() -> None:
    with open(CORPUS / "INDEX.tsv", newline="") as f:
        index = {row["local_file"]: row for row in csv.DictReader(f, delimiter="\t")}
    samples = load_all()
    for session, rel in CORPUS_SESSIONS.items():
        row = index[rel]
        folder = HERE / session
        shutil.rmtree(folder, ignore_errors=True)
        for n, s in enumerate([s for s in samples if s.name.split("#")[0] == rel], start=1):
            proto = Protocol(s.protocol)
            url = HOSTS[s.protocol] + proto.endpoint
            req = HttpRequest(url=url, headers=[("content-type", "application/json")], body=Body(json=s.request))
            ctype = "text/event-stream; charset=utf-8" if s.stream else "application/json"
            chunks = None
            if s.stream:
                pos, chunks = 0, []
                for i, ev in enumerate(_split_events(s.body)):
                    chunks.append((pos, round(i * EVENT_GAP_S, 6)))
                    pos += len(ev)
            resp = HttpResponse(status=s.status, headers=[("content-type", ctype)], body=Body.of(s.body), chunks=chunks)
            model = (s.request or {}).get("model")
            ex = Exchange(
                seq=n,
                client_protocol=s.protocol,
                upstream_protocol=s.protocol,
                client_model=model,
                upstream_model=model,
                stream=s.stream,
                client_request=req,
                upstream_request=req,
                upstream_response=resp,
                client_response=resp.model_copy(update={"chunks": None}),
                source={
                    "repository": row["source_repo"],
                    "path": row["source_path"],
                    "commit": row["commit"],
                    "license": row["license"],
                    "corpus_file": f"tests/corpus/{rel}#{s.name.split('#')[1] if '#' in s.name else 0}",
                },
                note="built from a real provider recording; chunk boundaries = SSE events, timing synthetic "
                f"({int(EVENT_GAP_S * 1000)} ms per event)",
            )
            store.write_atomic(folder / store.exchange_filename(n, s.protocol, "to", s.protocol, model), ex.to_json())
        print(f"{session}: {len(list(folder.glob('*.json')))} exchanges from {rel}")


# -- sessions recorded against the fake upstream


def _post(port: int, path: str, body: dict, scenario: str, headers: dict[str, str]) -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", path, json.dumps(body), {"content-type": "application/json", "x-fake-scenario": scenario, **headers})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


ANTHROPIC_TOOLS = [
    {"name": "get_weather", "description": "Weather for a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}},
    {"name": "get_time", "description": "Time in a time zone", "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}},
]


def _anthropic_session(port: int) -> None:
    h = {"x-api-key": "sk-ant-demo-not-a-real-key", "anthropic-version": "2023-06-01"}
    base = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": True}
    user = {"role": "user", "content": "What's the weather in Paris and the time in Tokyo?"}
    _post(port, "/v1/messages", {**base, "messages": [{"role": "user", "content": "Say hello."}]}, "text", h)
    _post(port, "/v1/messages", {**base, "thinking": {"type": "enabled", "budget_tokens": 512}, "messages": [{"role": "user", "content": "Think, then say hello."}]}, "thinking", h)
    status, body = _post(port, "/v1/messages", {**base, "tools": ANTHROPIC_TOOLS, "messages": [user]}, "tools", h)
    # the tool loop: send the tool results back, get the final text
    calls = []
    for block in _anthropic_blocks(body):
        if block.get("type") == "tool_use":
            calls.append(block)
    results = [{"type": "tool_result", "tool_use_id": c["id"], "content": "sunny, 21 C" if c["name"] == "get_weather" else "22:05"} for c in calls]
    history = [user, {"role": "assistant", "content": calls}, {"role": "user", "content": results}]
    _post(port, "/v1/messages", {**base, "tools": ANTHROPIC_TOOLS, "messages": history}, "text", h)
    _post(port, "/v1/messages", {**base, "messages": [{"role": "user", "content": "Are you rate limited?"}]}, "error429", h)
    _post(port, "/v1/messages", {**base, "messages": [{"role": "user", "content": "Break down mid-stream."}]}, "midstream_error", h)


def _anthropic_blocks(sse: bytes) -> list[dict]:
    blocks: dict[int, dict] = {}
    for ev in _split_events(sse):
        for line in ev.decode().splitlines():
            if not line.startswith("data: "):
                continue
            d = json.loads(line[6:])
            if d["type"] == "content_block_start":
                blocks[d["index"]] = dict(d["content_block"], _args="")
            elif d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta":
                blocks[d["index"]]["_args"] += d["delta"]["partial_json"]
    out = []
    for b in blocks.values():
        if b["type"] == "tool_use":
            b["input"] = json.loads(b["_args"] or "{}")
        b.pop("_args")
        out.append(b)
    return out


def _chat_session(port: int) -> None:
    h = {"authorization": "Bearer sk-demo-not-a-real-key"}
    base = {"model": "gpt-4o", "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 256}
    tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}} for t in ANTHROPIC_TOOLS]
    _post(port, "/v1/chat/completions", {**base, "messages": [{"role": "user", "content": "Say hello."}]}, "text", h)
    _post(port, "/v1/chat/completions", {**base, "tools": tools, "messages": [{"role": "user", "content": "What's the weather in Paris and the time in Tokyo?"}]}, "tools", h)


def _responses_session(port: int) -> None:
    h = {"authorization": "Bearer sk-demo-not-a-real-key"}
    base = {"model": "gpt-5", "stream": True, "max_output_tokens": 512}
    _post(port, "/v1/responses", {**base, "input": "Say hello."}, "text", h)
    _post(port, "/v1/responses", {**base, "reasoning": {"effort": "low", "summary": "auto"}, "input": "Think, then say hello."}, "thinking", h)


FAKE_SESSIONS = {
    # session: (upstream protocol, driver)
    "fake-anthropic-client-chat-upstream": ("openai-chat", _anthropic_session),
    "fake-chat-client-anthropic-upstream": ("anthropic", _chat_session),
    "fake-responses-client-chat-upstream": ("openai-chat", _responses_session),
}


def build_fake() -> None:
    from dragoman.demo import FakeUpstream
    from e2e.conftest import free_port
    from e2e.conftest import wait_port

    mitmdump = str(Path(sys.executable).parent / "mitmdump")
    with tempfile.TemporaryDirectory() as tmp, FakeUpstream(delay=0.03) as up:
        for session, (target, drive) in FAKE_SESSIONS.items():
            shutil.rmtree(HERE / session, ignore_errors=True)
            port = free_port()
            base = up.url + ("" if target == "anthropic" else "/v1")
            argv = [
                mitmdump, "-s", str(ROOT / "addon" / "dragoman.py"), "--mode", f"reverse:{up.url}",
                "--listen-host", "127.0.0.1", "-p", str(port), "--set", f"confdir={tmp}/conf",
                "--set", f"dragoman_target={target}", "--set", f"dragoman_upstream={base}",
                "--set", f"dragoman_record={HERE}", "--set", f"dragoman_record_session={session}",
            ]  # fmt: skip
            with open(Path(tmp) / f"{session}.log", "wb") as log:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
                try:
                    wait_port(port, proc)
                    drive(port)
                finally:
                    proc.terminate()
                    proc.wait(timeout=10)
            print(f"{session}: {len(list((HERE / session).glob('*.json')))} exchanges recorded")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what in ("corpus", "all"):
        build_corpus()
    if what in ("fake", "all"):
        build_fake()
