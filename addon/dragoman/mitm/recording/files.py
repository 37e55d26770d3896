"""Recording files: ``DIR/<session>/NNN-<slug>.json``, written atomically (temp file + ``os.replace``),
and loaded back for replay (a single file or every exchange file under a folder)."""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from dragoman.record.model import Exchange

logger = logging.getLogger(__name__)

_SLUG_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def slug(*parts: str | None) -> str:
    text = "-".join(p for p in parts if p)
    return _SLUG_BAD.sub("-", text).strip("-.")[:80] or "exchange"


def exchange_filename(seq: int, *slug_parts: str | None) -> str:
    return f"{seq:03d}-{slug(*slug_parts)}.json"


def write_atomic(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text`` (or its pieces, in order) to ``path`` so that readers see the old file or the whole new
    one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if isinstance(text, str):
                f.write(text)
            else:
                for piece in text:
                    f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def new_session_dir(root: Path, name: str) -> Path:
    """``root/name``, or ``root/name-2``, ``-3``... if it exists already (a session is never mixed)."""
    candidate = root / name
    n = 2
    while candidate.exists():
        candidate = root / f"{name}-{n}"
        n += 1
    return candidate


def check_writable(root: Path) -> None:
    """Create ``root`` and prove a file can be written there. Raises ``OSError``."""
    root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".dragoman-write-test.", dir=root)
    os.close(fd)
    os.unlink(tmp)


def load_exchanges(path: Path) -> list[tuple[Path, Exchange]]:
    """Every exchange in a file or under a folder (recursively, in path order).

    JSON files without ``schema_version`` (expected outputs, indexes) are skipped; a file that claims to be
    an exchange but does not validate raises ``ValueError`` naming it."""
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*.json") if not p.name.startswith("."))
    else:
        raise ValueError(f"{path} does not exist")
    out = []
    for f in files:
        data = f.read_bytes()
        if b'"schema_version"' not in data[:200]:
            logger.debug("skipping %s: not an exchange recording", f)
            continue
        try:
            out.append((f, Exchange.from_json(data)))
        except ValueError as e:
            raise ValueError(f"{f} is not a valid exchange recording: {e}") from e
    return out


def load_playable(path: Path, max_bytes: int) -> tuple[list[tuple[Path, Exchange]], list[str]]:
    """The exchanges under ``path`` that can be replayed, made safe (``record.validate.playable``), and one
    message per file refused or fixed, naming it. A file over ``max_bytes`` is refused unread. Raises
    ``ValueError`` only when ``path`` does not exist."""
    from dragoman.record.validate import playable

    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*.json") if not p.name.startswith("."))
    else:
        raise ValueError(f"{path} does not exist")
    out, notes = [], []
    for f in files:
        try:
            size = f.stat().st_size
            if size > max_bytes:
                raise ValueError(f"{size / 2**20:.1f} MiB, over the replay limit of {max_bytes / 2**20:g} MiB")
            data = f.read_bytes()
            if b'"schema_version"' not in data[:200]:
                logger.debug("skipping %s: not an exchange recording", f)
                continue
            try:
                ex = Exchange.from_json(data)
            except ValueError as e:
                raise ValueError(f"not a valid exchange recording: {e}") from None
            ex, fixed = playable(ex)
        except (OSError, ValueError) as e:
            notes.append(f"{f}: refused: {e}")
            continue
        notes += [f"{f}: {w}" for w in fixed]
        out.append((f, ex))
    return out, notes
