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
import contextlib
import errno
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from dragoman.protocols.profiles import CHOICES as PROFILE_CHOICES

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
    config: str | None = None,
) -> list[str]:
    """The mitmdump command line. With ``upstream`` (or a routes file) and no ``--mode`` in ``extra``, reverse
    mode to it (the routes file's first upstream). Binds 127.0.0.1 unless ``extra`` says ``--listen-host``."""
    argv = [mitmdump or mitmdump_path(), "-s", str(entry_script())]
    has_mode = any(a == "--mode" or a.startswith("--mode=") or a == "-m" for a in extra)
    reverse_to = upstream
    if config:
        reverse_to = _first_upstream(config)
        argv += ["--set", f"dragoman_config={Path(config).expanduser().resolve()}"]
    if reverse_to and not has_mode:
        parts = urlsplit(reverse_to)
        argv += ["--mode", f"reverse:{parts.scheme}://{parts.netloc}"]
    if not any(a == "--listen-host" or a.startswith("--listen-host=") for a in extra):
        argv += ["--listen-host", "127.0.0.1"]
    if port is not None:
        argv += ["-p", str(port)]
    if target:
        argv += ["--set", f"dragoman_target={target}"]
    if upstream:
        argv += ["--set", f"dragoman_upstream={upstream}"]
    if api_key:
        argv += ["--set", f"dragoman_api_key={api_key}"]
    for rule in model_map or []:
        argv += ["--set", f"dragoman_model_map={rule}"]
    return argv + extra


def _first_upstream(config: str) -> str:
    """Check the routes file now (a clear message instead of mitmdump's) and return its first upstream's URL."""
    from dragoman.routing.load import ConfigError
    from dragoman.routing.load import load_config

    path = Path(config).expanduser()
    try:
        cfg = load_config(path.read_text(encoding="utf-8"), str(path), os.environ)
    except OSError as e:
        raise SystemExit(f"dragoman run: cannot read the routes file {path}: {e.strerror or e}") from None
    except ConfigError as e:
        raise SystemExit(f"dragoman run: {e}") from None
    first = next(iter(cfg.upstreams.values()))
    assert first.url is not None
    return first.url.origin


def _cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.config and (args.target or args.upstream or args.api_key or args.model_map):
        raise SystemExit("dragoman run: --config names every upstream; drop --target/--upstream/--api-key/--model-map")
    if args.config and args.profile:
        raise SystemExit("dragoman run: with --config, set each upstream's profile: in the routes file")
    if args.profile:
        extra = ["--set", f"dragoman_profile={args.profile}", *extra]
    argv = build_mitmdump_argv(
        extra, args.target, args.upstream, args.api_key, args.model_map, args.port, config=args.config
    )
    shown = [_redact(a) if a.startswith("dragoman_api_key=") else a for a in argv]
    print("exec:", " ".join(shown), file=sys.stderr, flush=True)
    os.execv(argv[0], argv)
    return 0  # not reached


def _redact(arg: str) -> str:
    value = arg.partition("=")[2]
    return arg if value.startswith("env:") else "dragoman_api_key=***"


