"""``python -m dragoman inspect``: golden output over the shipped recordings (table, JSON, one exchange in
full), a mitmproxy flow file written by a translated flow, and damaged files named with what is wrong.

Regenerate the golden files after a deliberate change with ``DRAGOMAN_GOLDEN=update`` and review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dragoman.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "recordings"
GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(autouse=True)
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # relative paths in the output, as a user typing ``inspect recordings`` sees


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["inspect", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("DRAGOMAN_GOLDEN") == "update":
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs; DRAGOMAN_GOLDEN=update rewrites it"


def test_table_over_the_shipped_recordings(capsys):
    code, out, err = run(capsys, "recordings")
    assert code == 0 and err == ""
    assert all(len(line) <= 80 for line in out.splitlines())
    assert len(out.splitlines()) == 1 + len(list(RECORDINGS.rglob("0*.json")))
    check_golden("inspect-recordings.txt", out)


def test_json_over_the_shipped_recordings(capsys):
    code, out, _ = run(capsys, "recordings", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["index"] for r in rows] == list(range(1, len(rows) + 1))
    tools = [r for r in rows if r["stop"] == "tool_use"]
    assert tools and all(r["output_tokens"] for r in tools)
    check_golden("inspect-recordings.json", out)


@pytest.mark.parametrize("n", [12, 15, 19])
def test_one_exchange_in_full(capsys, n):
    code, out, _ = run(capsys, "recordings", "-e", str(n))
    assert code == 0
    assert all(len(line) <= 80 for line in out.splitlines() if not line.startswith("  file: "))
    check_golden(f"inspect-exchange-{n}.txt", out)


def test_one_exchange_two_sides_stacked_and_side_by_side(capsys):
    """Exchange 15 (a Chat stream broken mid-way, translated for an Anthropic client): the Anthropic side
    reports usage 0/0 where the Chat upstream reported none, a difference marked in both layouts."""
    _, narrow, _ = run(capsys, "recordings", "-e", "15")
    assert "the answer on both sides (!= marks where they differ: usage):" in narrow
    assert "!= usage:\n     upstream sent (openai-chat): none\n     client got (anthropic): in 0, out 0\n" in narrow
    assert "   text: Hello from\n" in narrow  # a row both sides agree on is shown once
    code, wide, _ = run(capsys, "recordings", "-e", "15", "--width", "120")
    assert code == 0 and all(len(line) <= 120 for line in wide.splitlines() if not line.startswith("  file: "))
    rows = {line[3:15].strip(): line for line in wide.splitlines() if line[3:15].strip() in ("text", "usage")}
    assert rows["text"].startswith("   ") and rows["text"][15:].split(" | ") == ["Hello from".ljust(51), "Hello from"]
    assert rows["usage"].startswith("!= ") and [v.strip() for v in rows["usage"][15:].split(" | ")] == [
        "none",
        "in 0, out 0",
    ]
    check_golden("inspect-exchange-15-wide.txt", wide)


def test_one_exchange_as_json_has_both_sides_and_the_report(capsys):
    code, out, _ = run(capsys, str(RECORDINGS), "-e", "12", "--json")
    d = json.loads(out)
    assert code == 0
    calls = d["client_answer"]["tool_calls"]
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "c"}),
        ("get_time", {"tz": "Asia/Tokyo"}),
    ]
    assert d["upstream_answer"]["protocol"] == "openai-chat" and d["client_answer"]["protocol"] == "anthropic"
    assert d["report"] == []


def test_damaged_files_are_named_with_what_is_wrong(capsys, tmp_path):
    good = next(RECORDINGS.rglob("001-*.json"))
    (tmp_path / "001-good.json").write_bytes(good.read_bytes())
    (tmp_path / "002-cut.json").write_bytes(good.read_bytes()[:300])
    broken = json.loads(good.read_text())
    broken["client_request"] = "not a request"
    (tmp_path / "003-wrong.json").write_text(json.dumps(broken))
    (tmp_path / "004-junk.flow").write_bytes(b"\x00\x01 not a flow file")
    code, out, err = run(capsys, str(tmp_path))
    assert code == 1
    assert len(out.splitlines()) == 2  # the header and the one good exchange
    lines = err.splitlines()
    assert len(lines) == 3, err
    assert "002-cut.json: invalid JSON (" in lines[0]
    assert "003-wrong.json: client_request: " in lines[1]
    assert "004-junk.flow: not a mitmproxy flow file (" in lines[2]
    code, _, err = run(capsys, str(tmp_path / "nowhere"))
    assert code == 2 and "does not exist" in err
    code, _, err = run(capsys, str(tmp_path), "-e", "9")
    assert code == 2 and "no exchange 9" in err


def test_a_flow_file_written_by_a_translated_flow(capsys, tmp_path):
    from mitmproxy import io as mio
    from mitmproxy.test import taddons

    from dragoman import demo as fu
    from dragoman.mitm.translate_addon import Translate
    from mitm.test_lossy_flow import LOSSY_BODY
    from mitm.test_lossy_flow import whole

    addon = Translate()
    with taddons.context(addon) as tctx:
        reply = fu.chat_reply("tools", "gpt-x", False, False).json_body
        f = whole(tctx, addon, "anthropic", "openai-chat", LOSSY_BODY, reply)
    path = tmp_path / "flows"
    with path.open("wb") as fh:
        mio.FlowWriter(fh).add(f)
    code, out, err = run(capsys, str(path))
    assert code == 0 and err == ""
    (row,) = out.splitlines()[1:]
    assert "anth>chat" in row and row.split()[-1] == "2"
    code, out, _ = run(capsys, str(path), "-e", "1")
    assert "top_k: dropped, the target protocol has no top_k sampling" in out
    assert "client got (anthropic):" in out and "tool call get_weather" in out
