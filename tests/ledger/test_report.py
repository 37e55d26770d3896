"""``python -m dragoman usage``: golden table and JSON from a shipped ledger file, the same table from Redis,
clear messages for an empty or missing ledger and for a bad ``--since``/``--by``.

Regenerate the shipped file and the golden outputs (then review the diff):
``PYTHONPATH=tests .venv/bin/python -m ledger.test_report``"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from dragoman import cli
from dragoman.ledger import RedisLedger
from dragoman.ledger import SQLiteLedger
from dragoman.ledger.report import parse_by
from dragoman.ledger.report import parse_since

from .records import DAY1
from .records import mixed_records
from .records import reference

DATA = Path(__file__).parent / "data"
SHIPPED = DATA / "usage-v1.sqlite3"  # made from records.mixed_records() by the regeneration above
CASES = {
    "usage.txt": [],
    "usage-day-client.txt": ["--by", "day,client", "--since", "2026-11-02"],
    "usage-total.txt": ["--by", ""],
    "usage.json": ["--json", "--by", "client,route", "--since", "2026-11-02T06:00"],
}
PLACEHOLDER = "<LEDGER>"


def run_usage(args: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(["usage", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """The shipped ledger, copied (a WAL reader may create side files next to it)."""
    path = tmp_path / "usage.sqlite3"
    shutil.copyfile(SHIPPED, path)
    return path


def test_the_shipped_ledger_holds_the_records(shipped):
    ledger = SQLiteLedger(shipped, readonly=True)
    records = mixed_records()
    for group_by in [("client", "upstream", "model"), ("day", "client_model"), ()]:
        assert ledger.summary(group_by=group_by) == reference(records, group_by)


@pytest.mark.parametrize("name", list(CASES))
def test_usage_output_is_golden(shipped, capsys, name):
    code, out, err = run_usage(["--ledger", str(shipped), *CASES[name]], capsys)
    assert (code, err) == (0, "")
    assert out.replace(str(shipped), PLACEHOLDER) == (DATA / name).read_text(encoding="utf-8")


def test_json_totals_add_up(shipped, capsys):
    _, out, _ = run_usage(["--ledger", str(shipped), "--json", "--by", "client,day"], capsys)
    doc = json.loads(out)
    assert doc["group_by"] == ["client", "day"] and doc["since"] is None
    for metric, value in doc["total"].items():
        assert value == sum(row[metric] for row in doc["rows"])
    assert doc["total"]["requests"] == 60


def test_redis_prints_the_same_table(redis_url, capsys):
    ledger = RedisLedger(redis_url, prefix="dragoman:usage")  # the CLI reads the default prefix
    try:
        ledger._client.flushdb()
        for r in mixed_records():
            ledger.add(r)
        ledger.flush()
        code, out, err = run_usage(["--ledger", redis_url, *CASES["usage-day-client.txt"]], capsys)
    finally:
        ledger._client.flushdb()
        ledger.close()
    assert (code, err) == (0, "")
    golden = (DATA / "usage-day-client.txt").read_text(encoding="utf-8")
    # since is a midnight, so whole UTC days cut at the same place; only the heading says so
    heading = golden.splitlines()[0].replace("2026-11-02 00:00 UTC", "2026-11-02 00:00 UTC (whole UTC days)")
    assert out.splitlines() == [heading.replace(PLACEHOLDER, redis_url), *golden.splitlines()[1:]]


def test_empty_ledger_says_so(tmp_path, capsys):
    path = tmp_path / "usage.sqlite3"
    SQLiteLedger(path).close()
    code, out, _ = run_usage(["--ledger", str(path), "--since", "2026-11-01"], capsys)
    assert code == 0
    assert (
        out
        == f"Dragoman usage since 2026-11-01 00:00 UTC, by client, upstream, model (ledger {path})\nNo requests recorded.\n"
    )
    code, out, _ = run_usage(["--ledger", str(path), "--json"], capsys)
    doc = json.loads(out)
    assert (code, doc["rows"], doc["total"]["requests"]) == (0, [], 0)


def test_missing_ledger_is_no_usage_yet(tmp_path, capsys, monkeypatch):
    """No ledger yet (issue 29, 6): exit 0; the table form says so on one line, naming where it looked."""
    missing = tmp_path / "nowhere" / "usage.sqlite3"
    code, out, err = run_usage(["--ledger", str(missing)], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("no usage recorded yet (no ledger at ") and out.count("\n") == 1
    assert str(missing) in out
    assert not missing.parent.exists()  # looking does not create it
    monkeypatch.setenv("DRAGOMAN_LEDGER", str(missing))
    code, out, _ = run_usage([], capsys)
    assert code == 0 and str(missing) in out


def test_missing_ledger_json_is_an_empty_report(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "usage.sqlite3"
    code, out, err = run_usage(["--ledger", str(missing), "--json", "--by", "client,model"], capsys)
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["rows"] == [] and doc["ledger_exists"] is False and doc["ledger"] == str(missing)
    assert doc["group_by"] == ["client", "model"]
    assert set(doc["total"]) == {
        "requests",
        "errors",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "estimated",
    } and set(doc["total"].values()) == {0}
    assert not missing.parent.exists()


def test_ledger_from_the_environment(shipped, capsys, monkeypatch):
    monkeypatch.setenv("DRAGOMAN_LEDGER", str(shipped))
    code, out, _ = run_usage([], capsys)
    assert code == 0 and out.replace(str(shipped), PLACEHOLDER) == (DATA / "usage.txt").read_text(encoding="utf-8")


# -- --since and --by


NOW = DAY1 + 12 * 3600  # 2026-11-01 12:00 UTC


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24h", NOW - 86400),
        ("7d", NOW - 7 * 86400),
        ("90m", NOW - 5400),
        ("2w", NOW - 14 * 86400),
        ("30s", NOW - 30),
        (" 7D ", NOW - 7 * 86400),
        ("2026-11-01", DAY1),
        ("2026-11-01T09:30", DAY1 + 9.5 * 3600),
        ("2026-11-01 09:30:15", DAY1 + 9.5 * 3600 + 15),
        ("2026-11-01T09:30+02:00", DAY1 + 7.5 * 3600),
        ("2026-11-01T09:30Z", DAY1 + 9.5 * 3600),
    ],
)
def test_since_forms(text, expected):
    assert parse_since(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "7", "-1d", "1.5h", "2026-13-01", "2026-11-01T25:00", "11/01/2026", ""])
def test_bad_since_is_a_clear_usage_error(text, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["usage", f"--since={text}"])  # = so that "-1d" is a value, not an option
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert f"argument --since: {text!r} is neither a date (2026-11-01)" in err
    assert "an age (a whole number and s, m, h, d or w: 90m, 24h, 7d)" in err


def test_bad_by_is_a_clear_usage_error(capsys):
    assert parse_by("client, upstream,client-model") == ("client", "upstream", "client_model")
    assert parse_by("") == ()
    with pytest.raises(SystemExit) as e:
        cli.main(["usage", "--by", "client,api_key"])
    assert e.value.code == 2
    assert (
        "argument --by: cannot group by 'api_key': choose from client, route, upstream, model, client_model, day"
        in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        cli.main(["usage", "--by", "client,client"])
    assert "'client' is listed twice" in capsys.readouterr().err


def test_unexpected_arguments_are_refused(shipped, capsys):
    code, out, err = run_usage(["--ledger", str(shipped), "extra"], capsys)
    assert (code, out) == (2, "") and "unexpected arguments extra" in err


def regenerate() -> None:
    """Rewrite the shipped ledger from ``mixed_records()`` and every golden output from it."""
    import contextlib
    import io
    import tempfile

    SHIPPED.unlink(missing_ok=True)
    with SQLiteLedger(SHIPPED) as ledger:
        for r in mixed_records():
            ledger.add(r)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "usage.sqlite3"
        shutil.copyfile(SHIPPED, copy)
        for name, args in CASES.items():
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                assert cli.main(["usage", "--ledger", str(copy), *args]) == 0
            (DATA / name).write_text(buf.getvalue().replace(str(copy), PLACEHOLDER), encoding="utf-8")
            print(f"wrote {DATA / name}", file=sys.stderr)


if __name__ == "__main__":
    regenerate()
