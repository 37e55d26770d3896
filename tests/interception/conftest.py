"""Fixtures of the interception tests: the fake LLM upstream and an unrelated HTTPS server on the host side of
a lab (``netlab``), mitmdump inside or next to it, and SDK clients inside the client namespaces.

The official hosts (api.anthropic.com, api.openai.com, Google's two) resolve, inside the lab only, to an address that is
blackholed on the host; the unrelated host (``unrelated.example``) to an address of the host where the
HTTPS server listens. Nothing leaves the machine.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import ssl
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from dragoman import demo as fake_llm  # the repo's fake LLM upstream: the one line to change when it moves

from . import netlab

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "addon" / "dragoman.py"
NS_CLIENT = Path(__file__).with_name("ns_client.py")

API_HOSTS = ("api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com")
OTHER_HOST = "unrelated.example"
CLIENT_KEY = "sk-client-key-must-not-travel"
UPSTREAM_KEY = "sk-configured-upstream-key"
OTHER_APP_KEY = "Bearer sk-other-app"


def start_fake_upstream(host: str):
    """The repo's fake LLM upstream, listening on ``host``."""
    return fake_llm.FakeUpstream(host=host).start()


def mitmdump_bin() -> str:
    exe = Path(sys.executable).parent / "mitmdump"
    if not exe.exists():
        pytest.skip(f"no mitmdump next to {sys.executable}")
    return str(exe)


def client_python() -> str:
    return os.environ.get("DRAGOMAN_CLIENT_PYTHON") or sys.executable


def lab_or_skip(tools: tuple[str, ...]) -> None:
    reason = netlab.missing(tools)
    if reason:
        pytest.skip(reason)


# -- the unrelated HTTPS host ---------------------------------------------------------------------------------


def self_signed(workdir: Path, name: str) -> tuple[Path, Path, str]:
    """A self-signed certificate for ``name``: (cert path, key path, SHA-256 of its DER)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)  # noqa: UP017 - Python 3.11 too
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = workdir / f"{name}.pem", workdir / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path, hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


class HttpsEcho:
    """Another provider's HTTPS server on ``host``:443 (``tls=False``: plain HTTP on port 80): records every
    request, answers a fixed JSON body. It stands for an attacker's host too: whatever reaches it is seen."""

    ANSWER = {"id": "chatcmpl-other", "object": "chat.completion", "note": "from the unrelated host"}

    def __init__(self, host: str, workdir: Path, tls: bool = True) -> None:
        if tls:
            self.cert, key, self.cert_sha256 = self_signed(workdir, OTHER_HOST)
        self.requests: list[dict] = []
        echo = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _handle(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                echo.requests.append({"method": self.command, "path": self.path, "headers": headers, "raw": raw})
                body = json.dumps(echo.ANSWER).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = _handle
            do_POST = _handle

        self.server = ThreadingHTTPServer((host, 443 if tls else 80), Handler)
        self.server.daemon_threads = True
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(self.cert), str(key))
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- mitmdump and the clients ----------------------------------------------------------------------------------


class Mitmdump:
    """A mitmdump with the addon, started through the lab (inside ``ns`` / as ``user`` when given)."""

    def __init__(
        self,
        lab: netlab.Lab,
        args: list[str],
        confdir: Path,
        ns: str | None = None,
        user: tuple[int, int] | None = None,
    ) -> None:
        self.confdir = confdir
        self.ca = confdir / "mitmproxy-ca-cert.pem"
        self.log_path = lab.workdir / f"mitmdump-{uuid.uuid4().hex[:8]}.log"
        argv = [mitmdump_bin(), "-s", str(SCRIPT), "--set", f"confdir={confdir}", "--set", "termlog_verbosity=debug"]
        self.proc = lab.spawn(argv + args, ns=ns, log=self.log_path, user=user, cwd=lab.workdir)

    def wait_ready(self) -> Mitmdump:
        try:
            netlab.wait_for(lambda: "listening at" in self.log(), "mitmdump listening", 60, self.proc)
            netlab.wait_for(self.ca.exists, "mitmdump's CA", 10, self.proc)
        except netlab.LabError as e:
            raise netlab.LabError(f"{e}\n---- mitmdump log ----\n{self.log()}") from None
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def explain(self) -> str:
        return f"\n---- mitmdump log (tail) ----\n{self.log()[-6000:]}"


