"""The real Gemini CLI (npm ``@google/gemini-cli``, pinned), installed once into ``<npm cache>/gemini``, and one
offline run: ``GOOGLE_GEMINI_BASE_URL`` points it at Dragoman, API-key auth is selected in its settings (see
``shared/clients/captures/gemini-cli-0.61.0``). Installed apart from Claude Code and Codex so their cache
stays valid; ``ensure_gemini`` raises ``ClientsUnavailable`` when npm or the registry cannot be reached.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path

from npm_clients import API_KEY
from npm_clients import INSTALL_TIMEOUT_S
from npm_clients import ClientsUnavailable
from npm_clients import Run
from npm_clients import _run
from npm_clients import base_env
from npm_clients import cache_dir

GEMINI_PKG = "@google/gemini-cli"
GEMINI_VERSION = "0.61.0"
RUN_TIMEOUT_S = 120


def _version(folder: Path) -> str | None:
    try:
        return json.loads((folder / "node_modules" / GEMINI_PKG / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def ensure_gemini() -> Path:
    """The ``gemini`` binary (installed once, under a file lock), or ClientsUnavailable."""
    folder = cache_dir() / "gemini"
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "node_modules" / ".bin" / "gemini"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _version(folder) != GEMINI_VERSION or not exe.exists():
            npm = shutil.which("npm")
            if npm is None:
                raise ClientsUnavailable("npm is not on PATH")
            if not (folder / "package.json").exists():
                (folder / "package.json").write_text('{"name": "dragoman-gemini-cli", "private": true}\n')
            argv = [npm, "install", "--no-audit", "--no-fund", f"{GEMINI_PKG}@{GEMINI_VERSION}"]
            try:
                r = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
            except subprocess.TimeoutExpired as e:
                raise ClientsUnavailable(f"`npm install {GEMINI_PKG}` timed out") from e
            if r.returncode != 0 or not exe.exists():
                raise ClientsUnavailable(
                    f"`npm install {GEMINI_PKG}@{GEMINI_VERSION}` failed: {(r.stderr or r.stdout)[-1500:]}"
                )
    return exe


def run_gemini(exe: Path, base_url: str, prompt: str, workdir: Path, home: Path, timeout: float = RUN_TIMEOUT_S) -> Run:
    """``gemini -p PROMPT --yolo --output-format json`` against ``base_url`` (the CLI appends ``/v1beta/models/...``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    settings = home / ".gemini"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    env = base_env(home)
    env.update(
        {
            "GOOGLE_GEMINI_BASE_URL": base_url,
            "GEMINI_API_KEY": API_KEY,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_TELEMETRY_ENABLED": "false",
            "NO_BROWSER": "1",
            "CI": "1",
        }
    )
    argv = [str(exe), "-p", prompt, "--yolo", "--output-format", "json"]
    return _run(argv, env, workdir, timeout)
