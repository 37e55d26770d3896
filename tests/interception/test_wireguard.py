"""WireGuard mode, the way the README runs it: ``mitmdump --mode wireguard`` on the host, a client namespace
brought up with the lines of ``python -m dragoman env --wireguard`` (userspace wireguard-go: this kernel has
no WireGuard module), and official SDK clients in it talking to the official hosts through the tunnel.

The client's tunnel carries its default route; the WireGuard endpoint (the host side of a veth pair) stays
on the directly connected link. The official hosts resolve to a blackholed address, the unrelated HTTPS
host to an address of the host.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.cli import env_recipes as env

from . import netlab
from .conftest import MODES
from .conftest import SDKS
from .conftest import UPSTREAM_KEY
from .conftest import HttpsEcho
from .conftest import Mitmdump
from .conftest import NsClient
from .conftest import ca_bundle
from .conftest import check_attacker_never_gets_the_key
from .conftest import check_count_tokens
from .conftest import check_gemini_turns
from .conftest import check_genai_sdk
from .conftest import check_models
from .conftest import check_official_host_decrypted
from .conftest import check_turn
from .conftest import check_unrelated_host
from .conftest import hosts_map
from .conftest import lab_or_skip
from .conftest import start_fake_upstream

pytestmark = pytest.mark.e2e

TOOLS = ("ip", "setpriv", "bash", "wg", "wg-quick", "wireguard-go")


@dataclass
class WireGuard:
    lab: netlab.Lab
    client_ns: str
    iface: str
    endpoint: str
    conf_file: Path
    printed: str
    fake: object
    echo: HttpsEcho
    plain_echo: HttpsEcho
    mitm: Mitmdump
    client: NsClient


def free_udp_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def wireguard(tmp_path_factory):
    lab_or_skip(TOOLS)
    if not Path("/dev/net/tun").exists():
        pytest.skip("wireguard-go needs /dev/net/tun")
    workdir = tmp_path_factory.mktemp("wireguard")
    lab = netlab.Lab(workdir)
    try:
        client_ns = lab.netns("w")
        uplink = lab.link(None, client_ns)
        lab.sh(None, ["ip", "addr", "add", f"{lab.other_host}/32", "dev", uplink.dev_a])
        lab.blackhole_api_range()
        lab.hosts_file(client_ns, hosts_map(lab))
        echo = HttpsEcho(lab.other_host, workdir)
        lab.defer("the unrelated HTTPS host", echo.stop)
        plain_echo = HttpsEcho(lab.other_host, workdir, tls=False)
        lab.defer("the unrelated plain HTTP host", plain_echo.stop)
        fake = start_fake_upstream(uplink.addr_a)
        lab.defer("the fake upstream", fake.stop)

        port = free_udp_port(uplink.addr_a)
        confdir = workdir / "confdir"
        args = env.mitmdump_args("wireguard", port) + ["--listen-host", uplink.addr_a]
        args += ["--set", "dragoman_target=openai-responses"]
        args += ["--set", f"dragoman_upstream=http://{uplink.addr_a}:{fake.port}/v1"]
        args += ["--set", f"dragoman_api_key={UPSTREAM_KEY}", "--set", "dragoman_model_map=claude-test=gpt-fake"]
        mitm = Mitmdump(lab, args, confdir, ns=None)
        bundle = workdir / "client-ca-bundle.pem"
        mitm.wait_ready()
        endpoint = f"{uplink.addr_a}:{port}"

        # the client config as `python -m dragoman env --wireguard` prints it, saved as <iface>.conf
        iface = f"dg{lab.slot:02d}wg"
        argv = [sys.executable, "-m", "dragoman", "env", "--wireguard", "--confdir", str(confdir)]
        printed = netlab._run([*argv, "--endpoint", endpoint]).stdout
        conf_file = workdir / f"{iface}.conf"
        conf_file.write_text(printed)
        conf_file.chmod(0o600)

        steps = env.wireguard_linux_client(iface, str(conf_file))
        assert steps[0].startswith("WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 wireguard-go -f ")
        assert steps[0].endswith(" &")
        # the background step as a process of the lab (stopped at the end), the rest as pasted into bash
        lab.spawn(["wireguard-go", "-f", iface], ns=client_ns, log=workdir / "wireguard-go.log", env=wg_env())
        sock = netlab.WG_RUN / f"{iface}.sock"
        netlab.wait_for(sock.exists, f"wireguard-go's socket {sock}", 20)
        for line in steps[1:]:
            lab.sh(client_ns, ["bash", "-euo", "pipefail", "-c", line])

        client = NsClient(lab, client_ns, bundle)
        ca_bundle(bundle, mitm.ca, echo.cert)
        client.wait_ready()
        yield WireGuard(lab, client_ns, iface, endpoint, conf_file, printed, fake, echo, plain_echo, mitm, client)
    finally:
        lab.close()


def wg_env() -> dict[str, str]:
    return {**os.environ, **netlab.WG_GO_ENV}


def test_env_prints_the_config_mitmdump_prints(wireguard):
    """``env --wireguard`` (keys from the confdir) gives the same client config mitmdump logs at start."""
    conf = "\n".join(line for line in wireguard.printed.splitlines() if not line.startswith("#"))
    assert "PrivateKey = " in conf and f"Endpoint = {wireguard.endpoint}" in conf
    logged = wireguard.mitm.log()
    for line in conf.splitlines():
        assert line in logged, f"{line!r} is not in mitmdump's printed config{wireguard.mitm.explain()}"


def test_tunnel_is_up(wireguard):
    check_official_host_decrypted(wireguard.client, wireguard.mitm)  # some traffic, so there was a handshake
    shown = wireguard.lab.sh(wireguard.client_ns, ["wg", "show", wireguard.iface, "latest-handshakes"]).stdout
    routes = wireguard.lab.sh(wireguard.client_ns, ["ip", "route", "show", "default"]).stdout
    assert f"dev {wireguard.iface}" in routes
    assert shown.split() and shown.split()[-1] != "0", f"no handshake: {shown!r}"


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("mode", MODES)
def test_sdk_turn_through_wireguard_mode(wireguard, sdk, mode):
    check_turn(wireguard.client, wireguard.fake, wireguard.mitm, wireguard.lab, sdk, mode, "/v1/responses")


def test_gemini_and_code_assist_hosts(wireguard):
    check_gemini_turns(wireguard.client, wireguard.fake, wireguard.mitm, wireguard.lab, "/v1/responses")


def test_google_genai_sdk(wireguard):
    check_genai_sdk(wireguard.client, wireguard.fake, wireguard.mitm, wireguard.lab, "/v1/responses")


def test_count_tokens(wireguard):
    check_count_tokens(wireguard.client, wireguard.fake, wireguard.mitm)


@pytest.mark.parametrize("sdk", ("anthropic", "openai"))
def test_models(wireguard, sdk):
    check_models(wireguard.client, wireguard.mitm, sdk)


def test_official_host_is_decrypted(wireguard):
    check_official_host_decrypted(wireguard.client, wireguard.mitm)


def test_unrelated_https_host_passes_through_untouched(wireguard):
    check_unrelated_host(wireguard.client, wireguard.echo, wireguard.mitm)


def test_a_host_header_or_sni_naming_the_api_never_sends_the_key_elsewhere(wireguard):
    w = wireguard
    check_attacker_never_gets_the_key(w.client, w.echo, w.plain_echo, w.fake, w.mitm, w.lab)
