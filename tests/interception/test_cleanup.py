"""The interception labs leave nothing behind: not after a normal run, not when a setup step fails half-way,
not when the test process is killed (its processes die with it and the next run sweeps the rest)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dragoman.cli import env_recipes as env

from . import netlab
from .conftest import lab_or_skip

pytestmark = pytest.mark.e2e

TOOLS = ("ip", "setpriv", "bash", "iptables", "nft")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state  # a zombie has ended


def build_everything(lab: netlab.Lab) -> list[subprocess.Popen]:
    """One of each thing a lab makes: namespaces, veth pairs, host address and route, hosts file, firewall
    rules (both kinds) inside, processes inside and on the host."""
    a, b = lab.netns("a"), lab.netns("b")
    up = lab.link(None, a)
    lab.link(a, b)
    lab.sh(None, ["ip", "addr", "add", f"{lab.other_host}/32", "dev", up.dev_a])
    lab.blackhole_api_range()
    lab.hosts_file(a, {"api.anthropic.com": lab.api_addr})
    for firewall in env.FIREWALLS:
        for line in env.transparent_rules(8080, "nobody", firewall, gateway=up.dev_b).add:
            lab.sh(a, ["bash", "-c", line])
    log = lab.workdir / "sleep.log"
    return [lab.spawn(["sleep", "600"], ns=a, log=log), lab.spawn(["sleep", "600"], log=log)]


def test_a_closed_lab_leaves_nothing(tmp_path):
    lab_or_skip(TOOLS)
    before = netlab.host_ruleset()
    lab = netlab.Lab(tmp_path)
    try:
        procs = build_everything(lab)
        left = "\n".join(lab.leftovers())
        for what in ("netns dgm-", "link dg", "host route blackhole", "file /etc/netns/", "process sleep"):
            assert what in left  # the check sees each kind of thing while it exists
        assert lab.namespaces[0] in netlab._run(["ip", "netns", "list"]).stdout
    finally:
        lab.close()  # raises LabError if anything is left
    assert lab.leftovers() == []
    listed = netlab._run(["ip", "netns", "list"]).stdout
    assert not any(ns in listed for ns in lab.namespaces)
    assert not any(alive(p.pid) for p in procs)
    assert netlab.host_ruleset() == before


def test_a_setup_failing_half_way_is_undone(tmp_path):
    lab_or_skip(TOOLS)
    lab = netlab.Lab(tmp_path)
    with pytest.raises(netlab.LabError, match="exited with"):
        try:
            build_everything(lab)
            lab.sh(lab.namespaces[0], ["iptables", "-t", "nat", "-A", "NOSUCHCHAIN", "-j", "ACCEPT"])  # fails
        finally:
            lab.close()
    assert lab.leftovers() == []


KILLED_RUN = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from interception import netlab
lab = netlab.Lab(Path({workdir!r}))
a = lab.netns("a")
up = lab.link(None, a)
lab.blackhole_api_range()
lab.hosts_file(a, {{"api.openai.com": lab.api_addr}})
p1 = lab.spawn(["sleep", "600"], ns=a, log=Path({workdir!r}) / "s.log")
p2 = lab.spawn(["sleep", "600"], log=Path({workdir!r}) / "s.log")
# setpriv sets the parent-death signal just before it execs the command: wait until both did
netlab.wait_for(lambda: all(Path(f"/proc/{{p.pid}}/comm").read_text().strip() == "sleep" for p in (p1, p2)), "exec", 20)
print(lab.slot, p1.pid, p2.pid, flush=True)
time.sleep(600)
"""


def test_a_killed_run_is_swept_by_the_next(tmp_path):
    lab_or_skip(TOOLS)
    tests = str(Path(__file__).resolve().parents[1])
    code = textwrap.dedent(KILLED_RUN.format(tests=tests, workdir=str(tmp_path)))
    run = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        slot, *pids = (int(x) for x in run.stdout.readline().split())
    finally:
        os.kill(run.pid, signal.SIGKILL)  # no finalizer runs
        run.wait()
        run.stdout.close()
    lab = None
    try:
        netlab.wait_for(lambda: not any(alive(p) for p in pids), "the killed run's processes end (pdeathsig)", 10)
        assert netlab.netns_names(slot) and netlab.host_routes(slot)  # the lab itself is still there
        lab = netlab.Lab(tmp_path, slot=slot)  # the next user of the slot sweeps it
        assert any(x.startswith("netns dgm-") for x in lab.swept)
        assert any(x.startswith("route blackhole") for x in lab.swept)
        assert lab.leftovers() == []
    finally:
        if lab is not None:
            lab.close()
        else:
            for pid in pids:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
            netlab.sweep(slot)
