"""Transparent mode, the way the README runs it: ``python -m dragoman env --transparent`` lines (iptables and
nftables) on a machine, mitmdump as its own user, official SDK clients on the machine and on a device routed
through it, talking to the official hosts.

The lab (``netlab``): namespace ``m`` is the machine (mitmdump as ``nobody`` + a local client; the OUTPUT rule
with the owner match), namespace ``g`` a device whose default route is the machine (the PREROUTING rule on
the machine's interface towards it). The machine reaches the fake upstream and the unrelated HTTPS host on
the host side of a veth pair; the official hosts resolve to a blackholed address.
"""

from __future__ import annotations

import json
import pwd
import uuid
from dataclasses import dataclass

import pytest

from dragoman.cli import env_recipes as env

from . import netlab
from .conftest import CLIENT_KEY
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
from .conftest import upstream_seen

pytestmark = pytest.mark.e2e

TOOLS = ("ip", "setpriv", "bash", "sysctl", "iptables", "ip6tables", "iptables-save", "ip6tables-save", "nft")
PROXY_USER = "nobody"  # stands for the recipe's mitmproxyuser


@dataclass
class Machine:
    lab: netlab.Lab
    machine: str
    gateway_dev: str
    gateway_addr: str  # the machine's own address on the device's link
    fake: object
    echo: HttpsEcho
    plain_echo: HttpsEcho
    mitm: Mitmdump
    clients: dict[str, NsClient]


@dataclass
class Transparent(Machine):
    firewall: str
    rules: env.Rules


def ns_ruleset(lab: netlab.Lab, ns: str) -> str:
    rules = lab.sh(ns, ["iptables-save"]).stdout + lab.sh(ns, ["ip6tables-save"]).stdout
    return rules + lab.sh(ns, ["nft", "list", "ruleset"]).stdout


def run_lines(lab: netlab.Lab, ns: str, lines) -> None:
    """Run recipe lines as a user pastes them: each through bash, inside the namespace."""
    for line in lines:
        lab.sh(ns, ["bash", "-euo", "pipefail", "-c", line])


def redirects(lab: netlab.Lab, ns: str) -> list[str]:
    return [line for line in ns_ruleset(lab, ns).splitlines() if "redirect" in line.lower()]


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """The lab, mitmdump and the clients; the firewall rules come and go with ``transparent``."""
    lab_or_skip(TOOLS)
    workdir = tmp_path_factory.mktemp("transparent")
    user = pwd.getpwnam(PROXY_USER)
    lab = netlab.Lab(workdir)
    try:
        machine, device = lab.netns("m"), lab.netns("g")
        uplink = lab.link(None, machine)  # host <-> machine: the fake upstream and the unrelated host
        gateway = lab.link(machine, device)  # machine <-> device: the device's gateway is the machine
        lab.sh(None, ["ip", "addr", "add", f"{lab.other_host}/32", "dev", uplink.dev_a])
        lab.blackhole_api_range()
        lab.sh(machine, ["ip", "route", "add", lab.lab_range, "via", uplink.addr_a])
        lab.sh(device, ["ip", "route", "add", "default", "via", gateway.addr_a])
        for ns in (machine, device):
            lab.hosts_file(ns, hosts_map(lab))
        echo = HttpsEcho(lab.other_host, workdir)
        lab.defer("the unrelated HTTPS host", echo.stop)
        plain_echo = HttpsEcho(lab.other_host, workdir, tls=False)
        lab.defer("the unrelated plain HTTP host", plain_echo.stop)
        fake = start_fake_upstream(uplink.addr_a)
        lab.defer("the fake upstream", fake.stop)

        confdir = workdir / "confdir"
        args = env.mitmdump_args("transparent")
        args += [
            "--set",
            "dragoman_target=openai-chat",
            "--set",
            f"dragoman_upstream=http://{uplink.addr_a}:{fake.port}/v1",
        ]
        args += ["--set", f"dragoman_api_key={UPSTREAM_KEY}", "--set", "dragoman_model_map=claude-test=gpt-fake"]
        # the gateway recipe listens beyond loopback: it starts only with client keys or this opt-out. Without
        # client keys, only ``direct`` keeps a host that connects straight to the port from spending the key
        args += ["--set", "dragoman_allow_remote=true"]
        mitm = Mitmdump(lab, args, confdir, ns=machine, user=(user.pw_uid, user.pw_gid))
        bundle = workdir / "client-ca-bundle.pem"
        clients = {"machine": NsClient(lab, machine, bundle), "device": NsClient(lab, device, bundle)}
        ca_bundle(bundle, mitm.wait_ready().ca, echo.cert)
        for c in clients.values():
            c.wait_ready()
        yield Machine(lab, machine, gateway.dev_a, gateway.addr_a, fake, echo, plain_echo, mitm, clients)
    finally:
        lab.close()


