"""A listening socket's backlog as the kernel reports it (``ss``: the Send-Q of a LISTEN socket), for the tests of
``dragoman_listen_backlog``; the test skips where iproute2's ``ss`` is missing."""

from __future__ import annotations

import shutil
import subprocess

import pytest


def listen_backlog(port: int) -> int | None:
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed: the backlog cannot be read")
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout.split()
    return int(out[2]) if len(out) > 2 else None


def somaxconn() -> int:
    with open("/proc/sys/net/core/somaxconn") as f:
        return int(f.read())
