"""The processes a long-running command starts (mitmdump, the fake upstream): they stop with the command on
Ctrl-C, SIGTERM (a service manager, ``timeout``, an IDE's stop button) and SIGHUP (the terminal went away),
and a port already in use is said in one line before anything starts."""

from __future__ import annotations

import contextlib
import errno
import signal
import socket
import subprocess
from collections.abc import Iterator


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: the command stops as on Ctrl-C (children stopped, then exit)."""


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise ``Stopped`` in the main thread, as Ctrl-C raises ``KeyboardInterrupt``, so the
    ``finally`` blocks stop the children; the previous handlers come back afterwards."""

    def handler(signum: int, _frame: object) -> None:
        raise Stopped(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def port_taken(host: str, port: int) -> bool:
    """Something already listens on ``host:port`` (checked by binding it as a server would, SO_REUSEADDR)."""
    if port == 0:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def stop_child(proc: subprocess.Popen[bytes], timeout: float = 5) -> int:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; the child's exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()
