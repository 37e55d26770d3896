"""The client side of the interception tests, run inside a client network namespace (``ip netns exec``).

``python ns_client.py --serve``: one JSON request per stdin line, one JSON result per stdout line. Requests:
  {"op": "sdk", ...}           one official-SDK turn (the scenario of tests/e2e/sdk_client.py; base_url is the
                               official host: https://api.anthropic.com or https://api.openai.com/v1)
  {"op": "count_tokens", "api_key", "test_id"}     anthropic SDK: messages.count_tokens (+ the estimate header)
  {"op": "models", "sdk": "anthropic"|"openai", "api_key"}   the SDK's models.list()
  {"op": "genai", "api_key", "test_id"}    google-genai SDK: one streamed and one whole generateContent to its
                               default host (generativelanguage.googleapis.com); skipped without the SDK
  {"op": "https", "url", "method", "body", "headers"}    a plain HTTPS request (http.client): status, headers,
                               body, the SHA-256 and issuer of the certificate the server presented;
                               "connect" (address) and "sni" send it elsewhere than the URL names, an
                               http:// URL goes without TLS
Trust comes from SSL_CERT_FILE (httpx and ssl.create_default_context read it); no proxy variable is set:
the namespace's routing and firewall, not the client, send the traffic to mitmdump.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import ssl
import sys
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

import sdk_client  # noqa: E402


def count_tokens(req: dict) -> dict:
    import anthropic

    client = anthropic.Anthropic(api_key=req["api_key"], max_retries=0, timeout=30)
    assert str(client.base_url).startswith("https://api.anthropic.com")
    raw = client.messages.with_raw_response.count_tokens(
        model=req.get("model", "claude-test"),
        messages=[{"role": "user", "content": req.get("prompt", "hello")}],
        extra_headers={"x-test-id": req.get("test_id", "none")},
    )
    return {"ok": True, "input_tokens": raw.parse().input_tokens, "estimate": raw.headers.get("x-dragoman-estimate")}


def genai(req: dict) -> dict:
    try:
        from google import genai as g
        from google.genai import types
    except ImportError:
        return {"ok": False, "error_type": "ImportError", "message": "google-genai is not installed"}
    opts = types.HttpOptions(headers={"x-test-id": req["test_id"]}, timeout=30_000)
    client = g.Client(api_key=req["api_key"], http_options=opts)
    base = str(client._api_client._http_options.base_url)  # noqa: SLF001 - which host the SDK talks to
    chunks = list(client.models.generate_content_stream(model="gemini-test", contents="Say hello."))
    whole = client.models.generate_content(model="gemini-test", contents="Say hello.")
    return {
        "ok": True,
        "base_url": base,
        "stream_text": "".join(c.text or "" for c in chunks),
        "chunks": len(chunks),
        "text": whole.text,
    }


def models(req: dict) -> dict:
    if req["sdk"] == "anthropic":
        import anthropic

        client = anthropic.Anthropic(api_key=req["api_key"], max_retries=0, timeout=30)
    else:
        import openai

        client = openai.OpenAI(api_key=req["api_key"], max_retries=0, timeout=30)
    return {"ok": True, "base_url": str(client.base_url), "ids": [m.id for m in client.models.list().data]}


class _SniConnection(http.client.HTTPSConnection):
    """HTTPS to one address with another name in the TLS SNI (and certificate check)."""

    def __init__(self, host: str, port: int, sni: str, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=20, context=context)
        self.sni = sni

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.sni)  # type: ignore[attr-defined]


def _connection(req: dict) -> http.client.HTTPConnection:
    """``url``'s scheme, host and port, unless ``connect`` (an address) and ``sni`` say otherwise: an
    attacker's client connects to one host while naming another (``headers`` may carry its own Host)."""
    parts = urlsplit(req["url"])
    host = req.get("connect") or parts.hostname
    if parts.scheme == "http":
        return http.client.HTTPConnection(host, parts.port or 80, timeout=20)
    context = ssl.create_default_context()
    if req.get("sni"):
        return _SniConnection(host, parts.port or 443, req["sni"], context)
    return http.client.HTTPSConnection(host, parts.port or 443, timeout=20, context=context)


def https(req: dict) -> dict:
    """A plain HTTP(S) request (``http://`` URLs too); see ``_connection`` for ``connect`` and ``sni``."""
    parts = urlsplit(req["url"])
    conn = _connection(req)
    try:
        body = json.dumps(req["body"]).encode() if req.get("body") is not None else None
        headers = dict(req.get("headers") or {})
        if body is not None:
            headers["content-type"] = "application/json"
        conn.request(req.get("method", "GET"), parts.path + (f"?{parts.query}" if parts.query else ""), body, headers)
        resp = conn.getresponse()
        data = resp.read()
        tls = isinstance(conn.sock, ssl.SSLSocket)
        cert = conn.sock.getpeercert(binary_form=True) if tls else None
        info = (conn.sock.getpeercert() or {}) if tls else {}
        issuer = {k: v for rdn in info.get("issuer", ()) for k, v in rdn}
        return {
            "ok": True,
            "status": resp.status,
            "headers": {k.lower(): v for k, v in resp.getheaders()},
            "body": data.decode(errors="replace"),
            "cert_sha256": hashlib.sha256(cert).hexdigest() if cert else None,
            "cert_issuer": issuer.get("organizationName") or issuer.get("commonName"),
        }
    finally:
        conn.close()


def handle(req: dict) -> dict:
    op = req.pop("op")
    if op == "sdk":
        return sdk_client.run(req)
    try:
        return {"count_tokens": count_tokens, "models": models, "https": https, "genai": genai}[op](req)
    except Exception as e:  # noqa: BLE001 - every failure becomes a JSON result
        return {"ok": False, "error_type": type(e).__name__, "message": str(e)[:2000]}


def main() -> None:
    import anthropic  # noqa: F401 - pay the import once, before "ready"
    import openai  # noqa: F401

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(handle(json.loads(line)), default=str), flush=True)


if __name__ == "__main__":
    main()
