"""Hostile recordings (issue 23, item 6) through a real mitmdump in replay mode: a folder holding a good
recording beside ones with an impossible status, a malformed chunk list, bad base64 and a body over
``dragoman_replay_max_mb`` (each refused at start-up, the log naming the file, the rest still replayed),
and ones with CR/LF in header names and values and absurd delays (replayed safely: the bad headers dropped,
the delays clamped). mitmdump keeps running throughout."""

from __future__ import annotations

import copy
import http.client
import json
import time
from pathlib import Path

import pytest

from e2e.conftest import free_port
from e2e.test_record_replay import Mitm

pytestmark = pytest.mark.e2e

GOOD = (
    Path(__file__).resolve().parents[2]
    / "recordings/corpus-anthropic-text/001-anthropic-to-anthropic-claude-sonnet-4-5.json"
)


def _variant(base: dict, prompt: str) -> dict:
    ex = copy.deepcopy(base)
    ex["client_request"]["body"]["json"]["messages"][0]["content"][0]["text"] = prompt
    return ex


def _body(ex: dict) -> dict:
    return ex["client_request"]["body"]["json"]


def _hostile(folder: Path) -> dict[str, dict]:
    base = json.loads(GOOD.read_text())
    made: dict[str, dict] = {"good": _variant(base, "good")}
    made["status"] = _variant(base, "status")
    made["status"]["upstream_response"]["status"] = 99999
    made["chunks"] = _variant(base, "chunks")
    made["chunks"]["upstream_response"]["chunks"] = [[0, 0.0], [400, 0.1], [200, 0.2], [10**9, 0.3]]
    made["b64"] = _variant(base, "b64")
    up = made["b64"]["upstream_response"]
    up["body"] = {"b64": "!!!! not base64 ####"}
    up["chunks"] = [[0, 0.0]]
    made["huge"] = _variant(base, "huge")
    made["huge"]["note"] = "x" * (2 << 20)  # 2 MiB: over dragoman_replay_max_mb=1
    made["crlf"] = _variant(base, "crlf")
    made["crlf"]["upstream_response"]["headers"] += [
        ["x-evil\r\nx-injected-name", "1"],
        ["x-evil-value", "a\r\nx-injected-value: 1"],
        ["x-nul", "a\x00b"],
        ["x-fine", "kept"],
    ]
    made["crlf"]["upstream_response"]["reason"] = "OK\r\nx-injected-reason: 1"
    made["delay"] = _variant(base, "delay")
    up = made["delay"]["upstream_response"]
    up["headers_delay"] = 1e9
    up["chunks"] = [[o, t * 1e7] for o, t in up["chunks"]]
    for name, ex in made.items():
        (folder / f"{name}.json").write_text(json.dumps(ex))
    return made


@pytest.fixture(scope="module")
def replaying(tmp_path_factory):
    work = tmp_path_factory.mktemp("hostile")
    folder = work / "recs"
    folder.mkdir()
    made = _hostile(folder)
    args = [
        "--mode",
        f"reverse:http://127.0.0.1:{free_port()}",
        "--set",
        f"dragoman_replay={folder}",
        "--set",
        "dragoman_replay_speed=1000",  # 30 s clamped delays take 0.03 s; unclamped ones would take days
        "--set",
        "dragoman_replay_max_mb=1",
    ]
    m = Mitm(work, "replay", args)
    yield m, made, folder
    m.stop()


def _post(port: int, body: dict) -> tuple[int, dict[str, str], bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request("POST", "/v1/messages", json.dumps(body), {"content-type": "application/json"})
    r = c.getresponse()
    out = r.read()
    headers = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, headers, out


def test_refused_recordings_are_named_and_the_rest_replays(replaying):
    m, made, folder = replaying
    status, _, out = _post(m.port, _body(made["good"]))
    assert status == 200 and b"message_stop" in out
    log = m.log_path.read_text(errors="replace")
    for name in ("status", "chunks", "b64", "huge"):
        line = next((ln for ln in log.splitlines() if f"{folder / name}.json: refused" in ln), None)
        assert line is not None, (name, log[-4000:])
        status, _, out = _post(m.port, _body(made[name]))
        assert status == 404, (name, status, out[:300])  # not served: no recorded exchange matches it
    assert m.proc.poll() is None


def test_crlf_headers_are_dropped(replaying):
    m, made, folder = replaying
    status, headers, out = _post(m.port, _body(made["crlf"]))
    assert status == 200 and b"message_stop" in out
    assert not any(k.startswith("x-injected") for k in headers), headers
    assert headers.get("x-fine") == "kept"
    assert f"{folder / 'crlf'}.json: 3 header(s) dropped" in m.log_path.read_text(errors="replace")


def test_absurd_delays_are_clamped(replaying):
    m, made, _ = replaying
    t0 = time.monotonic()
    status, _, out = _post(m.port, _body(made["delay"]))
    assert status == 200 and b"message_stop" in out
    assert time.monotonic() - t0 < 15
    assert m.proc.poll() is None
