"""Exchanges to inspect: a recording folder, one exchange file, or a mitmproxy flow file (``-w``). A file
that cannot be read is named with what is wrong, and the others are still read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from pydantic import ValidationError

from dragoman.record.model import Exchange


@dataclass(slots=True)
class Loaded:
    exchanges: list[tuple[str, Exchange]] = field(default_factory=list)
    #: one line per file that could not be read: "path: what is wrong"
    damaged: list[str] = field(default_factory=list)


def load(path: Path) -> Loaded:
    """Raises ``FileNotFoundError`` when ``path`` does not exist."""
    out = Loaded()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        files = [p for p in files if p.suffix in (".json", ".flow", ".mitm", "")]
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"{path} does not exist")
    for f in files:
        _load_file(f, out, explicit=f == path)
    return out


def _load_file(f: Path, out: Loaded, explicit: bool) -> None:
    try:
        data = f.read_bytes()
    except OSError as e:
        out.damaged.append(f"{f}: cannot be read ({e.strerror or e})")
        return
    if not data.lstrip()[:1] == b"{":
        if f.suffix == ".json":
            out.damaged.append(f"{f}: not an exchange recording (no JSON object)")
            return
        from dragoman.mitm.recording.flowfile import read_flows  # mitmproxy only for flow files

        try:
            out.exchanges += [(f"{f}#{i + 1}", ex) for i, ex in enumerate(read_flows(data))]
        except ValueError as e:
            out.damaged.append(f"{f}: not a mitmproxy flow file ({e})")
        return
    if b'"schema_version"' not in data[:200]:
        if explicit:
            out.damaged.append(f"{f}: not an exchange recording (no schema_version)")
        return  # in a folder: an index or expected-output file, not an exchange
    try:
        out.exchanges.append((str(f), Exchange.from_json(data)))
    except ValidationError as e:
        out.damaged.append(f"{f}: {_what(e)}")


def _what(e: ValidationError) -> str:
    """The first problem pydantic found, in one line: where and what."""
    err = e.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    msg = err.get("msg", "invalid")
    if err.get("type") == "json_invalid":
        ctx = err.get("ctx") or {}
        return f"invalid JSON ({ctx.get('error', msg)})"
    more = f" (and {len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
    return f"{where}: {msg}{more}" if where else f"{msg}{more}"


def dumps(obj: object) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False)
