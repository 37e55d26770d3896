"""``python -m dragoman env CLIENT``: the environment lines for each client."""

from __future__ import annotations

import pytest

from dragoman import cli
from dragoman import env

CA = "/home/u/.mitmproxy/mitmproxy-ca-cert.pem"


@pytest.mark.parametrize(
    "client, needed",
    [
        (
            "claude-code",
            [
                "export HTTPS_PROXY=http://127.0.0.1:8080",
                f"export NODE_EXTRA_CA_CERTS={CA}",
                "unset ANTHROPIC_BASE_URL",
            ],
        ),
        (
            "codex",
            [
                "export HTTPS_PROXY=http://127.0.0.1:8080",
                f"export SSL_CERT_FILE={CA}",
                f"export CODEX_CA_CERTIFICATE={CA}",
            ],
        ),
        ("python-sdk", ["export HTTPS_PROXY=http://127.0.0.1:8080", f"export SSL_CERT_FILE={CA}"]),
        ("node", [f"export NODE_EXTRA_CA_CERTS={CA}", "export NODE_USE_ENV_PROXY=1"]),
        ("curl", ["export https_proxy=http://127.0.0.1:8080", f"export CURL_CA_BUNDLE={CA}"]),
    ],
)
def test_proxy_mode_lines(client, needed):
    lines = env.env_lines(client, CA)
    text = "\n".join(lines)
    for n in needed:
        assert n in text
    assert lines[0].startswith("# ")


def test_reverse_mode_lines():
    lines = env.env_lines("python-sdk", CA, "http://127.0.0.1:9000/", reverse=True)
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:9000" in lines
    assert "export OPENAI_BASE_URL=http://127.0.0.1:9000/v1" in lines
    assert not any("CERT" in line for line in lines if line.startswith("export"))
    codex = "\n".join(env.env_lines("codex", CA, reverse=True))
    assert "[model_providers.dragoman]" in codex and "export" not in codex


def test_dotenv_and_quoting():
    lines = env.env_lines("claude-code", "/path with space/ca.pem", fmt="dotenv")
    assert "NODE_EXTRA_CA_CERTS=/path with space/ca.pem" in lines
    assert all("=" in line and not line.startswith(("#", "export", "unset")) for line in lines)
    sh = env.env_lines("claude-code", "/path with space/ca.pem")
    assert "export NODE_EXTRA_CA_CERTS='/path with space/ca.pem'" in sh


def test_unknown_client():
    with pytest.raises(ValueError, match="claude-code"):
        env.env_lines("vim", CA)


def test_cli_env_uses_the_confdir(tmp_path, capsys):
    (tmp_path / "mitmproxy-ca-cert.pem").write_text("x")
    assert cli.main(["env", "claude-code", "--confdir", str(tmp_path), "--proxy", "http://127.0.0.1:8081"]) == 0
    out, err = capsys.readouterr()
    assert f"export NODE_EXTRA_CA_CERTS={tmp_path / 'mitmproxy-ca-cert.pem'}" in out
    assert "export HTTPS_PROXY=http://127.0.0.1:8081" in out
    assert err == ""


def test_cli_env_warns_when_the_ca_does_not_exist_yet(tmp_path, capsys):
    assert cli.main(["env", "codex", "--confdir", str(tmp_path / "none")]) == 0
    assert "does not exist yet" in capsys.readouterr().err
