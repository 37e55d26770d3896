"""Command line: ``python -m dragoman run|demo|fake-upstream``.

run            exec mitmdump with the Dragoman addon; convenience flags become ``--set dragoman_*``, every
               other argument goes to mitmdump unchanged
demo           the offline demo: the fake upstream (openai-chat) + mitmdump in reverse mode in front of it
fake-upstream  the scriptable fake LLM upstream alone (see ``dragoman.fake_upstream``)
env            the environment lines for a client (proxy, CA path) - see ``dragoman.env``
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
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
    from dragoman.fake_upstream import FakeUpstream

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
    from dragoman import fake_upstream

    return fake_upstream.main(extra)


def _cmd_env(args: argparse.Namespace, extra: list[str]) -> int:
    from dragoman import env

    if extra:
        raise SystemExit(f"dragoman env: unexpected arguments {' '.join(extra)}")
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
    run.add_argument("--target", choices=PROTOCOLS, help="sets dragoman_target")
    run.add_argument("--upstream", help="sets dragoman_upstream (and reverse mode to it unless --mode is given)")
    run.add_argument("--api-key", help="sets dragoman_api_key (a key or env:NAME)")
    run.add_argument("--model-map", action="append", help="PATTERN=MODEL; repeatable")
    run.add_argument("--port", type=int, help="listen on 127.0.0.1:PORT")
    run.set_defaults(func=_cmd_run)
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

    envp = sub.add_parser("env", help="print the environment lines that route a client through Dragoman")
    envp.add_argument("client", choices=CLIENTS)
    envp.add_argument("--proxy", default=DEFAULT_PROXY, help=f"the proxy's URL (default {DEFAULT_PROXY})")
    envp.add_argument(
        "--confdir", default=DEFAULT_CONFDIR, help=f"mitmproxy's confdir holding the CA (default {DEFAULT_CONFDIR})"
    )
    envp.add_argument("--format", choices=("sh", "dotenv"), default="sh", help="sh (export lines) or dotenv")
    envp.add_argument("--reverse", action="store_true", help="reverse mode: base-URL variables, no CA")
    envp.set_defaults(func=_cmd_env)
    fake = sub.add_parser("fake-upstream", help="run the fake upstream alone (see --help after it)", add_help=False)
    fake.set_defaults(func=_cmd_fake)
    args, extra = ap.parse_known_args(argv)
    if args.cmd == "demo" and extra and extra[0] == "--":
        extra = extra[1:]
    if args.cmd == "run" and extra and extra[0] == "--":
        extra = extra[1:]
    return args.func(args, extra)


if __name__ == "__main__":
    raise SystemExit(main())