class NsClient:
    """``ns_client.py`` inside a client namespace, on the SDK client interpreter; trusts ``cafile`` (read at each
    call, so it may be written after the start)."""

    def __init__(self, lab: netlab.Lab, ns: str, cafile: Path) -> None:
        python = client_python()
        env = {
            k: v
            for k, v in os.environ.items()
            if "proxy" not in k.lower() and not k.endswith(("_BASE_URL", "_API_KEY"))
        }
        env["SSL_CERT_FILE"] = str(cafile)
        self.ns = ns
        self.python = python
        self.proc = lab.spawn([python, str(NS_CLIENT)], ns=ns, env=env, pipes=True)

    def wait_ready(self) -> NsClient:
        """The SDK imports take seconds on a loaded machine: start every process first, then wait."""
        python, ns = self.python, self.ns
        assert self.proc.stdout is not None and self.proc.stderr is not None
        if not self.proc.stdout.readline().strip():
            err = self.proc.stderr.read().decode(errors="replace")
            if "No module named" in err:
                pytest.skip(
                    f"the SDK client interpreter {python} lacks the anthropic/openai SDKs; set DRAGOMAN_CLIENT_PYTHON"
                )
            raise netlab.LabError(f"the client in {ns} did not start:\n{err[-4000:]}")
        return self

    def call(self, req: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the client in {self.ns} died:\n{self.proc.stderr.read().decode()[-4000:]}")
        return json.loads(line)

    def turn(self, sdk: str, mode: str, api_key: str = CLIENT_KEY) -> tuple[dict, str]:
        """One official-SDK turn against the official host: (result, test id sent as x-test-id)."""
        test_id = uuid.uuid4().hex
        base = "https://api.anthropic.com" if sdk == "anthropic" else "https://api.openai.com/v1"
        sc = {"op": "sdk", "sdk": sdk, "base_url": base, "mode": mode, "scenario": "text", "test_id": test_id}
        return self.call({**sc, "api_key": api_key}), test_id


def hosts_map(lab: netlab.Lab) -> dict[str, str]:
    return {**{h: lab.api_addr for h in API_HOSTS}, OTHER_HOST: lab.other_host}


def ca_bundle(bundle: Path, *pems: Path) -> Path:
    """The clients' trust store: mitmproxy's CA (installed system-wide in the recipe) plus the unrelated host's
    certificate (standing for the public roots)."""
    bundle.write_text("".join(p.read_text() for p in pems))
    return bundle


def upstream_seen(fake, test_id: str) -> list:
    return [r for r in list(fake.requests) if r.headers.get("x-test-id") == test_id]


def server_connects(log: str, addr: str) -> list[str]:
    """mitmdump's log lines about connecting to ``addr`` (the official hosts' lab address: never dialed)."""
    return [line for line in log.splitlines() if re.search(rf"server connect .*{re.escape(addr)}", line)]


# -- the checks both modes share -------------------------------------------------------------------------------

SDKS = ("anthropic", "openai-chat", "openai-responses")
MODES = ("create", "stream")


def check_turn(client: NsClient, fake, mitm: Mitmdump, lab: netlab.Lab, sdk: str, mode: str, path: str) -> None:
    """One SDK turn to the official host arrives at the fake upstream (``path``), translated, with the
    configured key instead of the client's, and comes back as the fake's text; the official host is never dialed."""
    result, test_id = client.turn(sdk, mode)
    assert result["ok"], f"{result}{mitm.explain()}"
    assert result["text"] == fake_llm.TEXT
    assert (result["first_delta_s"] is not None) == (mode == "stream")  # streamed text arrived as deltas
    seen = upstream_seen(fake, test_id)
    assert [r.path for r in seen] == [path], mitm.explain()
    headers, raw = seen[0].headers, seen[0].raw.decode(errors="replace")
    assert headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert CLIENT_KEY not in json.dumps(headers) and CLIENT_KEY not in raw
    assert "x-api-key" not in headers
    if sdk == "anthropic":
        assert seen[0].body["model"] == "gpt-fake"  # the model map applied
    assert server_connects(mitm.log(), lab.api_addr) == []


def check_count_tokens(client: NsClient, fake, mitm: Mitmdump) -> None:
    test_id = uuid.uuid4().hex
    result = client.call({"op": "count_tokens", "api_key": CLIENT_KEY, "test_id": test_id, "prompt": "hello " * 50})
    assert result["ok"], f"{result}{mitm.explain()}"
    assert 40 < result["input_tokens"] < 200 and result["estimate"] == "true"
    assert upstream_seen(fake, test_id) == []  # estimated locally: a Chat/Responses upstream has no such endpoint


def check_models(client: NsClient, mitm: Mitmdump, sdk: str) -> None:
    result = client.call({"op": "models", "sdk": sdk, "api_key": CLIENT_KEY})
    assert result["ok"], f"{result}{mitm.explain()}"
    official = "https://api.anthropic.com" if sdk == "anthropic" else "https://api.openai.com/v1"
    assert result["base_url"].rstrip("/") == official
    assert result["ids"] == ["claude-test", "gpt-fake"]  # the model map's names (the fake has no model list)


def check_unrelated_host(client: NsClient, echo: HttpsEcho, mitm: Mitmdump) -> None:
    """HTTPS to another host goes through the redirect, yet mitmdump only tunnels it: the client sees the host's
    own certificate, the host sees the request exactly as sent, and no configured key reaches it."""
    before = len(echo.requests)
    payload = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    result = client.call(
        {
            "op": "https",
            "url": f"https://{OTHER_HOST}/v1/chat/completions?x=1",
            "method": "POST",
            "body": payload,
            "headers": {"authorization": OTHER_APP_KEY, "x-custom": "kept"},
        }
    )
    assert result["ok"], f"{result}{mitm.explain()}"
    assert result["status"] == 200 and json.loads(result["body"]) == HttpsEcho.ANSWER
    assert result["cert_sha256"] == echo.cert_sha256  # not decrypted: the host's own certificate
    seen = echo.requests[before:]
    assert len(seen) == 1, mitm.explain()
    assert (seen[0]["method"], seen[0]["path"]) == ("POST", "/v1/chat/completions?x=1")
    assert json.loads(seen[0]["raw"]) == payload
    assert seen[0]["headers"]["authorization"] == OTHER_APP_KEY and seen[0]["headers"]["x-custom"] == "kept"
    assert UPSTREAM_KEY not in json.dumps(seen[0]["headers"]) and "x-api-key" not in seen[0]["headers"]


def check_attacker_never_gets_the_key(
    client: NsClient, echo: HttpsEcho, plain_echo: HttpsEcho | None, fake, mitm: Mitmdump, lab: netlab.Lab
) -> None:
    """A client that connects to another host (the echo stands for an attacker's) while naming an official host
    in its Host header, or in its TLS SNI, never makes Dragoman send the configured key there: to the attacker's
    name over TLS and to its address over plain HTTP the request passes untouched (the attacker sees only what
    the client wrote); with the official name in the SNI, the connection is the official host's (the name is
    what the certificate vouches for) and goes to the configured upstream, never to the attacker's address.
    ``plain_echo`` None: no plain HTTP case (a client whose port 80 the lab does not route)."""
    payload = {"model": "claude-test", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    official = {"host": "api.anthropic.com", "x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}
    cases = {"tls to the attacker's name": ({"url": f"https://{OTHER_HOST}/v1/messages"}, echo)}
    if plain_echo is not None:
        cases["plain http to the attacker's address"] = ({"url": f"http://{lab.other_host}/v1/messages"}, plain_echo)
    for case, (target, seen_by) in cases.items():
        before, test_id = len(seen_by.requests), uuid.uuid4().hex
        headers = {**official, "x-test-id": test_id}
        result = client.call({"op": "https", **target, "method": "POST", "body": payload, "headers": headers})
        assert result["ok"], f"{case}: {result}{mitm.explain()}"
        assert result["status"] == 200 and json.loads(result["body"]) == HttpsEcho.ANSWER, case  # not translated
        seen = seen_by.requests[before:]
        assert len(seen) == 1 and seen[0]["path"] == "/v1/messages", case
        assert seen[0]["headers"]["x-api-key"] == CLIENT_KEY, case  # what the client wrote, nothing more
        assert json.loads(seen[0]["raw"]) == payload, case
        assert UPSTREAM_KEY not in json.dumps(seen[0]["headers"]) + seen[0]["raw"].decode(), case
        assert upstream_seen(fake, test_id) == [], case

    others = [echo] if plain_echo is None else [echo, plain_echo]
    before, test_id = [len(e.requests) for e in others], uuid.uuid4().hex
    target = {"url": "https://api.anthropic.com/v1/messages", "connect": lab.other_host, "sni": "api.anthropic.com"}
    headers = {**official, "x-test-id": test_id}
    result = client.call({"op": "https", **target, "method": "POST", "body": payload, "headers": headers})
    assert result["ok"] and result["status"] == 200, f"{result}{mitm.explain()}"
    assert result["cert_issuer"] == "mitmproxy"
    assert [len(e.requests) for e in others] == before  # the attacker's address got nothing
    seen = upstream_seen(fake, test_id)
    assert len(seen) == 1 and seen[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the configured one
    every = json.dumps([r["headers"] for e in others for r in e.requests])
    assert UPSTREAM_KEY not in every


GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "Say hello."}]}]}


