"""A throwaway network lab for the interception tests: network namespaces joined by veth pairs, addresses,
routes, hosts files, firewall rules inside the namespaces and processes - each undone at the end in reverse
order, also when a step fails half-way - and a check that nothing of it is left (``leftovers``).

Isolation. A lab holds a *slot* N: an flock on ``/run/dragoman-tests/slot-N.lock``, released by the kernel
when the holder dies, so concurrent pytest-xdist workers and concurrent runs never share a name or an address:

  namespaces   dgm-NN-<role>               veth ends   dgNN<role>-h (host or peer side), dgNN<role>-c
  addresses    10.231.N.0/24: /30 links from 10.231.N.0; the unrelated HTTPS host at 10.231.N.129 (on the
               host); the official API hosts at 10.231.N.200, inside 10.231.N.192/26, which is blackholed on
               the host: a connection to them can never leave the machine

A slot left behind by a killed run (no finalizer ran) is swept before it is reused. Firewall rules live only
inside the lab's namespaces; the host's own ruleset is never touched (``leftovers`` compares
``iptables-save`` before and after). Every process gets a parent-death signal (``setpriv --pdeathsig``), so
it ends with the test process even when that is killed.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import IO

LOCK_DIR = Path("/run/dragoman-tests")
NETNS_ETC = Path("/etc/netns")
WG_RUN = Path("/run/wireguard")
SLOTS = 64
NET = "10.231"
#: an unprivileged uid/gid for mitmdump, so the firewall's owner match can tell its traffic from the clients'
PROXY_UID = 65534
PROXY_GID = 65534

#: ``WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1``: wireguard-go refuses to run on Linux without it
WG_GO_ENV = {"WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD": "1"}


class LabError(RuntimeError):
    pass


def missing(tools: Sequence[str]) -> str | None:
    """Why the lab cannot run here (a skip reason), or None."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs, firewall rules); run the suite as root to include it"
    absent = [t for t in tools if shutil.which(t) is None]
    if absent:
        return (
            f"{', '.join(absent)} not installed (Debian: apt-get install -y --no-install-recommends "
            "iptables nftables wireguard-tools wireguard-go; .ci/run does it)"
        )
    return None


