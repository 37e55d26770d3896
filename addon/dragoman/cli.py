"""Command line: ``python -m dragoman run|demo|replay|record|fake-upstream|env``.

run            exec mitmdump with the Dragoman addon; convenience flags become ``--set dragoman_*``, every
               other argument goes to mitmdump unchanged
demo           the offline demo: the fake upstream (openai-chat) + mitmdump in reverse mode in front of it
replay         exec mitmdump replaying a recording (reverse mode to a dead local port: no network, no key)
record         exec mitmdump as ``run`` does, recording every exchange under DIR/<session>/
fake-upstream  the scriptable fake LLM upstream alone (see ``dragoman.demo``)
env            the environment lines for a client (proxy, CA path), or the transparent / WireGuard recipe
               (``--transparent``, ``--wireguard``) - see ``dragoman.env``
usage          the usage ledger as a table or JSON - see ``dragoman.ledger.report``
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

PROTOCOLS = ("anthropic", "openai-chat", "openai-responses")


def entry_script() -> Path:
    """``addon/dragoman.py`` (next to the package; present in a source checkout / editable install)."""
    here = Path(__file__).resolve().parent
    script = here.parent / "dragoman.py"
    if not script.is_file():
        raise SystemExit(
            f"cannot find the mitmproxy entry script {script}; install Dragoman editable (pip install -e .)"
        )
    return script


def mitmdump_path() -> str:
    """mitmdump of this interpreter's environment, else the one on PATH."""
    local = Path(sys.executable).parent / "mitmdump"
    if local.is_file():
        return str(local)
    found = shutil.which("mitmdump")
    if not found:
        raise SystemExit("mitmdump not found: install mitmproxy in this environment")
    return found


def build_mitmdump_argv(
    extra: list[str],
    target: str | None = None,
    upstream: str | None = None,
    api_key: str | None = None,
    model_map: list[str] | None = None,
    port: int | None = None,
    mitmdump: str | None = None,
) -> list[str]:
    """The mitmdump command line. With ``upstream`` and no ``--mode`` in ``extra``, reverse mode to it."""
    argv = [mitmdump or mitmdump_path(), "-s", str(entry_script())]
    has_mode = any(a == "--mode" or a.startswith("--mode=") or a == "-m" for a in extra)
    if upstream and not has_mode:
        parts = urlsplit(upstream)
        argv += ["--mode", f"reverse:{parts.scheme}://{parts.netloc}"]
    if port is not None:
        argv += ["--listen-host", "127.0.0.1", "-p", str(port)]
    if target:
        argv += ["--set", f"dragoman_target={target}"]
    if upstream:
        argv += ["--set", f"dragoman_upstream={upstream}"]
    if api_key:
        argv += ["--set", f"dragoman_api_key={api_key}"]
    for rule in model_map or []:
        argv += ["--set", f"dragoman_model_map={rule}"]
    return argv + extra


def _cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    argv = build_mitmdump_argv(extra, args.target, args.upstream, args.api_key, args.model_map, args.port)
    shown = [_redact(a) if a.startswith("dragoman_api_key=") else a for a in argv]
    print("exec:", " ".join(shown), file=sys.stderr, flush=True)
    os.execv(argv[0], argv)
    return 0  # not reached


def _redact(arg: str) -> str:
    value = arg.partition("=")[2]
    return arg if value.startswith("env:") else "dragoman_api_key=***"


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
    from dragoman.mitm import store

    root = Path(path).expanduser()
    try:
        loaded = store.load_exchanges(root)
    except (OSError, ValueError) as e:
        raise SystemExit(f"dragoman replay: cannot load {path}: {e}") from None
    playable = [(p, ex) for p, ex in loaded if ex.upstream_response is not None or ex.error is not None]
    if not playable:
        raise SystemExit(f"dragoman replay: no recorded exchange in {path}")
    sessions = sorted({p.parent.name for p, _ in playable})
    lines = [f"Dragoman replay: {path}: {len(playable)} recorded exchanges loaded ({len(sessions)} session(s))"]
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


def _run_parser(prog: str = "python -m dragoman run") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, add_help=False)
    _add_run_args(ap)
    return ap


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", choices=PROTOCOLS, help="sets dragoman_target")
    p.add_argument("--upstream", help="sets dragoman_upstream (and reverse mode to it unless --mode is given)")
    p.add_argument("--api-key", help="sets dragoman_api_key (a key or env:NAME)")
    p.add_argument("--model-map", action="append", help="PATTERN=MODEL; repeatable")
    p.add_argument("--port", type=int, help="listen on 127.0.0.1:PORT")


