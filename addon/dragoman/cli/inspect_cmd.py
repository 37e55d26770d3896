"""``python -m dragoman inspect PATH``: the exchanges of a recording folder, one exchange file or a mitmproxy
flow file as an 80-column table (time, protocols, model, route, status, stop reason, tokens, duration,
lossiness count); ``--exchange N`` shows one with both sides' assembled conversations row by row (two
columns from ``--width`` 100, else one after the other; ``!=`` marks a row where they differ) and its
lossiness report; ``--json`` for scripts. A file that cannot be read is named with what is wrong (exit status 1)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from dragoman.inspect import render
from dragoman.inspect.compare import MIN_COLUMNS_WIDTH
from dragoman.inspect.load import load


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect",
        help="show recorded exchanges: a table, or one exchange's conversation and lossiness report",
        description="Read a recording folder, one exchange file or a mitmproxy flow file (-w) and print its "
        "exchanges: time, client>upstream protocols, model, route, status, stop reason, tokens in/out, "
        "duration (s) and how many entries the lossiness report has.",
    )
    p.add_argument("path", type=Path, help="a recording folder, an exchange .json file or a mitmproxy flow file")
    p.add_argument("--exchange", "-e", type=int, metavar="N", help="show exchange N (the # column) in full")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument(
        "--width",
        type=int,
        metavar="COLUMNS",
        help="--exchange: the text width (default: the terminal's, 80 when not a terminal); from "
        f"{MIN_COLUMNS_WIDTH} the two sides of the answer are shown in two columns, below it one after the other",
    )
    p.set_defaults(func=cmd_inspect)


def cmd_inspect(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise SystemExit(f"dragoman inspect: unknown arguments: {' '.join(extra)}")
    try:
        loaded = load(args.path)
    except FileNotFoundError as e:
        print(f"dragoman inspect: {e}", file=sys.stderr)
        return 2
    for line in loaded.damaged:
        print(f"dragoman inspect: damaged: {line}", file=sys.stderr)
    all_sides = [(name, render.sides(ex)) for name, ex in loaded.exchanges]
    if args.exchange is not None:
        if not 1 <= args.exchange <= len(all_sides):
            print(f"dragoman inspect: no exchange {args.exchange} (1-{len(all_sides)})", file=sys.stderr)
            return 2
        name, s = all_sides[args.exchange - 1]
        d = render.detail(args.exchange, s, name)
        width = args.width or (shutil.get_terminal_size().columns if sys.stdout.isatty() else render.WIDTH)
        sys.stdout.write(
            json.dumps(d, indent=2, ensure_ascii=False) + "\n" if args.json else render.detail_text(d, width)
        )
    else:
        rows = [render.row(i, s) for i, (_, s) in enumerate(all_sides, 1)]
        if args.json:
            for r, (name, _) in zip(rows, all_sides, strict=True):
                r["file"] = name
            sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(render.table(rows))
    return 1 if loaded.damaged else 0