@pytest.fixture(scope="module", params=env.FIREWALLS)
def transparent(request, machine):
    """The recipe's firewall lines (iptables, then nftables) on the machine; its undo lines after."""
    lab = machine.lab
    rules = env.transparent_rules(env.TRANSPARENT_PORT, PROXY_USER, request.param, gateway=machine.gateway_dev)
    assert redirects(lab, machine.machine) == []
    try:
        run_lines(lab, machine.machine, rules.add)
        yield Transparent(**vars(machine), firewall=request.param, rules=rules)
    finally:
        run_lines(lab, machine.machine, rules.undo)
        left = redirects(lab, machine.machine)
        assert left == [], f"the recipe's undo lines left redirects behind: {left}"


@pytest.fixture(params=("machine", "device"))
def client(request, transparent) -> NsClient:
    """A client on the machine itself (OUTPUT rule, owner match) or on a device routed through it (PREROUTING)."""
    return transparent.clients[request.param]


def test_the_recipe_is_installed_in_the_lab(transparent):
    rules = ns_ruleset(transparent.lab, transparent.machine)
    if transparent.firewall == "iptables":
        assert f"--uid-owner {pwd.getpwnam(PROXY_USER).pw_uid} -j REDIRECT --to-ports 8080" in rules
        assert "-A PREROUTING -i dg" in rules
    else:
        assert "table inet dragoman" in rules and "meta skuid != " in rules and "redirect to :8080" in rules
    proc = transparent.mitm.proc.args
    assert proc[proc.index("--mode") + 1] == "transparent" and env.ALLOW_HOSTS in proc


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("mode", MODES)
def test_sdk_turn_through_transparent_mode(transparent, client, sdk, mode):
    check_turn(client, transparent.fake, transparent.mitm, transparent.lab, sdk, mode, "/v1/chat/completions")


def test_gemini_and_code_assist_hosts(transparent, client):
    check_gemini_turns(client, transparent.fake, transparent.mitm, transparent.lab, "/v1/chat/completions")


def test_google_genai_sdk(transparent, client):
    check_genai_sdk(client, transparent.fake, transparent.mitm, transparent.lab, "/v1/chat/completions")


def test_count_tokens(transparent, client):
    check_count_tokens(client, transparent.fake, transparent.mitm)


@pytest.mark.parametrize("sdk", ("anthropic", "openai"))
def test_models(transparent, client, sdk):
    check_models(client, transparent.mitm, sdk)


def test_official_host_is_decrypted(transparent, client):
    check_official_host_decrypted(client, transparent.mitm)


def test_unrelated_https_host_passes_through_untouched(transparent, client):
    check_unrelated_host(client, transparent.echo, transparent.mitm)


def test_a_host_header_or_sni_naming_the_api_never_sends_the_key_elsewhere(transparent, client):
    # the recipe redirects port 443 only: the machine's own plain HTTP goes straight to the attacker's host
    # (still without the key); the device's is forwarded, and the lab gives it no way back
    plain = transparent.plain_echo if client is transparent.clients["machine"] else None
    check_attacker_never_gets_the_key(
        client, transparent.echo, plain, transparent.fake, transparent.mitm, transparent.lab
    )


