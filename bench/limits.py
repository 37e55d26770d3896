"""Memory under hostile sizes (issue 23, items 3(a) 3(b) 3(c) 3(e)): peak RSS of mitmdump per request.

    .venv/bin/python bench/limits.py [--quick] [--cases gzip,declared,sseline,body] [--mitmdump PATH]
                                     [--script PATH]

Each case runs a FRESH mitmdump (reverse mode, Anthropic client, Chat upstream = an in-process fake on
127.0.0.1), warmed up with 3 small requests; ``growth`` = peak RSS (``VmHWM``) after the case's request
minus the peak after the warm-up.

* gzip: a 1 MiB gzip request body that inflates to 1 GiB (a JSON text of zeros); answered 413.
* declared: a 256 MiB body with its Content-Length (beyond the 64 MiB default); answered 413.
* chunked: the same 256 MiB sent chunked (no length up front); answered 413.
* sseline: the upstream streams one 20 MiB SSE data line (beyond the 8 MiB default); the client's stream
  ends with an error event.
* body: a 100 MiB JSON request body (one long text, as a base64 image or PDF would be) translated and
  sent upstream, with ``dragoman_max_body=128m``; answered whole (through the relay). body-stream: the same
  asking for a stream (forwarded by mitmproxy itself). Budget (issue 23): about twice its size.

``--mitmdump``/``--script`` point at another checkout to measure "before" (e.g. /work/main). Numbers are
printed and written to bench/results/limits.json; never asserted (the run exits 0 when it could measure).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import procs  # noqa: E402

from dragoman.demo import FakeUpstream  # noqa: E402
from dragoman.demo import Reply  # noqa: E402
from dragoman.demo import Request  # noqa: E402

BENCH = Path(__file__).parent
SCRIPT = BENCH.parent / "addon" / "dragoman.py"
MIB = 1 << 20
SMALL = {"model": "text", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}


def sse_line(mib: int):
    def answer(request: Request) -> Reply:
        def ev(delta: dict, finish: str | None = None) -> bytes:
            obj = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": request.model}
            obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        big = ev({"content": "x" * (mib * MIB)})
        events = [ev({"role": "assistant", "content": "Hi"})]
        events += [big[i : i + 65536] for i in range(0, len(big), 65536)]  # one HTTP chunk per 64 KiB
        return Reply(events=[*events, ev({}, "stop"), b"data: [DONE]\n\n"])

    return answer


def gzip_bomb(inflated: int) -> bytes:
    """gzip of a valid request whose text is ``inflated`` zeros, compressed piece by piece."""
    head = json.dumps({**SMALL, "messages": [{"role": "user", "content": "@"}]}).encode()
    pre, post = head.split(b"@")
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [z.compress(pre)]
    piece = b"0" * MIB
    for _ in range(inflated // MIB):
        out.append(z.compress(piece))
    out += [z.compress(post), z.flush()]
    return b"".join(out)


def big_body(size: int, stream: bool = False) -> bytes:
    head = json.dumps({**SMALL, "stream": stream, "messages": [{"role": "user", "content": "@"}]}).encode()
    pre, post = head.split(b"@")
    return pre + b"A" * (size - len(pre) - len(post)) + post


def post(port: int, body: bytes, headers: dict[str, str] | None = None, timeout: float = 600) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/messages", body=body, headers={"content-type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException) as e:
        return 0, repr(e).encode()
    finally:
        conn.close()


def post_declared(port: int, size: int, chunked: bool = False) -> tuple[int, bytes]:
    """``size`` bytes with their Content-Length (or chunked), written in 1 MiB pieces (no copy kept)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=600)
    try:
        framing = "transfer-encoding: chunked" if chunked else f"content-length: {size}"
        head = f"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{framing}\r\n\r\n"
        s.sendall(head.encode())
        piece = b"A" * MIB
        sent = 0
        try:
            while sent < size:
                n = min(MIB, size - sent)
                s.sendall(b"%x\r\n%s\r\n" % (n, piece[:n]) if chunked else piece[:n])
                sent += n
            if chunked:
                s.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the proxy answered and closed early
        s.settimeout(600)
        data = b""
        while b"\r\n\r\n" not in data:
            got = s.recv(65536)
            if not got:
                break
            data += got
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
        return status, data[:300]
    finally:
        s.close()


