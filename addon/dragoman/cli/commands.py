"""The command line's entry point and its own subcommands (``run``, ``demo``, ``fake-upstream``): ``python -m dragoman run|demo|replay|record|fake-upstream|env``.

run            exec mitmdump with the Dragoman addon; convenience flags become ``--set dragoman_*``, every
               other argument goes to mitmdump unchanged
demo           the offline demo: the fake upstream (openai-chat) + mitmdump in reverse mode in front of it
replay         exec mitmdump replaying a recording (reverse mode to a dead local port: no network, no key)
record         exec mitmdump as ``run`` does, recording every exchange under DIR/<session>/
fake-upstream  the scriptable fake LLM upstream alone (see ``dragoman.demo``)
env            the environment lines for a client (proxy, CA path), or the transparent / WireGuard recipe
               (``--transparent``, ``--wireguard``) - see ``dragoman.cli.env_recipes``
usage          the usage ledger as a table or JSON - see ``dragoman.ledger.report``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from dragoman.cli import env_cmd
from dragoman.cli import record_cmd
from dragoman.cli.children import port_taken
from dragoman.cli.children import stop_child
from dragoman.cli.children import stop_on_signals
from dragoman.cli.common import PROTOCOLS
from dragoman.cli.common import add_run_args
from dragoman.cli.common import build_mitmdump_argv
from dragoman.cli.common import redact


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
    shown = [redact(a) if a.startswith("dragoman_api_key=") else a for a in argv]
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
(or use the scenario as the model name). Ctrl-C (or SIGTERM, SIGHUP) stops both.
"""


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
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP (``Stopped``)
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
    add_run_args(run)
    run.set_defaults(func=_cmd_run)
    record_cmd.add_parsers(sub)
    demo = sub.add_parser("demo", help="offline demo: fake upstream + mitmdump (no key needed)")
    demo.add_argument("--port", type=int, default=8080, help="mitmdump port (default 8080)")
    demo.add_argument("--upstream-port", type=int, default=8765, help="fake upstream port (default 8765)")
    demo.add_argument(
        "--target", choices=PROTOCOLS, default="openai-chat", help="protocol the fake upstream is spoken in"
    )
    demo.add_argument("--delay", type=float, default=0.05, help="seconds between streamed events")
    demo.set_defaults(func=_cmd_demo)
    env_cmd.add_parser(sub)
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