def test_the_lab_ran_the_printed_recipe(transparent):
    """What the lab ran is what ``env --transparent`` prints, but for the user and the interface names."""
    printed = env.transparent_lines("mitmdump", "addon/dragoman.py", firewall=transparent.firewall, gateway="IFACE")
    ran = transparent.rules
    iface = transparent.gateway_dev
    for line in ran.add + ran.undo:
        assert line.replace(PROXY_USER, env.PROXY_USER).replace(iface, "IFACE") in printed


# -- a host that connects straight to the proxy (issue 29, 1) -------------------------------------------------

PAYLOAD = {"model": "claude-test", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


def direct_call(client: NsClient, connect: str, port: int) -> tuple[dict, str]:
    """POST /v1/messages over TLS with the API's name in the SNI and Host, to ``connect``:``port``."""
    test_id = uuid.uuid4().hex
    headers = {
        "host": "api.anthropic.com",
        "x-api-key": CLIENT_KEY,
        "anthropic-version": "2023-06-01",
        "x-test-id": test_id,
    }
    req = {
        "op": "https",
        "url": f"https://api.anthropic.com:{port}/v1/messages",
        "connect": connect,
        "sni": "api.anthropic.com",
        "method": "POST",
        "body": PAYLOAD,
        "headers": headers,
    }
    return client.call(req), test_id


def check_refused(m: Machine, case: str, result: dict, test_id: str, answered: bool) -> None:
    """Refused: answered 421 in the Anthropic error shape (``answered``), or the connection closed during TLS;
    either way the upstream got nothing."""
    if answered:
        assert result["ok"] and result["status"] == 421, f"{case}: {result}{m.mitm.explain()}"
        error = json.loads(result["body"])
        assert error["type"] == "error" and error["error"]["type"] == "permission_error", case
        assert "straight to the proxy's own address" in error["error"]["message"], case
        assert UPSTREAM_KEY not in result["body"], case
    else:
        assert not result["ok"] and "EOF" in result["message"] + result["error_type"], f"{case}: {result}"
    assert upstream_seen(m.fake, test_id) == [], case


def test_a_connection_straight_to_the_proxy_never_spends_the_key(transparent):
    """A device that opens TLS to the machine's own address with SNI and Host naming api.anthropic.com, or the
    machine's own client connecting to the port on 127.0.0.1: the upstream gets nothing (before issue 29 it
    got the request with the configured key). To the transparent port itself, mitmproxy asks to connect to
    its destination during the handshake - the proxy itself, again and again before issue 29 - and that
    connection is refused (logged), so the client's handshake ends; to another port of the machine (443,
    which the gateway rule redirects to the proxy) the request is seen and answered 421 in the client's
    protocol (logged). The same request headed to the API's address goes through the redirect, translated."""
    m, lab = transparent, transparent.lab
    port = env.TRANSPARENT_PORT
    cases = {
        "device -> machine:8080": (m.clients["device"], m.gateway_addr, port, False),
        "device -> machine:443 (redirected to the port)": (m.clients["device"], m.gateway_addr, 443, True),
        "machine -> 127.0.0.1:8080": (m.clients["machine"], "127.0.0.1", port, False),
    }
    for case, (client, connect, to_port, answered) in cases.items():
        result, test_id = direct_call(client, connect, to_port)
        check_refused(m, case, result, test_id, answered)
    log = m.mitm.log()
    assert f"straight to the proxy's own port {m.gateway_addr}:{port}: not connecting to itself" in log
    assert f"a connection straight to the proxy's own address {m.gateway_addr}:443" in log
    assert "transparent mode serves only redirected connections, nothing was sent upstream" in log

    for name, client in m.clients.items():  # the same request, headed to the API's address: redirected
        result, test_id = direct_call(client, lab.api_addr, 443)
        assert result["ok"] and result["status"] == 200, f"{name}: {result}{m.mitm.explain()}"
        seen = upstream_seen(m.fake, test_id)
        assert len(seen) == 1 and seen[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}", name
