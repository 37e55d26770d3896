"""Child processes of the benchmark (fake upstream, mitmdump), their CPU time and memory from /proc.

Every child gets a stdin pipe and is stopped by ``stop()`` (terminate, then kill) in a ``finally``;
the fake upstream also exits on its own when its stdin closes.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).parent
REPO = BENCH.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _count_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


_CPUS = _count_cpus()  # taken at import, before the benchmark pins itself to one core


def cpus() -> int:
    return _CPUS


def pin_prefix(core: int | None) -> list[str]:
    if core is None or shutil.which("taskset") is None or cpus() < 2:
        return []
    return ["taskset", "-c", str(core)]


def pin_self(core: int | None) -> bool:
    if core is None or cpus() < 2:
        return False
    try:
        os.sched_setaffinity(0, {core})
        return True
    except (AttributeError, OSError):
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ticks(path: str) -> int:
    """utime + stime (clock ticks) from a /proc ``stat`` file."""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime is field 14, stime field 15
    return int(fields[11]) + int(fields[12])


class Proc:
    def __init__(self, name: str, popen: subprocess.Popen, port: int, log: Path | None = None) -> None:
        self.name = name
        self.popen = popen
        self.port = port
        self.log = log

    @property
    def pid(self) -> int:
        return self.popen.pid

    def cpu_seconds(self) -> float:
        """CPU time of the whole process, in seconds: each live thread's to the nanosecond (the scheduler's
        own count, ``/proc/<pid>/task/<tid>/schedstat``), so a stream's few seconds are measured to the
        microsecond instead of to ``/proc/<pid>/stat``'s 10 ms tick (0.5 µs per event over a 20,000-event
        stream: a quarter of what the lint bench measures); the threads that have ended count in ticks (the
        process's utime + stime less its live threads'). Without schedstat (a kernel built without it): ticks."""
        pid = self.pid
        ticks = _ticks(f"/proc/{pid}/stat")
        live_ns = live_ticks = 0
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    live_ns += int(f.read().split()[0])
                live_ticks += _ticks(f"/proc/{pid}/task/{tid}/stat")
        except (OSError, ValueError, IndexError):
            live_ns = 0
        if not live_ns:
            return ticks / CLK_TCK
        return live_ns / 1e9 + max(0, ticks - live_ticks) / CLK_TCK

    def status_kib(self, key: str) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        return -1

    def vmhwm_mib(self) -> float:
        return self.status_kib("VmHWM") / 1024

    def vmrss_mib(self) -> float:
        return self.status_kib("VmRSS") / 1024

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, n: int = 2000) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return self.log.read_text(errors="replace")[-n:]

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                if self.popen.stdin:
                    self.popen.stdin.close()
            except OSError:
                pass
            self.popen.terminate()
            try:
                self.popen.wait(5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def wait_port(port: int, proc: Proc, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}: {proc.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{proc.name} did not listen on {port} within {timeout}s: {proc.log_tail()}")


def start_upstream(core: int | None, prewarm: list[int], delay: float = 0.0) -> Proc:
    cmd = [*pin_prefix(core), sys.executable, str(BENCH / "fake_upstream.py"), "--port", "0"]
    if delay:
        cmd += ["--delay", str(delay)]
    if prewarm:
        cmd += ["--prewarm", ",".join(str(n) for n in prewarm)]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=BENCH)
    line = p.stdout.readline().decode()
    if not line.startswith("PORT "):
        p.kill()
        raise RuntimeError(f"fake upstream failed to start: {line!r}")
    return Proc("fake-upstream", p, int(line.split()[1]))


def start_mitmdump(
    name: str,
    mitmdump: str,
    upstream_port: int,
    script: Path,
    sets: dict[str, str],
    core: int | None,
    workdir: Path,
    env: dict[str, str] | None = None,
) -> Proc:
    port = free_port()
    log = workdir / f"{name}.log"
    cmd = [
        *pin_prefix(core),
        mitmdump,
        "--mode",
        f"reverse:http://127.0.0.1:{upstream_port}",
        "--listen-host",
        "127.0.0.1",
        "--listen-port",
        str(port),
        "--set",
        f"confdir={workdir / 'confdir'}",
        "--set",
        "termlog_verbosity=warn",
        "--set",
        "flow_detail=0",
        "-s",
        str(script),
    ]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    fh = open(log, "wb")  # noqa: SIM115 - closed with the process
    p = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, **(env or {})}
    )
    fh.close()
    proc = Proc(name, p, port, log)
    try:
        wait_port(port, proc)
    except Exception:
        proc.stop()
        raise
    return proc