def _run(argv: Sequence[str], check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` exited with {r.returncode}: {(r.stderr or r.stdout).strip()}")
    return r


def host_ruleset() -> str:
    """The host's firewall ruleset (``iptables-save``, ``ip6tables-save``, ``nft list ruleset``) without the
    timestamp comments, to compare before and after."""
    out = []
    for argv in (["iptables-save"], ["ip6tables-save"], ["nft", "list", "ruleset"]):
        if shutil.which(argv[0]):
            r = _run(argv, check=False)
            out.append(f"## {argv[0]} (exit {r.returncode})")
            out += [line for line in r.stdout.splitlines() if not line.startswith("#")]
    return "\n".join(out)


def _names(prefix: str, argv: Sequence[str]) -> list[str]:
    r = _run(argv, check=False)
    found = []
    for line in r.stdout.splitlines():
        word = line.split()[0] if line.split() else ""
        word = word.split("@", 1)[0].rstrip(":")
        if word.startswith(prefix):
            found.append(word)
    return found


def netns_names(slot: int) -> list[str]:
    return _names(f"dgm-{slot:02d}-", ["ip", "netns", "list"])


def link_names(slot: int) -> list[str]:
    return _names(f"dg{slot:02d}", ["ip", "-o", "-br", "link", "show"])


def host_routes(slot: int) -> list[str]:
    r = _run(["ip", "-4", "route", "show"], check=False)
    return [line for line in r.stdout.splitlines() if f"{NET}.{slot}." in line]


def slot_files(slot: int) -> list[Path]:
    files = list(NETNS_ETC.glob(f"dgm-{slot:02d}-*")) if NETNS_ETC.is_dir() else []
    files += list(WG_RUN.glob(f"dg{slot:02d}*")) if WG_RUN.is_dir() else []
    return files


def _kill_netns_pids(name: str) -> None:
    r = _run(["ip", "netns", "pids", name], check=False)
    for pid in r.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def sweep(slot: int) -> list[str]:
    """Remove what a killed run left in ``slot`` (namespaces and their processes, links, routes, files)."""
    done = []
    for name in netns_names(slot):
        _kill_netns_pids(name)
        _run(["ip", "netns", "del", name], check=False)
        done.append(f"netns {name}")
    for link in link_names(slot):
        _run(["ip", "link", "del", link], check=False)
        done.append(f"link {link}")
    for route in host_routes(slot):
        _run(["ip", "route", "del", *route.split()], check=False)
        done.append(f"route {route}")
    for path in slot_files(slot):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        done.append(f"file {path}")
    return done


def acquire_slot(only: int | None = None) -> tuple[int, IO[str]]:
    """A free slot (or exactly ``only``) and its held lock file."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    start = os.getpid() % SLOTS  # spread concurrent runs; any free slot will do
    for slot in [only] if only is not None else [(start + i) % SLOTS for i in range(SLOTS)]:
        fh = open(LOCK_DIR / f"slot-{slot}.lock", "a+")  # noqa: SIM115 - held for the lab's life
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            fh.close()
            if e.errno in (errno.EAGAIN, errno.EACCES):
                continue
            raise
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))  # the holder, for a human looking at a busy slot
        fh.flush()
        return slot, fh
    raise LabError(f"no free lab slot{'' if only is None else f' {only}'} (see {LOCK_DIR})")


class Link:
    """A veth pair between ``a`` and ``b`` (None: the host), one /30."""

    def __init__(self, a: str | None, b: str, dev_a: str, dev_b: str, addr_a: str, addr_b: str) -> None:
        self.a, self.b, self.dev_a, self.dev_b, self.addr_a, self.addr_b = a, b, dev_a, dev_b, addr_a, addr_b


class Lab:
    """Namespaces, links, routes, rules and processes of one test module; ``close()`` undoes them all."""

    def __init__(self, workdir: Path, slot: int | None = None) -> None:
        self.workdir = workdir
        self.ruleset_before = host_ruleset()
        self.slot, self._lock = acquire_slot(slot)
        self.swept = sweep(self.slot)
        self.net = f"{NET}.{self.slot}"
        self.other_host = f"{self.net}.129"  # the unrelated HTTPS server, on the host
        self.api_addr = f"{self.net}.200"  # what the official API hosts resolve to in the lab
        self.blackhole = f"{self.net}.192/26"
        self.lab_range = f"{self.net}.128/25"  # routed towards the proxy (other host + API addresses)
        self._undo: list[tuple[str, Callable[[], None]]] = []
        self._links = 0
        self.namespaces: list[str] = []
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []  # (command name, process)
        self.closed = False

    # -- building -------------------------------------------------------------------------------------

    def _push(self, what: str, undo: Callable[[], None]) -> None:
        self._undo.append((what, undo))

    def defer(self, what: str, undo: Callable[[], object]) -> None:
        """Run ``undo`` at ``close()`` (before what was set up earlier)."""
        self._undo.append((what, lambda: undo() and None))

    def sh(self, ns: str | None, argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command on the host (``ns`` None) or inside a namespace."""
        return _run((["ip", "netns", "exec", ns] if ns else []) + list(argv), check=check)

    def netns(self, role: str) -> str:
        name = f"dgm-{self.slot:02d}-{role}"

        def undo() -> None:
            _kill_netns_pids(name)
            _run(["ip", "netns", "del", name])
            shutil.rmtree(NETNS_ETC / name, ignore_errors=True)

        _run(["ip", "netns", "add", name])
        self._push(f"netns {name}", undo)
        self.namespaces.append(name)
        self.sh(name, ["ip", "link", "set", "lo", "up"])
        return name

    def link(self, a: str | None, b: str) -> Link:
        """A veth pair from ``a`` (a namespace, or None for the host) to namespace ``b``, addressed from a /30."""
        k = self._links
        self._links += 1
        role = b.rsplit("-", 1)[1]
        dev_a, dev_b = f"dg{self.slot:02d}{role}{k}-h", f"dg{self.slot:02d}{role}{k}-c"
        addr_a, addr_b = f"{self.net}.{4 * k + 1}", f"{self.net}.{4 * k + 2}"
        _run(["ip", "link", "add", dev_a, "type", "veth", "peer", "name", dev_b, "netns", b])
        if a is None:
            self._push(f"link {dev_a}", lambda: _run(["ip", "link", "del", dev_a], check=False) and None)
        else:
            _run(["ip", "link", "set", dev_a, "netns", a])
        self.sh(a, ["ip", "addr", "add", f"{addr_a}/30", "dev", dev_a])
        self.sh(a, ["ip", "link", "set", dev_a, "up"])
        self.sh(b, ["ip", "addr", "add", f"{addr_b}/30", "dev", dev_b])
        self.sh(b, ["ip", "link", "set", dev_b, "up"])
        return Link(a, b, dev_a, dev_b, addr_a, addr_b)

    def host_route(self, *spec: str) -> None:
        _run(["ip", "route", "add", *spec])
        self._push(f"route {' '.join(spec)}", lambda: _run(["ip", "route", "del", *spec]) and None)

    def blackhole_api_range(self) -> None:
        """The official hosts' lab addresses go nowhere from the host: not to the internet, whatever happens."""
        self.host_route("blackhole", self.blackhole)

    def hosts_file(self, ns: str, names: dict[str, str]) -> Path:
        """``/etc/netns/<ns>/hosts``: ``ip netns exec`` bind-mounts it over /etc/hosts for everything in ``ns``."""
        folder = NETNS_ETC / ns
        folder.mkdir(parents=True, exist_ok=True)
        lines = ["127.0.0.1 localhost", "::1 localhost"] + [f"{ip} {name}" for name, ip in names.items()]
        (folder / "hosts").write_text("\n".join(lines) + "\n")
        return folder / "hosts"

    def spawn(
        self,
        argv: Sequence[str],
        ns: str | None = None,
        log: Path | None = None,
        user: tuple[int, int] | None = None,
        env: dict[str, str] | None = None,
        pipes: bool = False,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a process (inside ``ns``; as ``user`` (uid, gid) if given). Ends with this process (pdeathsig)
        and at ``close()``."""
        wrap = ["setpriv", "--pdeathsig=KILL"]
        if user is not None:
            # the unprivileged proxy user still needs to read this interpreter's files (under /root here)
            wrap += [f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups"]
            wrap += ["--inh-caps=+dac_override", "--ambient-caps=+dac_override"]
        full = (["ip", "netns", "exec", ns] if ns else []) + wrap + ["--", *argv]
        out: IO[bytes] | int
        if pipes:
            proc = subprocess.Popen(
                full, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd
            )
        else:
            assert log is not None
            out = open(log, "ab")  # noqa: SIM115 - closed below; the child keeps its own descriptor
            try:
                proc = subprocess.Popen(
                    full, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd
                )
            finally:
                out.close()
        self.procs.append((Path(argv[0]).name, proc))
        self._push(f"process {argv[0]} (pid {proc.pid})", lambda: stop(proc))
        return proc

    # -- undoing and checking ------------------------------------------------------------------------------

    def close(self) -> None:
        """Undo everything, newest first; every step is tried. Raises ``LabError`` listing what failed."""
        if self.closed:
            return
        self.closed = True
        errors = []
        while self._undo:
            what, undo = self._undo.pop()
            try:
                undo()
            except Exception as e:  # noqa: BLE001 - every step is tried; the failures are reported together
                errors.append(f"{what}: {e}")
        left = self.leftovers()
        fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._lock.close()
        if errors or left:
            raise LabError("lab cleanup failed: " + "; ".join(errors + [f"left behind: {x}" for x in left]))

    def leftovers(self) -> list[str]:
        """What of this lab still exists (empty after ``close()``)."""
        left = [f"netns {n}" for n in netns_names(self.slot)]
        left += [f"link {n}" for n in link_names(self.slot)]
        left += [f"host route {r}" for r in host_routes(self.slot)]
        left += [f"file {p}" for p in slot_files(self.slot)]
        left += [f"process {name} {p.pid}" for name, p in self.procs if p.poll() is None]
        if host_ruleset() != self.ruleset_before:
            left.append("the host's firewall ruleset changed")
        return left


def stop(proc: subprocess.Popen[bytes], timeout: float = 5) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` s; closes the pipes."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            raise LabError(f"{what}: the process exited with {proc.returncode}")
        time.sleep(0.05)
    raise LabError(f"{what}: not within {timeout} s")
