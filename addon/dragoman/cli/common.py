"""What every ``python -m dragoman`` subcommand shares: finding mitmdump and the entry script, and building
mitmdump's command line from the convenience flags (``--target``, ``--upstream``, ``--api-key``, ...)."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

from dragoman.protocols.profiles import CHOICES as PROFILE_CHOICES

logger = logging.getLogger(__name__)

PROTOCOLS = ("anthropic", "openai-chat", "openai-responses")


def entry_script() -> Path:
    """``addon/dragoman.py`` (next to the package; present in a source checkout / editable install)."""
    package = Path(__file__).resolve().parents[1]
    script = package.parent / "dragoman.py"
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


def redact(arg: str) -> str:
    value = arg.partition("=")[2]
    return arg if value.startswith("env:") else "dragoman_api_key=***"


def run_parser(prog: str = "python -m dragoman run") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, add_help=False)
    add_run_args(ap)
    return ap


def add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", choices=PROTOCOLS, help="sets dragoman_target")
    p.add_argument("--upstream", help="sets dragoman_upstream (and reverse mode to it unless --mode is given)")
    p.add_argument("--api-key", help="sets dragoman_api_key (a key or env:NAME)")
    p.add_argument("--model-map", action="append", help="PATTERN=MODEL; repeatable")
    p.add_argument(
        "--profile", choices=PROFILE_CHOICES, help="sets dragoman_profile (default auto: from the upstream's host)"
    )
    p.add_argument("--port", type=int, help="listen on 127.0.0.1:PORT")
    p.add_argument("--config", help="a routes file (sets dragoman_config; reverse mode to its first upstream)")
