"""Tests of the benchmark harness itself (not of Dragoman's speed): ``pytest bench/``."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import client  # noqa: E402
import streams  # noqa: E402


def _datas(events: list[bytes]) -> list[dict]:
    return [orjson.loads(d) for d in streams.payloads(events)]


@pytest.mark.parametrize("protocol", streams.PROTOCOLS)
def test_generated_stream_is_wellformed(protocol):
    events = streams.generate(protocol, 1000)
    # Gemini sends each tool call whole in one event: the argument fragments' share (30 %) is two events
    low = 650 if protocol == streams.GEMINI else 950
    assert low <= len(events) <= 1050
    assert all(ev.endswith(b"\n\n") and ev.count(b"\n\n") == 1 for ev in events)
    n, problem = streams.check_output(protocol, b"".join(events))
    assert problem is None
    assert n == len(events)
    assert streams.generate(protocol, 1000) == events  # deterministic


def test_gemini_tool_calls_come_whole_the_first_signed():
    calls = [
        part
        for d in _datas(streams.generate(streams.GEMINI, 2000))
        for part in d["candidates"][0]["content"]["parts"]
        if "functionCall" in part
    ]
    assert [c["functionCall"]["name"] for c in calls] == [streams.TOOL_A, streams.TOOL_B]
    assert all(isinstance(c["functionCall"]["args"], dict) and c["functionCall"]["args"] for c in calls)
    assert "thoughtSignature" in calls[0] and "thoughtSignature" not in calls[1]


def _tool_args(protocol: str, events: list[bytes]) -> tuple[list, dict]:
    order, args = [], {}
    for d in _datas(events):
        if (
            protocol == streams.ANTHROPIC
            and d["type"] == "content_block_delta"
            and d["delta"]["type"] == "input_json_delta"
        ):
            key = d["index"]
            frag = d["delta"]["partial_json"]
        elif protocol == streams.CHAT and d.get("choices") and d["choices"][0]["delta"].get("tool_calls"):
            tc = d["choices"][0]["delta"]["tool_calls"][0]
            key = tc["index"]
            frag = tc["function"]["arguments"]
            if not frag:
                continue
        elif protocol == streams.RESPONSES and d["type"] == "response.function_call_arguments.delta":
            key = d["output_index"]
            frag = d["delta"]
        else:
            continue
        order.append(key)
        args[key] = args.get(key, "") + frag
    return order, args


@pytest.mark.parametrize("protocol", [p for p in streams.PROTOCOLS if p != streams.GEMINI])
def test_two_tool_calls_interleave_and_reassemble(protocol):
    """Parallel calls: interleaved argument deltas, except in Anthropic's grammar (blocks one at a time)."""
    order, args = _tool_args(protocol, streams.generate(protocol, 2000))
    assert len(args) == 2
    for text in args.values():
        assert isinstance(json.loads(text), dict)
    switches = sum(1 for a, b in zip(order, order[1:]) if a != b)
    if protocol == streams.ANTHROPIC:  # one open block at a time: one call after the other
        assert switches == 1
    else:
        assert switches > len(order) // 2  # interleaved, not one call after the other


def test_stream_has_thinking_text_usage():
    d = _datas(streams.generate(streams.ANTHROPIC, 500))
    kinds = {x["delta"]["type"] for x in d if x["type"] == "content_block_delta"}
    assert kinds == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    assert d[-2]["usage"]["cache_read_input_tokens"] > 0
    c = _datas(streams.generate(streams.CHAT, 500))
    assert any(x["choices"] and x["choices"][0]["delta"].get("reasoning_content") for x in c)
    assert c[-1]["choices"] == [] and c[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    r = _datas(streams.generate(streams.RESPONSES, 500))
    assert r[-1]["type"] == "response.completed"
    assert [x["sequence_number"] for x in r] == list(range(len(r)))
    assert [o["type"] for o in r[-1]["response"]["output"]] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]


def test_check_output_reports_errors_and_missing_terminal():
    err = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    assert streams.check_output(streams.ANTHROPIC, err)[1].startswith("error event: Overloaded")
    assert streams.check_output(streams.CHAT, b'data: {"choices":[]}\n\n')[1] == "no terminal event"
    assert streams.check_output(streams.CHAT, b'data: {"choices":[]}\r\n\r\ndata: [DONE]\r\n\r\n') == (2, None)


def test_dechunk():
    assert client.dechunk(b"3\r\nabc\r\n1;x=y\r\nd\r\n0\r\n\r\n") == b"abcd"


def test_fake_upstream_sends_one_event_per_chunk():
    p = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "fake_upstream.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        port = int(p.stdout.readline().split()[1])
        for protocol in streams.PROTOCOLS:
            body = orjson.dumps(streams.small_request(protocol, streams.bench_model(300)))
            # Gemini names the model (the event count) in the path, not the body
            path = streams.CLIENT_PATHS[protocol].replace("/models/bench:", f"/models/{streams.bench_model(300)}:")
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(client.build_request(path, body))
                raw = b""
                while chunk := s.recv(65536):
                    raw += chunk
            head, _, rest = raw.partition(b"\r\n\r\n")
            assert b"200 OK" in head and b"transfer-encoding: chunked" in head
            chunks, i = [], 0
            while True:
                j = rest.index(b"\r\n", i)
                size = int(rest[i:j], 16)
                if size == 0:
                    break
                chunks.append(rest[j + 2 : j + 2 + size])
                i = j + 2 + size + 2
            assert chunks == streams.generate(protocol, 300)
        # a stream through the blocking client: timings are ordered, body complete
        f = client.fetch(
            port, "/v1/chat/completions", orjson.dumps(streams.small_request(streams.CHAT, "bench-n50")), keep_body=True
        )
        assert f.status == 200 and f.complete and f.chunked
        assert 0 < f.t_headers <= f.t_first <= f.t_total
        assert f.body == b"".join(streams.generate(streams.CHAT, 50))
        f = client.fetch(port, "/v1/unknown", b"{}")
        assert f.status == 404
    finally:
        p.stdin.close()
        p.wait(10)
    assert p.returncode == 0  # exits by itself once its stdin closes


