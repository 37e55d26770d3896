"""Unrelated HTTPS traffic through the same explicit proxy reaches its destination unchanged.

A local HTTPS server (self-signed certificate for 127.0.0.1, trusted by mitmproxy through
``ssl_verify_upstream_trusted_ca`` so upstream verification stays on) stands for another provider an app
talks to through the same proxy. Dragoman is on (target anthropic, a configured key), yet the request to
the other host — even on an endpoint path Dragoman knows — is not translated, not re-keyed, and the
configured key never reaches that host.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from .test_proxy_mode import RegularProxy
from .test_proxy_mode import explain

pytestmark = pytest.mark.e2e

UPSTREAM_KEY = "sk-upstream-configured-https"
OTHER_APP_KEY = "Bearer sk-other-app-https"


def self_signed(workdir: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = workdir / "other-host.pem", workdir / "other-host.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class HttpsEcho:
    """Records every request and answers with a fixed JSON body."""

    ANSWER = {"id": "chatcmpl-other", "object": "chat.completion", "note": "from the other provider"}

    def __init__(self, cert: Path, key: Path) -> None:
        self.requests: list[dict] = []
        echo = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _handle(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b""
                echo.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "raw": raw,
                    }
                )
                body = json.dumps(echo.ANSWER).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = _handle
            do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def https_setup(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("proxy-https")
    cert, key = self_signed(workdir)
    echo = HttpsEcho(cert, key)
    proxy = RegularProxy(
        workdir,
        "dragoman_target=anthropic",
        "dragoman_upstream=http://127.0.0.1:9",
        f"dragoman_api_key={UPSTREAM_KEY}",
        f"ssl_verify_upstream_trusted_ca={cert}",
    )
    yield proxy, echo
    proxy.stop()
    echo.stop()


def test_unrelated_https_post_reaches_its_host_unchanged(https_setup):
    proxy, echo = https_setup
    payload = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    status, headers, body = proxy.call(
        "POST", f"{echo.url}/v1/chat/completions", payload, {"authorization": OTHER_APP_KEY, "x-custom": "kept"}
    )
    assert status == 200, explain(proxy)
    assert json.loads(body) == HttpsEcho.ANSWER  # the answer is not translated either
    assert len(echo.requests) == 1, explain(proxy)
    seen = echo.requests[0]
    assert seen["method"] == "POST" and seen["path"] == "/v1/chat/completions"
    assert json.loads(seen["raw"]) == payload
    assert seen["headers"]["authorization"] == OTHER_APP_KEY
    assert seen["headers"]["x-custom"] == "kept"
    # the key configured for the LLM upstream never reaches a host it was not meant for
    assert "x-api-key" not in seen["headers"]
    assert UPSTREAM_KEY not in json.dumps(seen["headers"])
    assert "anthropic-version" not in seen["headers"]


def test_unrelated_https_get_reaches_its_host_unchanged(https_setup):
    proxy, echo = https_setup
    before = len(echo.requests)
    status, _, body = proxy.call("GET", f"{echo.url}/some/page?q=1")
    assert status == 200, explain(proxy)
    assert json.loads(body) == HttpsEcho.ANSWER
    seen = echo.requests[before:]
    assert [(r["method"], r["path"]) for r in seen] == [("GET", "/some/page?q=1")]
