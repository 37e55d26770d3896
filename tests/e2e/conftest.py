"""End-to-end fixtures: an in-process fake upstream, real ``mitmdump`` subprocesses with the addon, and the
SDK client runner (a subprocess on ``$DRAGOMAN_CLIENT_PYTHON``, default this interpreter)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from dragoman.demo import FakeUpstream

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "addon" / "dragoman.py"
CLIENT = Path(__file__).with_name("sdk_client.py")
STALL_S = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PortTaken(RuntimeError):
    """Another process listens on the port picked for this one (two xdist workers picked the same free port):
    the caller starts again on a new port."""


def _listener_inodes(port: int) -> set[str]:
    """Socket inodes listening on ``port`` (any local address), from /proc/net/tcp{,6}."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                found.add(f[9])
    return found


def _owns(pid: int, inodes: set[str]) -> bool | None:
    """Whether ``pid`` holds one of ``inodes``; None when /proc cannot tell."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Until ``proc`` listens on ``port``; ``PortTaken`` when another process does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mitmdump exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                pass
        except OSError:
            time.sleep(0.1)
            continue
        inodes = _listener_inodes(port)
        if not inodes or _owns(proc.pid, inodes) is not False:
            return
        raise PortTaken(f"port {port} is another process's")
    raise RuntimeError(f"mitmdump did not listen on {port} within {timeout} s")


def mitmdump_bin() -> str:
    exe = Path(sys.executable).parent / "mitmdump"
    if not exe.exists():
        pytest.skip(f"no mitmdump next to {sys.executable}")
    return str(exe)


class Proxy:
    """A running ``mitmdump -s addon/dragoman.py --mode reverse:<fake>`` with one target protocol."""

    def __init__(self, target: str, upstream: FakeUpstream, workdir: Path, extra: list[str] | None = None) -> None:
        for attempt in range(3):
            try:
                self._start(target, upstream, workdir, extra)
                return
            except PortTaken:
                self.stop()
                if attempt == 2:
                    raise

    def _start(self, target: str, upstream: FakeUpstream, workdir: Path, extra: list[str] | None) -> None:
        self.target = target
        self.port = free_port()
        self.log_path = workdir / f"mitmdump-{target}-{self.port}.log"
        base = upstream.url + ("" if target == "anthropic" else "/v1")
        argv = [
            mitmdump_bin(),
            "-s",
            str(SCRIPT),
            "--mode",
            f"reverse:{upstream.url}",
            "--listen-host",
            "127.0.0.1",
            "-p",
            str(self.port),
            "--set",
            f"confdir={workdir / 'confdir'}",
            "--set",
            "termlog_verbosity=debug",
            "--set",
            f"dragoman_target={target}",
            "--set",
            f"dragoman_upstream={base}",
            *(extra or []),
        ]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, cwd=str(workdir))
        try:
            wait_port(self.port, self.proc)
        except PortTaken:
            raise
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"mitmdump failed to start:\n{self.log()}") from None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return ""

    def base_url(self, sdk: str) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return root if sdk == "anthropic" else root + "/v1"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture(scope="session")
def fake():
    with FakeUpstream(stall=STALL_S) as up:
        yield up


@pytest.fixture(scope="session")
def proxies(fake, tmp_path_factory):
    """``proxies(target)`` -> a Proxy, started once per target and session (per xdist worker)."""
    started: dict[tuple, Proxy] = {}
    workdir = tmp_path_factory.mktemp("mitm")

    def get(target: str, extra: tuple[str, ...] = ()) -> Proxy:
        key = (target, extra)
        if key not in started:
            started[key] = Proxy(target, fake, workdir, list(extra))
        return started[key]

    yield get
    for p in started.values():
        p.stop()


def client_python() -> str:
    return os.environ.get("DRAGOMAN_CLIENT_PYTHON") or sys.executable


class ClientWorker:
    """The SDK client script in ``--serve`` mode on the client interpreter (imports once, then one line per call)."""

    def __init__(self, python: str) -> None:
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env["NO_PROXY"] = "*"
        self.proc = subprocess.Popen(
            [python, str(CLIENT), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        ready = self.proc.stdout.readline()
        if not ready.strip():
            err = self.proc.stderr.read()
            raise RuntimeError(f"the SDK client worker did not start:\n{err[-4000:]}")

    def call(self, sc: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(sc) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the SDK client worker died:\n{self.proc.stderr.read()[-4000:]}")
        return json.loads(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def sdk_worker():
    py = client_python()
    r = subprocess.run([py, "-c", "import anthropic, openai"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(
            f"the SDK client interpreter {py} lacks the anthropic/openai SDKs; set DRAGOMAN_CLIENT_PYTHON (see Makefile)"
        )
    worker = ClientWorker(py)
    yield worker
    worker.stop()


@pytest.fixture
def run_client(sdk_worker, request):
    """``run_client(proxy, fake, sdk, mode, scenario)`` -> (result dict, the upstream request the fake saw or None)."""
    shown: list[Proxy] = []

    def run(proxy: Proxy, fake: FakeUpstream, sdk: str, mode: str, scenario: str, **extra) -> tuple[dict, object]:
        shown.append(proxy)
        test_id = uuid.uuid4().hex
        sc = {
            "sdk": sdk,
            "base_url": proxy.base_url(sdk),
            "mode": mode,
            "scenario": scenario,
            "test_id": test_id,
            **extra,
        }
        result = sdk_worker.call(sc)
        seen = [q for q in fake.requests if q.headers.get("x-test-id") == test_id]
        return result, (seen[-1] if seen else None)

    yield run
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for p in shown:
            sys.stderr.write(f"\n---- mitmdump log ({p.target}, {p.log_path}) ----\n{p.log()[-6000:]}\n")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
