"""``python -m dragoman replay`` and ``record``: mitmdump replaying, or recording, exchanges."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from dragoman.cli.common import build_mitmdump_argv
from dragoman.cli.common import redact
from dragoman.cli.common import run_parser

#: dragoman_replay_max_mb's default (the CLI lists what mitmdump will load)
REPLAY_MAX_MB = 512


def dead_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound by us, then released): replay's reverse-mode target, so a
    request the replayer does not serve fails at once instead of reaching the network."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _has_mode(extra: list[str]) -> bool:
    return any(a == "--mode" or a.startswith("--mode=") or a == "-m" for a in extra)


def _check_speed(value: str) -> str:
    try:
        speed = float(value)
    except ValueError:
        speed = -1.0
    if not (0 <= speed < float("inf")):
        raise argparse.ArgumentTypeError(
            f"--speed must be a finite number >= 0 (0 = as fast as possible), got {value!r}"
        )
    return value


def build_replay_argv(
    path: str | Path,
    speed: str = "1",
    port: int = 8080,
    unmatched: str = "error",
    upstream: str | None = None,
    extra: list[str] | None = None,
    mitmdump: str | None = None,
    dead: int | None = None,
) -> list[str]:
    """mitmdump replaying ``path``: reverse mode to a dead local port (or to ``upstream``, where
    ``--unmatched forward`` sends what no recording matches), listening on 127.0.0.1:``port``."""
    extra = list(extra or [])
    if unmatched == "forward" and not upstream and not _has_mode(extra):
        raise SystemExit(
            "dragoman replay: --unmatched forward needs --upstream URL (replay alone never touches the network)"
        )
    argv = build_mitmdump_argv([], upstream=upstream, port=port, mitmdump=mitmdump)
    if not upstream and not _has_mode(extra):
        argv += ["--mode", f"reverse:http://127.0.0.1:{dead or dead_port()}"]
    argv += ["--set", f"dragoman_replay={Path(path).expanduser().resolve()}"]
    argv += ["--set", f"dragoman_replay_speed={speed}", "--set", f"dragoman_replay_unmatched={unmatched}"]
    return argv + extra


def describe_replay(path: str | Path, speed: str, port: int, unmatched: str) -> list[str]:
    """The progress lines ``replay`` prints: what is replayed, how many exchanges, where to point clients.
    Raises ``SystemExit`` when ``path`` holds no recorded exchange."""
    from dragoman.mitm.recording import files as store

    root = Path(path).expanduser()
    try:
        loaded, notes = store.load_playable(root, REPLAY_MAX_MB << 20)
    except (OSError, ValueError) as e:
        raise SystemExit(f"dragoman replay: cannot load {path}: {e}") from None
    playable = [(p, ex) for p, ex in loaded if ex.upstream_response is not None or ex.error is not None]
    if not playable:
        why = "".join(f"\n  {n}" for n in notes[:20])
        raise SystemExit(f"dragoman replay: no recorded exchange in {path}{why}")
    sessions = sorted({p.parent.name for p, _ in playable})
    lines = [f"Dragoman replay: {path}: {len(playable)} recorded exchanges loaded ({len(sessions)} session(s))"]
    lines += [f"  {n}" for n in notes[:20]]
    for p, ex in playable[:50]:
        resp = ex.upstream_response
        what = f"{resp.status}" if resp is not None else f"connection failure ({ex.error})"
        if resp is not None and resp.chunks is not None:
            last = resp.chunks[-1][1] if resp.chunks else 0.0
            what += f", stream of {len(resp.chunks)} chunks over {resp.headers_delay + last:.2f} s"
        proto = f"{ex.client_protocol} -> {ex.upstream_protocol}"
        lines.append(f"  {p.parent.name}/{p.name}: {proto}, model {ex.client_model or '?'}, {what}")
    if len(playable) > 50:
        lines.append(f"  ... and {len(playable) - 50} more")
    factor = float(speed)
    pace = (
        "as fast as possible"
        if factor == 0
        else "the recorded timing"
        if factor == 1
        else f"{factor:g}x the recorded speed"
    )
    unmatched_text = {
        "error": "a 404 error in the client's protocol",
        "forward": "forwarded to the upstream",
        "next": "answered with the next recorded exchange, in order",
    }[unmatched]
    url = f"http://127.0.0.1:{port}"
    lines += [
        f"Timing: {pace} (--speed {speed}). Unmatched requests: {unmatched_text}.",
        "Any client protocol works (Anthropic Messages, OpenAI Chat, OpenAI Responses): the recorded upstream",
        "response is translated for it. No network and no API key are needed.",
        f"Point clients at {url}:",
        f"  ANTHROPIC_BASE_URL={url} ANTHROPIC_API_KEY=dummy",
        f"  OPENAI_BASE_URL={url}/v1 OPENAI_API_KEY=dummy",
        "Ctrl-C stops it.",
    ]
    return lines


def _cmd_replay(args: argparse.Namespace, extra: list[str]) -> int:
    for line in describe_replay(args.path, args.speed, args.port, args.unmatched):
        print(line, flush=True)
    argv = build_replay_argv(args.path, args.speed, args.port, args.unmatched, args.upstream, extra)
    print("exec:", " ".join(argv), file=sys.stderr, flush=True)
    os.execv(argv[0], argv)
    return 0  # not reached


def build_record_argv(
    directory: str | Path, session: str | None, run_args: list[str], mitmdump: str | None = None
) -> tuple[list[str], argparse.Namespace]:
    """mitmdump as ``run`` would start it with ``run_args``, recording into ``directory``/``session``."""
    if session is not None and (not session.strip() or Path(session).name != session or session in (".", "..")):
        raise SystemExit(f"dragoman record: --session {session!r} must be a folder name, not a path")
    ns, extra = run_parser().parse_known_args(run_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    full = build_mitmdump_argv(extra, ns.target, ns.upstream, ns.api_key, ns.model_map, ns.port, mitmdump)
    argv = full[: len(full) - len(extra)]
    argv += ["--set", f"dragoman_record={Path(directory).expanduser().resolve()}"]
    if session:
        argv += ["--set", f"dragoman_record_session={session}"]
    return argv + extra, ns


def _cmd_record(args: argparse.Namespace, extra: list[str]) -> int:
    from datetime import datetime

    from dragoman.mitm.recording import files as store

    session = args.session or datetime.now().strftime("%Y%m%d-%H%M%S")
    argv, ns = build_record_argv(args.dir, session, extra)
    root = Path(args.dir).expanduser().resolve()
    folder = store.new_session_dir(root, session)
    print(
        f"Dragoman record: every LLM API exchange goes to {folder}/NNN-<client>-to-<upstream>-<model>.json", flush=True
    )
    print(
        "Credentials (headers, query parameters and body fields with credential names, dragoman_redact names) "
        "are redacted before writing.",
        flush=True,
    )
    port = ns.port or 8080
    if ns.upstream or _has_mode(extra):
        print(f"Point clients at http://127.0.0.1:{port} (reverse mode); replay it later with:", flush=True)
    else:
        print(
            f"Use 127.0.0.1:{port} as the clients' HTTPS proxy (`python -m dragoman env CLIENT` prints the lines); "
            "replay it later with:",
            flush=True,
        )
    print(f"  python -m dragoman replay {folder}", flush=True)
    shown = [redact(a) if a.startswith("dragoman_api_key=") else a for a in argv]
    print("exec:", " ".join(shown), file=sys.stderr, flush=True)
    os.execv(argv[0], argv)
    return 0  # not reached


def add_parsers(sub: argparse._SubParsersAction) -> None:
    replay = sub.add_parser(
        "replay",
        help="replay a recording offline: mitmdump on 127.0.0.1:PORT, no network, no key",
        description="Start mitmdump replaying recorded exchanges to clients of any protocol. Arguments after -- "
        "go to mitmdump.",
    )
    replay.add_argument("path", help="a recording file, or a folder of them (searched recursively)")
    replay.add_argument(
        "--speed", type=_check_speed, default="1", help="1 = recorded timing (default), 2 = twice as fast, 0 = no delay"
    )
    replay.add_argument("--port", type=int, default=8080, help="listen on 127.0.0.1:PORT (default 8080)")
    replay.add_argument(
        "--unmatched",
        choices=("error", "forward", "next"),
        default="error",
        help="a request no recording matches: error (404 in the client's protocol, default), forward (to "
        "--upstream), next (the next recorded exchange, for demos)",
    )
    replay.add_argument("--upstream", help="reverse mode to this URL instead of a dead port (for --unmatched forward)")
    replay.set_defaults(func=_cmd_replay)
    record = sub.add_parser(
        "record",
        help="start mitmdump like `run`, recording every exchange under DIR/<session>/",
        usage="python -m dragoman record DIR [--session NAME] -- [run arguments] [mitmdump arguments]",
        description="Start mitmdump like `python -m dragoman run` and record every LLM API exchange (secrets "
        "redacted). After --: the run arguments (--target, --upstream, --api-key, --model-map, --port) and any "
        "mitmdump argument.",
    )
    record.add_argument("dir", help="folder to record into (created if missing)")
    record.add_argument("--session", help="session folder name (default: the start time, YYYYMMDD-HHMMSS)")
    record.set_defaults(func=_cmd_record)