def run_case(name: str, args, up: FakeUpstream, workdir: Path) -> dict:
    sets = {"dragoman_target": "openai-chat", "dragoman_upstream": f"{up.url}/v1", "dragoman_ledger": "off"}
    if name.startswith("body"):
        sets["dragoman_max_body"] = "128m"
    proc = procs.start_mitmdump(f"limits-{name}", args.mitmdump, up.port, Path(args.script), sets, None, workdir)
    rec: dict = {"case": name}
    try:
        for _ in range(3):
            post(proc.port, json.dumps(SMALL).encode())
        rec["warm_mib"] = proc.vmhwm_mib()
        bomb = gzip_bomb(args.gzip_mib * MIB) if name == "gzip" else b""
        t0 = time.monotonic()
        if name == "gzip":
            rec["sent_mib"] = round(len(bomb) / MIB, 2)
            status, data = post(proc.port, bomb, {"content-encoding": "gzip"})
        elif name in ("declared", "chunked"):
            rec["sent_mib"] = args.declared_mib
            status, data = post_declared(proc.port, args.declared_mib * MIB, chunked=name == "chunked")
        elif name == "sseline":
            status, data = post(proc.port, json.dumps({**SMALL, "model": "sseline", "stream": True}).encode())
            rec["error_event"] = b"event: error" in data
        else:  # body: answered whole, through the relay; body-stream: streamed, forwarded by mitmproxy
            body = big_body(args.body_mib * MIB, stream=name == "body-stream")
            rec["sent_mib"] = len(body) / MIB
            status, data = post(proc.port, body)
            del body
        rec["seconds"] = round(time.monotonic() - t0, 2)
        time.sleep(0.5)
        rec["status"] = status
        rec["answer"] = data[:160].decode("utf-8", "replace")
        rec["peak_mib"] = proc.vmhwm_mib()
        rec["growth_mib"] = round(rec["peak_mib"] - rec["warm_mib"], 1)
        rec["alive"] = proc.alive()
    finally:
        proc.stop()
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    ap.add_argument("--cases", default="gzip,declared,chunked,sseline,body,body-stream")
    ap.add_argument("--mitmdump", default=str(Path(sys.executable).parent / "mitmdump"))
    ap.add_argument("--script", default=str(SCRIPT))
    ap.add_argument("--out", default=str(BENCH / "results" / "limits.json"))
    args = ap.parse_args(argv)
    args.gzip_mib, args.declared_mib, args.sse_mib, args.body_mib = (
        (64, 96, 12, 20) if args.quick else (1024, 256, 20, 100)
    )
    results = []
    with FakeUpstream(record=False, scenarios={"sseline": sse_line(args.sse_mib)}) as up:
        with tempfile.TemporaryDirectory(prefix="dragoman-bench-limits-") as tmp:
            for name in args.cases.split(","):
                rec = run_case(name.strip(), args, up, Path(tmp))
                results.append(rec)
                print(
                    f"limits {rec['case']:9s} status {rec.get('status')}  RSS +{rec.get('growth_mib')} MiB "
                    f"(peak {rec.get('peak_mib', 0):.0f} MiB, {rec.get('seconds')} s)  {rec.get('answer', '')[:90]!r}",
                    flush=True,
                )
    sizes = {"gzip": args.gzip_mib, "declared": args.declared_mib, "sseline": args.sse_mib, "body": args.body_mib}
    sizes["body-stream"] = args.body_mib
    sizes["chunked"] = args.declared_mib
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"sizes_mib": sizes, "mitmdump": args.mitmdump, "cases": results}, indent=2))
    for body in (r for r in results if r["case"].startswith("body") and "growth_mib" in r):
        verdict = "PASS" if body["growth_mib"] <= 2.2 * args.body_mib else "OVER"
        print(
            f"budget: a {args.body_mib} MiB body ({body['case']}) costs <= ~2x its size: +{body['growth_mib']} MiB  {verdict}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
