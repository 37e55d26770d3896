"""The long-running commands stop their children on SIGTERM and SIGHUP as on Ctrl-C, and say in one line when a
port is taken (issue 30, item 6). Real processes on ephemeral ports; each test stops what it started."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dragoman.cli import children

pytestmark = pytest.mark.e2e

HAS_MITMDUMP = (Path(sys.executable).parent / "mitmdump").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc), so the test sees a leaked mitmdump even once its parent is gone."""
    found: list[int] = []
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
    by_parent: dict[int, list[int]] = {}
    for line in out.splitlines():
        child, parent = (int(x) for x in line.split())
        by_parent.setdefault(parent, []).append(child)
    todo = [pid]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by a parent that is gone) is no process left listening
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _start_demo(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int, int, Path]:
    port, up = _free_port(), _free_port()
    log = tmp_path / "demo.log"
    cmd = [sys.executable, "-m", "dragoman", "demo", "--port", str(port), "--upstream-port", str(up)]
    cmd += ["--", "--set", f"confdir={tmp_path / 'conf'}"]
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 40
    while not (_listening(port) and _listening(up)):
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return proc, port, up, log


@pytest.mark.skipif(not HAS_MITMDUMP, reason="no mitmdump next to this interpreter")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_demo_stopped_by_signal_leaves_no_process_on_either_port(tmp_path, sig):
    proc, port, up, log = _start_demo(tmp_path)
    kids = _children(proc.pid)
    try:
        assert kids, "the demo runs mitmdump as a child"
        proc.send_signal(sig)
        rc = proc.wait(timeout=20)
        deadline = time.monotonic() + 10
        while any(_alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [k for k in kids if _alive(k)]
        assert left == [], f"{sig.name} left processes {left}:\n{log.read_text()}"
        assert not _listening(port), f"port {port} still answers after {sig.name}"
        assert not _listening(up), f"port {up} still answers after {sig.name}"
        assert rc == 0, log.read_text()
    finally:
        for pid in [proc.pid, *kids]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.mark.parametrize("which", ["--port", "--upstream-port"])
def test_demo_on_a_taken_port_exits_non_zero_with_one_line(tmp_path, which):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        other = _free_port()
        ports = {"--port": other, "--upstream-port": other}
        ports[which] = taken
        cmd = [sys.executable, "-m", "dragoman", "demo"]
        for flag, value in ports.items():
            cmd += [flag, str(value)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {taken} is taken" in lines[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_fake_upstream_on_a_taken_port_exits_non_zero_with_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "dragoman", "fake-upstream", "--port", str(taken)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{taken}" in lines[0] and "cannot listen" in lines[0], done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_fake_upstream_stops_cleanly_on_signal(tmp_path, sig):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dragoman", "fake-upstream", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # its own line says it listens (a probe of the port could find another test's server on it, and a
        # signal before the command set its handlers would kill it)
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "the fake upstream said nothing within 30 s"
        line = proc.stdout.readline()
        assert f"127.0.0.1:{port}".encode() in line, line
        proc.send_signal(sig)
        assert proc.wait(timeout=15) == 0
        assert b"Traceback" not in proc.stderr.read()
        assert not _listening(port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stop_on_signals_restores_the_previous_handlers():
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    with pytest.raises(children.Stopped):
        with children.stop_on_signals():
            assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this at once
    assert {s: signal.getsignal(s) for s in before} == before


def test_port_taken_sees_a_listener():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert children.port_taken("127.0.0.1", busy.getsockname()[1])
    assert not children.port_taken("127.0.0.1", _free_port())
    assert not children.port_taken("127.0.0.1", 0)
