"""The hostile side of the key-destination tests: an "attacker" host on 127.0.0.1 (plain HTTP, or TLS with a
certificate mitmproxy trusts through ``ssl_verify_upstream_trusted_ca``, standing for a host with a publicly
valid certificate) that records every byte it receives; a raw HTTP/1.1 client that talks to a proxy the way a
hostile client would (absolute-form URLs, CONNECT tunnels, a Host header naming an API host the connection
does not go to); and a ``mitmdump`` launcher with any arguments."""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.events
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from .conftest import SCRIPT
from .conftest import free_port
from .conftest import mitmdump_bin
from .conftest import wait_port

#: what the attacker answers every request with (an Anthropic-shaped message, so a translator would accept it)
ANSWER = {
    "id": "msg_attacker",
    "type": "message",
    "role": "assistant",
    "model": "attacker",
    "content": [{"type": "text", "text": "from the attacker"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def attacker_cert(workdir: Path) -> tuple[Path, Path]:
    """A self-signed CA certificate that is also the server certificate for 127.0.0.1 and localhost."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "attacker test CA")])
    now = datetime.datetime.now(datetime.UTC)
    san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(san, False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = workdir / "attacker.pem", workdir / "attacker.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class Attacker:
    """A host no configured key is meant for: keeps every byte it receives, answers each request 200 JSON
    (``answer=False``: never answers)."""

    def __init__(self, cert: tuple[Path, Path] | None = None, answer: bool = True) -> None:
        self.answer = answer
        self.received = bytearray()
        self.heads: list[bytes] = []
        self.lock = threading.Lock()
        self.tls: ssl.SSLContext | None = None
        if cert is not None:
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(str(cert[0]), str(cert[1]))
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"{'https' if cert else 'http'}://127.0.0.1:{self.port}"
        self.authority = f"127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def saw(self, secret: str) -> bool:
        with self.lock:
            return secret.encode() in self.received

    def mark(self) -> int:
        with self.lock:
            return len(self.received)

    def since(self, mark: int) -> bytes:
        with self.lock:
            return bytes(self.received[mark:])

    def stop(self) -> None:
        self.sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            buf = b""
            while data := conn.recv(65536):
                with self.lock:
                    self.received += data
                buf += data
                while self.answer and (end := _request_end(buf)) is not None:
                    with self.lock:
                        self.heads.append(buf[: buf.index(b"\r\n\r\n")])
                    buf = buf[end:]
                    body = json.dumps(ANSWER).encode()
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        + f"content-length: {len(body)}\r\n\r\n".encode()
                        + body
                    )
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()


def _request_end(buf: bytes) -> int | None:
    """Where the first complete request in ``buf`` ends (content-length or chunked), None if incomplete."""
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    head = buf[:head_end].decode("latin-1").lower()
    start = head_end + 4
    if "transfer-encoding: chunked" in head:
        last = buf.find(b"0\r\n\r\n", start)
        return None if last < 0 else last + 5
    length = 0
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip() == "content-length":
            length = int(value.strip() or 0)
    return start + length if len(buf) >= start + length else None


# -- the hostile client ----------------------------------------------------------------------------------


def http_request(method: str, target: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
    if body or method == "POST":
        lines.append(f"content-length: {len(body)}")
    lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def read_all(sock: socket.socket, timeout: float = 20.0) -> bytes:
    sock.settimeout(timeout)
    out = b""
    try:
        while data := sock.recv(65536):
            out += data
    except (TimeoutError, OSError, ssl.SSLError):
        pass
    return out


def send_direct(port: int, raw: bytes) -> bytes:
    """``raw`` to the proxy as is (absolute-form URL, or origin-form in reverse mode)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(raw)
        return read_all(s)


def send_tunnel(port: int, authority: str, raw: bytes, tls: bool = False, sni: str | None = None) -> bytes:
    """CONNECT ``authority`` through the proxy, then ``raw`` inside the tunnel (TLS with SNI ``sni``:
    the client does not check mitmproxy's certificate)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        s.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            data = s.recv(4096)
            if not data:
                return head
            head += data
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            return head
        conn: socket.socket = s
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            conn = ctx.wrap_socket(s, server_hostname=sni)
        conn.sendall(raw)
        return read_all(conn)
    finally:
        s.close()


def status_of(answer: bytes) -> int:
    first = answer.split(b"\r\n", 1)[0].split(b" ")
    return int(first[1]) if len(first) > 1 and first[1].isdigit() else 0


# -- mitmdump ---------------------------------------------------------------------------------------------


class Mitmdump:
    """``mitmdump -s addon/dragoman.py --listen-host 127.0.0.1 -p PORT ARGS...``; output in ``log_path``."""

    def __init__(self, workdir: Path, *args: str) -> None:
        self.port = free_port()
        self.confdir = workdir / f"confdir-{self.port}"
        self.log_path = workdir / f"mitmdump-{self.port}.log"
        argv = [mitmdump_bin(), "-s", str(SCRIPT), "--listen-host", "127.0.0.1", "-p", str(self.port)]
        argv += ["--set", f"confdir={self.confdir}", *args]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            wait_port(self.port, self.proc)
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"mitmdump failed to start:\n{self.log()}") from None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._log.close()


def wait_for(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def send_tunnel_h2(port: int, authority: str, sni: str, headers: list[tuple[str, str]], body: bytes = b"") -> int:
    """CONNECT ``authority``, TLS with ALPN h2 and SNI ``sni``, one HTTP/2 request (``headers`` with the
    pseudo-headers, ``:authority`` as the client likes); returns the answer's status (0: none)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        s.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            data = s.recv(4096)
            if not data:
                return 0
            head += data
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        tls = ctx.wrap_socket(s, server_hostname=sni)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [*headers, ("content-length", str(len(body)))])
        conn.send_data(sid, body, end_stream=True)
        tls.sendall(conn.data_to_send())
        status = 0
        while data := tls.recv(65536):
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    status = int(dict(ev.headers)[":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                    return status
            tls.sendall(conn.data_to_send())
        return status
    except (OSError, ssl.SSLError):
        return 0
    finally:
        s.close()