def build_record_argv(
    directory: str | Path, session: str | None, run_args: list[str], mitmdump: str | None = None
) -> tuple[list[str], argparse.Namespace]:
    """mitmdump as ``run`` would start it with ``run_args``, recording into ``directory``/``session``."""
    if session is not None and (not session.strip() or Path(session).name != session or session in (".", "..")):
        raise SystemExit(f"dragoman record: --session {session!r} must be a folder name, not a path")
    ns, extra = _run_parser().parse_known_args(run_args)
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

    from dragoman.mitm import store

    session = args.session or datetime.now().strftime("%Y%m%d-%H%M%S")
    argv, ns = build_record_argv(args.dir, session, extra)
    root = Path(args.dir).expanduser().resolve()
    folder = store.new_session_dir(root, session)
    print(
        f"Dragoman record: every LLM API exchange goes to {folder}/NNN-<client>-to-<upstream>-<model>.json", flush=True
    )
    print("Secrets (authorization, x-api-key, cookies, dragoman_redact names) are redacted before writing.", flush=True)
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
    shown = [_redact(a) if a.startswith("dragoman_api_key=") else a for a in argv]
    print("exec:", " ".join(shown), file=sys.stderr, flush=True)
    os.execv(argv[0], argv)
    return 0  # not reached


DEMO_HELP = """\
Dragoman offline demo: mitmdump on http://127.0.0.1:{port} translates to a fake openai-chat upstream on {up}.
No API key is needed. Try, in another shell:

  ANTHROPIC_BASE_URL=http://127.0.0.1:{port} ANTHROPIC_API_KEY=dummy {py} -c \\
    "import anthropic; print(anthropic.Anthropic().messages.create(model='claude-x', max_tokens=64, messages=[{{'role':'user','content':'hi'}}]).content[0].text)"

  curl -sN http://127.0.0.1:{port}/v1/messages -H 'content-type: application/json' \\
    -d '{{"model":"claude-x","max_tokens":64,"stream":true,"messages":[{{"role":"user","content":"hi"}}]}}'

Scenarios: send the header x-fake-scenario: text|thinking|tools|error429|midstream_error|stall|drop
(or use the scenario as the model name). Ctrl-C stops both.
"""


def _cmd_demo(args: argparse.Namespace, extra: list[str]) -> int:
    from dragoman.demo import FakeUpstream

    fake = FakeUpstream(port=args.upstream_port, scenario="text", delay=args.delay).start()
    argv = build_mitmdump_argv(
        extra, target=args.target, upstream=fake.url + ("/v1" if args.target != "anthropic" else ""), port=args.port
    )
    print(DEMO_HELP.format(port=args.port, up=fake.url, py=sys.executable), flush=True)
    proc = subprocess.Popen(argv)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
        return 0
    finally:
        fake.stop()


def _cmd_fake(args: argparse.Namespace, extra: list[str]) -> int:
    from dragoman.demo import server

    return server.main(extra)