def _run_parser(prog: str = "python -m dragoman run") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, add_help=False)
    _add_run_args(ap)
    return ap


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", choices=PROTOCOLS, help="sets dragoman_target")
    p.add_argument("--upstream", help="sets dragoman_upstream (and reverse mode to it unless --mode is given)")
    p.add_argument("--api-key", help="sets dragoman_api_key (a key or env:NAME)")
    p.add_argument("--model-map", action="append", help="PATTERN=MODEL; repeatable")
    p.add_argument(
        "--profile", choices=PROFILE_CHOICES, help="sets dragoman_profile (default auto: from the upstream's host)"
    )
    p.add_argument("--port", type=int, help="listen on 127.0.0.1:PORT")
    p.add_argument("--config", help="a routes file (sets dragoman_config; reverse mode to its first upstream)")


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


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: the command stops as on Ctrl-C (children stopped, then exit)."""


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM (a service manager, ``timeout``, an IDE's stop button) and SIGHUP (the terminal went away)
    raise ``Stopped`` in the main thread, as Ctrl-C raises ``KeyboardInterrupt``, so ``finally`` blocks stop
    the children; the previous handlers come back afterwards."""

    def handler(signum: int, _frame: object) -> None:
        raise Stopped(signal.Signals(signum).name)

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def port_taken(host: str, port: int) -> bool:
    """Something already listens on ``host:port`` (checked by binding it as a server would, SO_REUSEADDR)."""
    if port == 0:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def stop_child(proc: subprocess.Popen[bytes], timeout: float = 5) -> int:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; the child's exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def _cmd_demo(args: argparse.Namespace, extra: list[str]) -> int:
    from dragoman.demo import FakeUpstream

    for what, port in (("mitmdump (--port)", args.port), ("the fake upstream (--upstream-port)", args.upstream_port)):
        if port_taken("127.0.0.1", port):
            print(f"dragoman demo: port {port} is taken, {what} cannot listen on it; choose another", file=sys.stderr)
            return 1
    with stop_on_signals():
        try:
            fake = FakeUpstream(port=args.upstream_port, scenario="text", delay=args.delay).start()
        except OSError as e:
            print(f"dragoman demo: the fake upstream cannot listen on port {args.upstream_port}: {e}", file=sys.stderr)
            return 1
        try:
            return _demo_mitmdump(args, extra, fake.url)
        except KeyboardInterrupt:
            return 0
        finally:
            fake.stop()


def _demo_mitmdump(args: argparse.Namespace, extra: list[str], fake_url: str) -> int:
    argv = build_mitmdump_argv(
        extra, target=args.target, upstream=fake_url + ("/v1" if args.target != "anthropic" else ""), port=args.port
    )
    print(DEMO_HELP.format(port=args.port, up=fake_url, py=sys.executable), flush=True)
    proc = subprocess.Popen(argv)
    try:
        rc = proc.wait()
    finally:
        stop_child(proc)  # Ctrl-C, SIGTERM, SIGHUP: the child goes too
    if rc != 0:
        print(f"dragoman demo: mitmdump exited with status {rc} (see its message above)", file=sys.stderr)
    return rc


def _cmd_fake(args: argparse.Namespace, extra: list[str]) -> int:
    from dragoman.demo import server

    with stop_on_signals():
        return server.main(extra)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m dragoman", description="Dragoman: translate LLM API traffic with mitmproxy."
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="start mitmdump with the Dragoman addon (unknown arguments go to mitmdump)")
    _add_run_args(run)
    run.set_defaults(func=_cmd_run)
    cli_record.add_parsers(sub)
    demo = sub.add_parser("demo", help="offline demo: fake upstream + mitmdump (no key needed)")
    demo.add_argument("--port", type=int, default=8080, help="mitmdump port (default 8080)")
    demo.add_argument("--upstream-port", type=int, default=8765, help="fake upstream port (default 8765)")
    demo.add_argument(
        "--target", choices=PROTOCOLS, default="openai-chat", help="protocol the fake upstream is spoken in"
    )
    demo.add_argument("--delay", type=float, default=0.05, help="seconds between streamed events")
    demo.set_defaults(func=_cmd_demo)
    cli_env.add_parser(sub)
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


from dragoman import cli_env  # noqa: E402 - the subcommand modules import helpers from this one
from dragoman import cli_record  # noqa: E402
from dragoman.cli_record import build_record_argv  # noqa: E402
from dragoman.cli_record import build_replay_argv  # noqa: E402
from dragoman.cli_record import dead_port  # noqa: E402
from dragoman.cli_record import describe_replay  # noqa: E402

__all__ = [
    "build_mitmdump_argv",
    "build_record_argv",
    "build_replay_argv",
    "dead_port",
    "describe_replay",
    "entry_script",
    "main",
]

if __name__ == "__main__":
    raise SystemExit(main())