def _gemini_upstream_saw(fake, test_id: str, path: str, secret: str, mitm: Mitmdump, lab: netlab.Lab) -> None:
    seen = upstream_seen(fake, test_id)
    assert [r.path for r in seen] == [path], mitm.explain()
    headers, raw = seen[0].headers, seen[0].raw.decode(errors="replace")
    assert headers["authorization"] == f"Bearer {UPSTREAM_KEY}" and "x-goog-api-key" not in headers
    assert secret not in json.dumps(headers) and secret not in raw
    assert server_connects(mitm.log(), lab.api_addr) == []


def _sse(body: str) -> list[dict]:
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


def _text(responses: list[dict]) -> str:
    return "".join(p.get("text", "") for r in responses for p in r["candidates"][0]["content"]["parts"])


def check_gemini_turns(client: NsClient, fake, mitm: Mitmdump, lab: netlab.Lab, path: str) -> None:
    """Gemini's API host (a raw stream) and Code Assist's (Gemini CLI signed in with Google: the request wrapped
    as ``{model, project, request}``, each answer as ``{"response": ...}``) are answered from the fake upstream
    (``path``) with the configured key; neither Google host is dialed."""
    test_id = uuid.uuid4().hex
    url = "https://generativelanguage.googleapis.com/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    headers = {"x-goog-api-key": CLIENT_KEY, "x-test-id": test_id}
    result = client.call({"op": "https", "url": url, "method": "POST", "body": GEMINI_BODY, "headers": headers})
    assert result["ok"] and result["status"] == 200, f"{result}{mitm.explain()}"
    assert result["cert_issuer"] == "mitmproxy" and result["headers"]["content-type"].startswith("text/event-stream")
    events = _sse(result["body"])
    assert len(events) > 2 and _text(events) == fake_llm.TEXT
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"
    _gemini_upstream_saw(fake, test_id, path, CLIENT_KEY, mitm, lab)

    test_id, token = uuid.uuid4().hex, "ya29.oauth-token-must-not-travel"
    wrapped = {"model": "gemini-test", "project": "proj-1", "user_prompt_id": "p1", "request": GEMINI_BODY}
    url = "https://cloudcode-pa.googleapis.com/v1internal:streamGenerateContent?alt=sse"
    headers = {"authorization": f"Bearer {token}", "x-test-id": test_id}
    result = client.call({"op": "https", "url": url, "method": "POST", "body": wrapped, "headers": headers})
    assert result["ok"] and result["status"] == 200, f"{result}{mitm.explain()}"
    answers = _sse(result["body"])
    assert answers and all(list(a) == ["response"] for a in answers), answers
    assert _text([a["response"] for a in answers]) == fake_llm.TEXT
    assert answers[-1]["response"]["candidates"][0]["finishReason"] == "STOP"
    _gemini_upstream_saw(fake, test_id, path, token, mitm, lab)


