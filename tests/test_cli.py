"""The command line builds the right mitmdump argv (nothing is executed)."""

from __future__ import annotations

from dragoman import cli


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
    assert cli._redact("dragoman_api_key=sk-123") == "dragoman_api_key=***"
    assert cli._redact("dragoman_api_key=env:K") == "dragoman_api_key=env:K"
