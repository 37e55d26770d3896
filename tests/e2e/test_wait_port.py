"""The e2e harness's readiness check: a port counts as ready only when the started process itself listens on
it, so a mitmdump that lost its port to another xdist worker's is detected (``PortTaken``) instead of the test
silently talking to the other worker's proxy."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from .conftest import PortTaken
from .conftest import free_port
from .conftest import wait_port

LISTEN = "import socket,sys,time; s=socket.create_server(('127.0.0.1', int(sys.argv[1]))); print('up', flush=True); time.sleep(30)"


def test_a_port_someone_else_listens_on_is_port_taken():
    with socket.create_server(("127.0.0.1", 0)) as other:
        port = other.getsockname()[1]
        idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            with pytest.raises(PortTaken):
                wait_port(port, idle, timeout=5)
        finally:
            idle.kill()
            idle.wait()


def test_the_process_own_listener_is_ready():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", LISTEN, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        wait_port(port, proc, timeout=5)
    finally:
        proc.kill()
        proc.wait()
