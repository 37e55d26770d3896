"""Golden tests: every shipped recording exchange (``recordings/**.json``) x every client protocol, replayed
as ``Translate`` replays it (``recordings_loader.replay_output``, over the recorded chunks), compared byte for
byte with ``tests/golden/<session>/<exchange-stem>.<client>.{sse,json}``.

``.sse``: the SSE bytes a streaming client gets. ``.json``: a whole response or an error,
``{"status": N, "body": <the body bytes, verbatim>}`` (``"body_text"``, a JSON string, when the body is not
JSON). The clock and the ids minted when the upstream has none are pinned (``deterministic()``).

Regenerate after an intended change with ``make golden`` (``PYTHONPATH=tests python tests/golden/test_golden.py``)
and review the diff.
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path

import pytest

from dragoman.protocols import Protocol
from dragoman.record.model import Exchange
from recordings_loader import EXCHANGES
from recordings_loader import Output
from recordings_loader import deterministic
from recordings_loader import exchange_id
from recordings_loader import replay_output

GOLDEN = Path(__file__).resolve().parent
CLIENTS = list(Protocol)
HINT = "run `make golden` if the change is intended (and review the diff)"
CASES = [(p, ex) for p, ex in EXCHANGES if ex.upstream_response is not None]


def render(out: Output) -> bytes:
    """The golden file's bytes: the SSE body as is, else status + body with the body embedded verbatim."""
    if out.stream and 200 <= out.status < 300:
        return out.body
    try:
        json.loads(out.body)
    except ValueError:
        text = json.dumps(out.body.decode("utf-8", errors="replace"), ensure_ascii=False)
        return b'{"status": %d,\n "body_text": %s}\n' % (out.status, text.encode())
    return b'{"status": %d,\n "body": %s}\n' % (out.status, out.body.strip())


def golden_path(path: Path, client: Protocol, out: Output) -> Path:
    ext = "sse" if out.stream and 200 <= out.status < 300 else "json"
    return GOLDEN / path.parent.name / f"{path.stem}.{client.value}.{ext}"


def generate(ex: Exchange, client: Protocol) -> Output:
    with deterministic():
        return replay_output(ex, client)


def expected_files() -> dict[Path, bytes]:
    out = {}
    for path, ex in CASES:
        for client in CLIENTS:
            got = generate(ex, client)
            out[golden_path(path, client, got)] = render(got)
    return out


def existing_files() -> set[Path]:
    return {p for p in GOLDEN.glob("*/*") if p.is_file() and p.suffix in (".sse", ".json")}


def diff(expected: bytes, got: bytes, name: str) -> str:
    a = expected.decode("utf-8", errors="replace").splitlines(keepends=True)
    b = got.decode("utf-8", errors="replace").splitlines(keepends=True)
    lines = list(difflib.unified_diff(a, b, f"{name} (golden)", f"{name} (now)", n=2))
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines[:400])
    if len(lines) > 400:
        text += f"... {len(lines) - 400} more diff lines\n"
    return text or "(the bytes differ only where the text decoding cannot show it)\n"


@pytest.mark.parametrize("client", CLIENTS, ids=lambda p: p.value)
@pytest.mark.parametrize("path,ex", CASES, ids=[exchange_id(p) for p, _ in CASES])
def test_golden(path, ex, client):
    got = generate(ex, client)
    data = render(got)
    target = golden_path(path, client, got)
    name = str(target.relative_to(GOLDEN))
    if not target.is_file():
        pytest.fail(f"no golden file {name}; {HINT}", pytrace=False)
    expected = target.read_bytes()
    if expected != data:
        pytest.fail(f"{name} differs from the golden output:\n{diff(expected, data, name)}{HINT}", pytrace=False)


def test_generation_is_deterministic():
    """Two runs give the same bytes (a frozen clock and pinned ids are all it takes)."""
    for path, ex in CASES:
        for client in CLIENTS:
            assert render(generate(ex, client)) == render(generate(ex, client)), (path, client)


def test_every_recording_has_goldens_and_none_is_stale():
    expected = set(expected_files())
    existing = existing_files()
    assert len(expected) == len(CASES) * len(CLIENTS)
    missing = sorted(str(p.relative_to(GOLDEN)) for p in expected - existing)
    stale = sorted(str(p.relative_to(GOLDEN)) for p in existing - expected)
    assert not missing and not stale, f"missing: {missing}; stale: {stale}; {HINT}"


def update() -> tuple[int, int, int, int]:
    """Write every golden file and delete stale ones: (written, changed, unchanged, removed)."""
    files = expected_files()
    written = changed = same = 0
    for path, data in sorted(files.items()):
        if path.is_file():
            if path.read_bytes() == data:
                same += 1
                continue
            changed += 1
        else:
            written += 1
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    removed = 0
    for path in sorted(existing_files() - set(files)):
        path.unlink()
        removed += 1
    for d in GOLDEN.iterdir():
        if d.is_dir() and not d.name.startswith((".", "_")) and not any(d.iterdir()):
            d.rmdir()
    return written, changed, same, removed


def main() -> int:
    print(f"golden: {len(CASES)} recorded exchanges x {len(CLIENTS)} client protocols -> {GOLDEN}", flush=True)
    written, changed, same, removed = update()
    print(f"golden: {written} new, {changed} changed, {same} unchanged, {removed} stale removed")
    if written or changed or removed:
        print("golden: review the change with `git diff tests/golden`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