def local_ip() -> str | None:
    """This machine's address on its default route (no packet is sent), as mitmproxy guesses it."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))
            return str(s.getsockname()[0])
    except OSError:
        return None


def _cmd_env_intercept(args: argparse.Namespace) -> int:
    from dragoman import env

    local = Path(sys.executable).parent / "mitmdump"
    script, mitmdump = str(entry_script()), str(local) if local.is_file() else shutil.which("mitmdump") or "mitmdump"
    if args.transparent:
        for line in env.transparent_lines(mitmdump, script, args.port, args.user, args.firewall, args.gateway):
            print(line)
        return 0
    conf = Path(args.confdir).expanduser() / env.WG_CONF
    try:
        client, server = env.wireguard_keys(conf.read_text())
    except (OSError, ValueError) as e:
        print(
            f"dragoman env --wireguard: cannot read the keys in {conf} ({e}); start `mitmdump --mode wireguard` "
            "once with this confdir to create them",
            file=sys.stderr,
        )
        return 1
    endpoint = args.endpoint or f"{local_ip() or 'THIS-MACHINE'}:{env.WG_PORT}"
    for line in env.wireguard_lines(mitmdump, script, str(conf), client, server, endpoint):
        print(line)
    return 0


def _cmd_env(args: argparse.Namespace, extra: list[str]) -> int:
    from dragoman import env

    if extra:
        raise SystemExit(f"dragoman env: unexpected arguments {' '.join(extra)}")
    if args.transparent or args.wireguard:
        if args.client:
            raise SystemExit("dragoman env: give a CLIENT or --transparent/--wireguard, not both")
        return _cmd_env_intercept(args)
    if not args.client:
        raise SystemExit(f"dragoman env: give a CLIENT ({', '.join(env.CLIENTS)}) or --transparent or --wireguard")
    ca = Path(env.ca_path(args.confdir)).expanduser().resolve()
    for line in env.env_lines(args.client, str(ca), args.proxy, args.format, args.reverse):
        print(line)
    if not args.reverse and not ca.is_file():
        print(
            f"note: {ca} does not exist yet: start mitmdump once (with the same confdir) to create the CA",
            file=sys.stderr,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m dragoman", description="Dragoman: translate LLM API traffic with mitmproxy."
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="start mitmdump with the Dragoman addon (unknown arguments go to mitmdump)")
    _add_run_args(run)
    run.set_defaults(func=_cmd_run)
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
    demo = sub.add_parser("demo", help="offline demo: fake upstream + mitmdump (no key needed)")
    demo.add_argument("--port", type=int, default=8080, help="mitmdump port (default 8080)")
    demo.add_argument("--upstream-port", type=int, default=8765, help="fake upstream port (default 8765)")
    demo.add_argument(
        "--target", choices=PROTOCOLS, default="openai-chat", help="protocol the fake upstream is spoken in"
    )
    demo.add_argument("--delay", type=float, default=0.05, help="seconds between streamed events")
    demo.set_defaults(func=_cmd_demo)
    from dragoman.env import CLIENTS
    from dragoman.env import DEFAULT_CONFDIR
    from dragoman.env import DEFAULT_PROXY

    envp = sub.add_parser(
        "env",
        help="print the environment lines that route a client through Dragoman, or the transparent/WireGuard recipe",
    )
    envp.add_argument("client", nargs="?", choices=CLIENTS)
    mode = envp.add_mutually_exclusive_group()
    mode.add_argument("--transparent", action="store_true", help="the transparent-mode recipe (firewall lines)")
    mode.add_argument("--wireguard", action="store_true", help="the WireGuard client config from the confdir's keys")
    envp.add_argument("--port", type=int, default=8080, help="--transparent: mitmdump's port (default 8080)")
    envp.add_argument("--user", default="mitmproxyuser", help="--transparent: the user mitmdump runs as")
    envp.add_argument("--firewall", choices=("iptables", "nftables"), default="iptables", help="--transparent")
    envp.add_argument("--gateway", metavar="IFACE", help="--transparent: also redirect devices routed via IFACE")
    envp.add_argument("--endpoint", metavar="HOST:PORT", help="--wireguard: where clients reach mitmdump")
    envp.add_argument("--proxy", default=DEFAULT_PROXY, help=f"the proxy's URL (default {DEFAULT_PROXY})")
    envp.add_argument(
        "--confdir", default=DEFAULT_CONFDIR, help=f"mitmproxy's confdir holding the CA (default {DEFAULT_CONFDIR})"
    )
    envp.add_argument("--format", choices=("sh", "dotenv"), default="sh", help="sh (export lines) or dotenv")
    envp.add_argument("--reverse", action="store_true", help="reverse mode: base-URL variables, no CA")
    envp.set_defaults(func=_cmd_env)
    from dragoman.ledger import report as usage_report

    usage_report.add_parser(sub)
    fake = sub.add_parser("fake-upstream", help="run the fake upstream alone (see --help after it)", add_help=False)
    fake.set_defaults(func=_cmd_fake)
    argv = list(sys.argv[1:] if argv is None else argv)
    tail: list[str] = []
    if argv and argv[0] in ("replay", "record") and "--" in argv:
        i = argv.index("--")
        argv, tail = argv[:i], argv[i + 1 :]
    args, extra = ap.parse_known_args(argv)
    extra += tail
    if args.cmd == "demo" and extra and extra[0] == "--":
        extra = extra[1:]
    if args.cmd == "run" and extra and extra[0] == "--":
        extra = extra[1:]
    return args.func(args, extra)


if __name__ == "__main__":
    raise SystemExit(main())
