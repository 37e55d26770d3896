"""The command line builds the right mitmdump argv (nothing is executed), except one real ``replay`` start
that serves a shipped recording to raw HTTP clients."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dragoman import cli
from dragoman.cli.common import redact
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.record.model import Exchange
from dragoman.translate.plan import Plan
from dragoman.translate.request import translate_request
from dragoman.translate.tokens import estimate_input_tokens
from recordings_loader import RECORDINGS


def test_run_argv_reverse_mode_and_options():
    argv = cli.build_mitmdump_argv(
        ["--set", "flow_detail=0"],
        target="openai-chat",
        upstream="http://localhost:11434/v1",
        api_key="env:KEY",
        model_map=["claude-*=llama3"],
        port=8080,
        mitmdump="mitmdump",
    )
    assert argv[0] == "mitmdump"
    assert argv[1] == "-s" and argv[2].endswith("dragoman.py")
    s = " ".join(argv)
    assert "--mode reverse:http://localhost:11434" in s
    assert "--listen-host 127.0.0.1 -p 8080" in s
    assert "dragoman_target=openai-chat" in s
    assert "dragoman_upstream=http://localhost:11434/v1" in s
    assert "dragoman_api_key=env:KEY" in s
    assert "dragoman_model_map=claude-*=llama3" in s
    assert argv[-2:] == ["--set", "flow_detail=0"]


def test_explicit_mode_wins():
    argv = cli.build_mitmdump_argv(["--mode", "regular"], upstream="https://api.openai.com/v1", mitmdump="m")
    assert not any(a.startswith("reverse:") for a in argv)


def test_redact():
    assert redact("dragoman_api_key=sk-123") == "dragoman_api_key=***"
    assert redact("dragoman_api_key=env:K") == "dragoman_api_key=env:K"


# -- replay / record


def test_replay_argv_reverse_mode_to_a_dead_local_port():
    argv = cli.build_replay_argv(
        "recordings/corpus-anthropic-text",
        speed="0",
        port=9090,
        unmatched="next",
        extra=["--set", "flow_detail=0"],
        mitmdump="m",
        dead=4321,
    )
    s = " ".join(argv)
    assert argv[:3] == ["m", "-s", str(cli.entry_script())]
    assert "--mode reverse:http://127.0.0.1:4321" in s
    assert "--listen-host 127.0.0.1 -p 9090" in s
    replay = Path(s.split("dragoman_replay=")[1].split()[0])
    assert replay.is_absolute() and replay == (Path.cwd() / "recordings/corpus-anthropic-text").resolve()
    assert "dragoman_replay_speed=0" in s and "dragoman_replay_unmatched=next" in s
    assert "dragoman_upstream" not in s and "dragoman_target" not in s
    assert argv[-2:] == ["--set", "flow_detail=0"]


def test_dead_port_refuses_connections():
    port = cli.dead_port()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def test_replay_forward_needs_an_upstream_and_uses_it():
    with pytest.raises(SystemExit, match="--unmatched forward needs --upstream"):
        cli.build_replay_argv("x", unmatched="forward", mitmdump="m", dead=1)
    s = " ".join(cli.build_replay_argv("x", unmatched="forward", upstream="https://api.openai.com/v1", mitmdump="m"))
    assert "--mode reverse:https://api.openai.com" in s and "127.0.0.1:1 " not in s
    user_mode = cli.build_replay_argv("x", extra=["--mode", "regular"], mitmdump="m", dead=1)
    assert not any(a.startswith("reverse:") for a in user_mode)


def test_replay_speed_is_checked():
    for bad in ("-1", "fast", "inf", "nan"):
        with pytest.raises(SystemExit):
            cli.main(["replay", "recordings", "--speed", bad])


def test_replay_progress_names_the_recording_the_count_and_the_url():
    lines = cli.describe_replay(RECORDINGS / "fake-anthropic-client-chat-upstream", "0", 8181, "error")
    text = "\n".join(lines)
    assert "6 recorded exchanges loaded" in lines[0]
    assert "001-anthropic-to-openai-chat-claude-sonnet-4-5.json: anthropic -> openai-chat" in text
    assert "429" in text and "stream of" in text
    assert "as fast as possible" in text and "404" in text
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:8181 " in text and "OPENAI_BASE_URL=http://127.0.0.1:8181/v1 " in text
    assert "recorded timing" in "\n".join(cli.describe_replay(RECORDINGS, "1", 1, "next"))
    assert "2x the recorded speed" in "\n".join(cli.describe_replay(RECORDINGS, "2.0", 1, "next"))


def test_replay_of_nothing_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no recorded exchange"):
        cli.describe_replay(tmp_path, "1", 1, "error")
    with pytest.raises(SystemExit, match="cannot load"):
        cli.describe_replay(tmp_path / "missing", "1", 1, "error")


def test_replay_main_prints_progress_and_execs_mitmdump(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(os, "execv", lambda path, argv: seen.append(argv))
    assert (
        cli.main(["replay", str(RECORDINGS / "corpus-anthropic-text"), "--port", "8282", "--", "--set", "confdir=/c"])
        == 0
    )
    out = capsys.readouterr()
    assert "1 recorded exchanges loaded" in out.out and "http://127.0.0.1:8282" in out.out
    (argv,) = seen
    assert argv[-2:] == ["--set", "confdir=/c"] and "dragoman_replay_speed=1" in argv
    assert "exec:" in out.err


def test_record_argv_runs_like_run_and_records():
    argv, ns = cli.build_record_argv(
        "rec",
        "my-bug",
        [
            "--target",
            "openai-chat",
            "--upstream",
            "http://localhost:11434/v1",
            "--port",
            "8080",
            "--set",
            "flow_detail=0",
        ],
        mitmdump="m",
    )
    s = " ".join(argv)
    assert ns.target == "openai-chat"
    assert "--mode reverse:http://localhost:11434" in s and "dragoman_target=openai-chat" in s
    assert "--listen-host 127.0.0.1 -p 8080" in s
    assert f"dragoman_record={(Path.cwd() / 'rec').resolve()}" in s and "dragoman_record_session=my-bug" in s
    assert argv[-2:] == ["--set", "flow_detail=0"]
    for bad in ("a/b", "..", " "):
        with pytest.raises(SystemExit, match="folder name"):
            cli.build_record_argv("rec", bad, [], mitmdump="m")


def test_record_main_splits_at_double_dash_and_hides_the_key(monkeypatch, capsys, tmp_path):
    seen = []
    monkeypatch.setattr(os, "execv", lambda path, argv: seen.append(argv))
    args = [
        "record",
        str(tmp_path),
        "--session",
        "s1",
        "--",
        "--upstream",
        "https://api.openai.com/v1",
        "--api-key",
        "sk-SECRET-123456",
        "-w",
        "flows",
    ]
    (tmp_path / "s1").mkdir()
    assert cli.main(args) == 0
    out = capsys.readouterr()
    (argv,) = seen
    assert "dragoman_record_session=s1" in argv and "dragoman_api_key=sk-SECRET-123456" in argv
    assert argv[-2:] == ["-w", "flows"]
    assert "sk-SECRET" not in out.out + out.err
    assert str(tmp_path / "s1-2") in out.out  # the folder the recorder will create (s1 exists)
    assert f"python -m dragoman replay {tmp_path / 's1-2'}" in out.out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(port: int, path: str, body: bytes) -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request("POST", path, body, {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


@pytest.mark.e2e
def test_replay_command_serves_a_shipped_recording_byte_for_byte(tmp_path):
    """``python -m dragoman replay`` really starts: the recorded Responses client and an Anthropic client asking
    the same conversation get exactly the golden bytes; an unmatched request gets a 404 in its protocol."""
    if not (Path(sys.executable).parent / "mitmdump").exists():
        pytest.skip(f"no mitmdump next to {sys.executable}")
    session = RECORDINGS / "fake-responses-client-chat-upstream"
    recorded = next(iter(sorted(session.glob("001-*.json"))))
    ex = Exchange.from_json(recorded.read_bytes())
    golden = Path(__file__).resolve().parents[1] / "golden" / session.name
    port = _free_port()
    log = tmp_path / "replay.log"
    cmd = [sys.executable, "-m", "dragoman", "replay", str(session), "--port", str(port), "--speed", "0"]
    cmd += ["--", "--set", f"confdir={tmp_path / 'conf'}"]
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        raw = ex.client_request.body.raw()
        status, body = _post(port, "/v1/responses", raw)
        assert status == 200
        assert body == (golden / f"{recorded.stem}.openai-responses.sse").read_bytes()
        anthropic = translate_request(raw, Plan(Protocol.OPENAI_RESPONSES, Protocol.ANTHROPIC_MESSAGES), Context())
        status, body = _post(port, "/v1/messages", anthropic.body)
        assert status == 200
        # the golden file replays the recorded (Responses) client's context; a live Anthropic client's
        # message_start also carries its own request's input-token estimate (issue 11 item 6)
        estimate = estimate_input_tokens(json.loads(anthropic.body))
        want = (golden / f"{recorded.stem}.anthropic.sse").read_bytes()
        assert want.count(b'"usage":{"input_tokens":0,') == 1
        assert body == want.replace(b'"usage":{"input_tokens":0,', b'"usage":{"input_tokens":%d,' % estimate)
        status, body = _post(port, "/v1/chat/completions", b'{"model":"m","messages":[{"role":"user","content":"?"}]}')
        assert status == 404 and b"no recorded exchange" in body and b'"error"' in body
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "2 recorded exchanges loaded" in text and f"http://127.0.0.1:{port}" in text


def test_run_with_a_routes_file(tmp_path):
    from dragoman import cli as cli_mod

    cfg = tmp_path / "routes.yaml"
    cfg.write_text(
        "upstreams:\n  - {name: ds, protocol: openai-chat, base_url: 'https://api.deepseek.com/v1'}\n"
        "routes:\n  - {match: '*', to: [ds/deepseek-chat]}\n"
    )
    argv = cli_mod.build_mitmdump_argv([], port=8080, mitmdump="mitmdump", config=str(cfg))
    assert f"dragoman_config={cfg.resolve()}" in argv
    assert argv[argv.index("--mode") + 1] == "reverse:https://api.deepseek.com"
    assert argv[argv.index("--listen-host") + 1] == "127.0.0.1" and argv[argv.index("-p") + 1] == "8080"
    # a --listen-host or --mode of the user's wins
    argv = cli_mod.build_mitmdump_argv(["--mode", "regular", "--listen-host", "0.0.0.0"], mitmdump="m", config=str(cfg))
    assert argv.count("--mode") == 1 and argv.count("--listen-host") == 1


def test_run_with_a_broken_or_missing_routes_file(tmp_path, capsys):
    import pytest

    from dragoman import cli as cli_mod

    with pytest.raises(SystemExit) as e:
        cli_mod.main(["run", "--config", str(tmp_path / "nope.yaml")])
    assert "cannot read the routes file" in str(e.value)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "upstreams:\n  - {name: a, protocol: gemini, base_url: 'http://x'}\nroutes: [{match: '*', to: [a]}]\n"
    )
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["run", "--config", str(bad)])
    assert "line 2: upstreams[0] (a): unknown protocol 'gemini'" in str(e.value)
    with pytest.raises(SystemExit) as e:
        cli_mod.main(["run", "--config", str(bad), "--target", "anthropic"])
    assert "--config names every upstream" in str(e.value)


def test_run_profile_flag_sets_the_option(monkeypatch, capsys):
    import pytest

    from dragoman import cli as cli_mod

    seen: list[list[str]] = []
    monkeypatch.setattr(os, "execv", lambda path, argv: seen.append(argv))
    cli_mod.main(["run", "--target", "openai-chat", "--upstream", "http://127.0.0.1:8000/v1", "--profile", "deepseek"])
    [argv] = seen
    i = argv.index("dragoman_profile=deepseek")
    assert argv[i - 1] == "--set"
    with pytest.raises(SystemExit):
        cli_mod.main(["run", "--profile", "deepsek"])
    assert "invalid choice" in capsys.readouterr().err