def _pieces(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, 300)
        out.append(data[i : i + n])
        i += n
    return out


@pytest.mark.parametrize("seed", range(4))
def test_passthrough_callable_reemits_whole_events(seed):
    pytest.importorskip("mitmproxy")
    from passthrough_addon import SSESplit

    data = b"".join(streams.generate(streams.RESPONSES, 200)).replace(b"\n\n", b"\r\n\r\n", 50)
    split = SSESplit()
    out = []
    for piece in _pieces(data, seed):
        r = split(piece)
        assert r != b""  # never b"" for a data chunk: that would end the chunked response
        if r:
            assert r.endswith((b"\n\n", b"\r\n\r\n"))
            out.append(r)
    out.append(split(b""))
    assert b"".join(out) == data


def test_table_renders_budget_verdicts():
    import run

    us = {"median": 4.0, "min": 3.5, "max": 4.5, "samples": [3.5, 4.0, 4.5]}
    floor = {"orjson": {"median": 2.0, "min": 2.0, "max": 2.0, "samples": [2.0]}, "sse_decoder": {"samples": []}}
    res = {
        "translator": {
            "floors": {streams.CHAT: floor},
            "directions": {
                "anthropic<-openai-chat": {
                    "client": streams.ANTHROPIC,
                    "upstream": streams.CHAT,
                    "us_per_event": us,
                    "problem": None,
                },
                "openai-chat<-openai-chat": {
                    "client": streams.CHAT,
                    "upstream": streams.CHAT,
                    "us_per_event": {**us, "median": 40.0},
                    "problem": None,
                },
                "responses<-openai-chat": {
                    "client": streams.RESPONSES,
                    "upstream": streams.CHAT,
                    "us_per_event": {"samples": []},
                    "problem": "boom",
                },
            },
        }
    }
    rows = run.build_rows(res)
    table = run.render(rows)
    assert "anthropic<-chat" in table and "2.0× floor" in table
    by_case = {r[1]: r for r in rows}
    assert by_case["anthropic<-chat"][-1] == "PASS"
    assert by_case["chat<-chat (identity ref)"][-1] == ""  # identity is a reference, no verdict
    assert by_case["responses<-chat"][-1].startswith("ERR")
    assert by_case["MEDIAN over 1 translated directions"][-1] == "PASS"


# -- issue 31: load.py's figures and profile_load.py's parts -----------------------------------------------------


def test_paced_figures_gaps_after_the_ramp_only():
    import load  # noqa: PLC0415

    s = load.StreamTimes(t_sent=0.0, t_first=0.1, complete=True)
    s.arrivals = [(0.1, 1), (0.15, 1), (3.0, 1), (3.05, 2), (3.2, 1)]  # two events in one read: a gap of 0
    late = load.StreamTimes(t_sent=0.0, t_first=0.3, complete=False, error="cut")
    fig = load._paced_figures([s, late], ramp_end=2.0)
    assert fig["complete"] == 1 and fig["streams"] == 2 and fig["problems"] == ["cut"]
    assert fig["gaps"] == 4  # 3.0-0.15 counts (it ends after the ramp), 3.05 twice (one real gap, one 0), 3.2
    assert abs(fig["gap_p99_ms"] - 2850.0) < 1e-6
    assert abs(fig["ttfb_p50_ms"] - 100.0) < 1e-6


def test_profile_parts_innermost_part_wins_and_waits_are_apart():
    import profile_load  # noqa: PLC0415

    dispatch = "trigger_event (mitmproxy/addonmanager.py:291)"
    hook = "Translate.request (dragoman/mitm/translate_addon.py:90)"
    codec = "decode (dragoman/protocols/anthropic/request.py:10)"
    raw = "\n".join(
        [
            f"process 1;{dispatch};{hook};{codec} 3",
            f"process 1;{dispatch};{hook} 1",
            f"process 1;{dispatch} 4",
            "process 1;run (threading.py:1010);QueuedLedger._run (dragoman/ledger/store.py:228) 8",
        ]
    )
    got = {part: (n, share) for part, n, share in profile_load.summarize(raw)}
    assert got[profile_load.IDLE_PART] == (8, 0.0)
    assert got["translator (translate/, protocols/, ir/, sse/)"] == (3, 3 / 8)
    assert got["mitmproxy hook dispatch (addonmanager, safecall)"] == (4, 0.5)


def test_cpu_seconds_counts_every_thread_to_the_microsecond():
    # two busy threads, one of which ends before the read: the ended one counts in ticks, the live one in ns
    import procs

    code = (
        "import threading, time\n"
        "def busy(s):\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < s: pass\n"
        "th = threading.Thread(target=busy, args=(0.2,)); th.start(); th.join()\n"
        "busy(0.3); print('ready', flush=True); time.sleep(30)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n"
        proc = procs.Proc("busy", p, 0)
        got = proc.cpu_seconds()
        with open(f"/proc/{p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = (int(fields[11]) + int(fields[12])) / procs.CLK_TCK
        assert got >= 0.45
        assert abs(got - ticks) <= 3 / procs.CLK_TCK
        assert got != round(got * procs.CLK_TCK) / procs.CLK_TCK  # finer than a tick
    finally:
        p.kill()
        p.wait()
