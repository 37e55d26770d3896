"""Per-package statement coverage of ``dragoman`` from the ``.coverage`` data file (``make coverage``).

Prints one line per package (``dragoman.sse``, ``dragoman.protocols``, ...; top-level modules each count as
their own) and the total, and exits 1 when the total or a translator-core package is under its target.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import PurePath

import coverage

#: the translator core: each package must stay at or above the target on its own
CORE = ("sse", "ir", "protocols", "translate")


def package_of(path: str) -> str | None:
    """``.../addon/dragoman/protocols/openai_chat/decode.py`` -> ``protocols``; None outside dragoman."""
    parts = PurePath(path).parts
    at = [i for i, part in enumerate(parts[:-1]) if part == "dragoman"]
    if not at:
        return None
    return parts[at[-1] + 1].removesuffix(".py")


def totals(data_file: str | None) -> dict[str, tuple[int, int]]:
    """package -> (statements, missed)."""
    cov = coverage.Coverage(data_file=data_file) if data_file else coverage.Coverage()
    cov.load()
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path in sorted(cov.get_data().measured_files()):
        pkg = package_of(path)
        if pkg is None:
            continue
        _, statements, _, missing, _ = cov.analysis2(path)
        out[pkg][0] += len(statements)
        out[pkg][1] += len(missing)
    return {k: (v[0], v[1]) for k, v in out.items()}


def percent(statements: int, missed: int) -> float:
    return 100.0 * (statements - missed) / statements if statements else 100.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-file", default=None, help="coverage data file (default: .coverage)")
    ap.add_argument("--target", type=float, default=90.0, help="minimum percent for the total and each core package")
    args = ap.parse_args(argv)

    rows = totals(args.data_file)
    if not rows:
        print("no dragoman files in the coverage data", file=sys.stderr)
        return 1
    failed: list[str] = []
    print(f"\n{'package':<24}{'stmts':>7}{'miss':>7}{'cover':>8}")
    for pkg in sorted(rows, key=lambda p: (p not in CORE, p)):
        statements, missed = rows[pkg]
        pct = percent(statements, missed)
        mark = ""
        if pkg in CORE:
            mark = "  core"
            if pct < args.target:
                mark += f"  BELOW {args.target:g}%"
                failed.append(pkg)
        print(f"{'dragoman.' + pkg:<24}{statements:>7}{missed:>7}{pct:>7.1f}%{mark}")
    statements = sum(s for s, _ in rows.values())
    missed = sum(m for _, m in rows.values())
    pct = percent(statements, missed)
    print(f"{'TOTAL':<24}{statements:>7}{missed:>7}{pct:>7.1f}%")
    if pct < args.target:
        failed.append("TOTAL")
    if failed:
        print(f"under the {args.target:g}% target: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
