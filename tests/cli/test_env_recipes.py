"""``python -m dragoman env CLIENT``: the environment lines for each client; ``env --transparent`` and
``env --wireguard``: the interception recipes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dragoman import cli
from dragoman.cli import env_recipes as env

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


# -- env --transparent / --wireguard (run for real by tests/interception) ---------------------------------------

README = Path(__file__).resolve().parents[2] / "docs" / "interception.md"


def test_transparent_rules_owner_match_and_undo():
    rules = env.transparent_rules()
    assert rules.add == (
        "iptables -t nat -A OUTPUT -p tcp --dport 443 -m owner ! --uid-owner mitmproxyuser -j REDIRECT --to-port 8080",
        "ip6tables -t nat -A OUTPUT -p tcp --dport 443 -m owner ! --uid-owner mitmproxyuser -j REDIRECT --to-port 8080",
    )
    assert rules.undo == tuple(line.replace(" -A ", " -D ") for line in rules.add)
    nft = env.transparent_rules(9000, "proxy", "nftables", gateway="eth1")
    assert "nft add rule inet dragoman output tcp dport 443 meta skuid != proxy redirect to :9000" in nft.add
    assert "nft add rule inet dragoman prerouting iifname eth1 tcp dport 443 redirect to :9000" in nft.add
    assert "sysctl -w net.ipv4.ip_forward=1" in nft.add
    assert nft.undo == ("nft delete table inet dragoman",)
    with pytest.raises(ValueError, match="iptables"):
        env.transparent_rules(firewall="pf")


def test_transparent_gateway_rule_and_quoting():
    rules = env.transparent_rules(gateway="veth 1", user="a b")
    assert "iptables -t nat -A PREROUTING -i 'veth 1' -p tcp --dport 443 -j REDIRECT --to-port 8080" in rules.add
    assert "--uid-owner 'a b'" in rules.add[3]


def test_wireguard_keys_match_mitmproxy():
    mitmproxy_rs = pytest.importorskip("mitmproxy_rs")
    server, client = mitmproxy_rs.wireguard.genkey(), mitmproxy_rs.wireguard.genkey()
    got = env.wireguard_keys(json.dumps({"server_key": server, "client_key": client}))
    assert got == (client, mitmproxy_rs.wireguard.pubkey(server))
    for bad in ("", "{}", '{"server_key": "nope", "client_key": "x"}', "[1]"):
        with pytest.raises(ValueError, match="WireGuard key file"):
            env.wireguard_keys(bad)


def test_wireguard_lines_are_a_config_file():
    lines = env.wireguard_lines("mitmdump", "addon/dragoman.py", "/c/wireguard.conf", "PRIV", "PUB", "10.1.2.3:51820")
    config = [line for line in lines if line and not line.startswith("#")]
    assert config == [
        "[Interface]",
        "PrivateKey = PRIV",
        "Address = 10.0.0.1/32",
        "DNS = 10.0.0.53",
        "[Peer]",
        "PublicKey = PUB",
        "AllowedIPs = 0.0.0.0/0",
        "Endpoint = 10.1.2.3:51820",
    ]
    text = "\n".join(lines)
    assert "mitmdump --mode wireguard --allow-hosts" in text and "wireguard@" not in text
    assert "--mode wireguard@51821" in "\n".join(env.wireguard_lines("m", "s", "c", "a", "b", "h:51821"))


def test_cli_env_transparent(capsys):
    assert cli.main(["env", "--transparent", "--firewall", "nftables", "--port", "8081", "--user", "mu"]) == 0
    out = capsys.readouterr().out
    assert "nft add rule inet dragoman output tcp dport 443 meta skuid != mu redirect to :8081" in out
    assert "sudo -u mu -H " in out
    # this machine only: loopback (issue 29, 1), so no other host can connect straight to the port
    assert "--mode transparent@127.0.0.1:8081 --mode transparent@::1:8081 --allow-hosts" in out
    assert "dragoman_client_keys" not in out
    assert cli.main(["env", "--transparent", "--port", "8081", "--gateway", "eth1"]) == 0
    out = capsys.readouterr().out
    assert "--mode transparent@8081 --allow-hosts" in out  # the gateway: the interface's address
    assert "--set dragoman_client_keys=devices=env:DRAGOMAN_CLIENT_KEY" in out and "dragoman_allow_remote" in out


def test_cli_env_wireguard(tmp_path, capsys):
    mitmproxy_rs = pytest.importorskip("mitmproxy_rs")
    assert cli.main(["env", "--wireguard", "--confdir", str(tmp_path)]) == 1
    assert "start `mitmdump --mode wireguard` once" in capsys.readouterr().err
    keys = {"server_key": mitmproxy_rs.wireguard.genkey(), "client_key": mitmproxy_rs.wireguard.genkey()}
    (tmp_path / "wireguard.conf").write_text(json.dumps(keys))
    assert cli.main(["env", "--wireguard", "--confdir", str(tmp_path), "--endpoint", "192.0.2.7:51820"]) == 0
    out = capsys.readouterr().out
    assert f"PrivateKey = {keys['client_key']}" in out
    assert f"PublicKey = {mitmproxy_rs.wireguard.pubkey(keys['server_key'])}" in out
    assert "Endpoint = 192.0.2.7:51820" in out


def test_cli_env_needs_a_client_or_a_mode():
    with pytest.raises(SystemExit, match="CLIENT"):
        cli.main(["env"])
    with pytest.raises(SystemExit, match="not both"):
        cli.main(["env", "curl", "--transparent"])


def test_readme_recipes_are_the_tested_ones():
    """The README's interception lines are what ``env`` prints and tests/interception runs."""
    readme = README.read_text()
    sudo = env.transparent_lines("mitmdump", "addon/dragoman.py")
    gateway = env.transparent_lines("mitmdump", "addon/dragoman.py", gateway="IFACE")
    wanted = [
        *env.transparent_rules(firewall="iptables", gateway="IFACE").add,
        *env.transparent_rules(firewall="nftables", gateway="IFACE").add,
        *env.transparent_rules(firewall="nftables").undo,
        next(line for line in sudo if line.startswith("sudo -u mitmproxyuser -H mitmdump --mode transparent")),
        *(line for line in gateway if line.startswith(("sudo -u mitmproxyuser -H mitmdump", "  --set"))),
        *env.wireguard_linux_client(),
    ]
    assert [line for line in wanted if line not in readme] == []
    assert "tests/interception" in readme and "not testable in our sandbox" not in readme


def test_allow_hosts_decrypts_every_official_host_and_only_those():
    """The recipes' ``--allow-hosts`` names every host Dragoman answers for (Gemini's and Code Assist's too: a
    host left out is tunnelled to the real provider), and nothing else."""
    import re

    from dragoman.mitm.hosts import OFFICIAL_HOSTS

    for host in OFFICIAL_HOSTS:
        assert re.search(env.ALLOW_HOSTS, host) and re.search(env.ALLOW_HOSTS, f"{host}:443"), host
    for other in ("github.com", "oauth2.googleapis.com", "api.anthropic.com.evil.example", "xapi.openai.com"):
        assert not re.search(env.ALLOW_HOSTS, other), other