def check_genai_sdk(client: NsClient, fake, mitm: Mitmdump, lab: netlab.Lab, path: str) -> None:
    """The google-genai SDK on its default host, with nothing but the CA trusted: streamed and whole turns."""
    test_id = uuid.uuid4().hex
    result = client.call({"op": "genai", "api_key": CLIENT_KEY, "test_id": test_id})
    if result.get("error_type") == "ImportError":
        pytest.skip("the SDK client interpreter lacks google-genai")
    assert result["ok"], f"{result}{mitm.explain()}"
    assert "generativelanguage.googleapis.com" in result["base_url"]
    assert result["stream_text"] == fake_llm.TEXT and result["chunks"] > 2 and result["text"] == fake_llm.TEXT
    seen = upstream_seen(fake, test_id)
    assert [r.path for r in seen] == [path, path], mitm.explain()
    assert all(r.headers["authorization"] == f"Bearer {UPSTREAM_KEY}" for r in seen)
    assert CLIENT_KEY not in json.dumps([r.headers for r in seen])
    assert server_connects(mitm.log(), lab.api_addr) == []


def check_official_host_decrypted(client: NsClient, mitm: Mitmdump) -> None:
    """The official host is decrypted by mitmproxy (its CA signs the certificate) and answered by Dragoman
    (the HEAD probe), without a connection to the real host."""
    result = client.call({"op": "https", "url": "https://api.anthropic.com/", "method": "HEAD"})
    assert result["ok"], f"{result}{mitm.explain()}"
    assert result["status"] == 200 and result["cert_issuer"] == "mitmproxy"
