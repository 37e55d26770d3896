"""The real CLI clients, installed from npm once into a cache folder, and one clean run of each.

Cache folder: ``$DRAGOMAN_NPM_CLIENTS``, default ``<repo>/.cache/npm-clients``. The versions are pinned to
the ones the captures in shared/clients were made with. ``ensure_clients()`` raises
``ClientsUnavailable`` (with the reason) when npm or the registry cannot be reached; the fixture turns
that into a skip, or a failure when ``DRAGOMAN_REQUIRE_CLIENTS=1`` (CI).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLAUDE_PKG = "@anthropic-ai/claude-code"
CLAUDE_VERSION = "2.1.197"
CODEX_PKG = "@openai/codex"
CODEX_VERSION = "0.169.0"
INSTALL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 90
API_KEY = "sk-dragoman-client-test"


class ClientsUnavailable(Exception):
    """npm, the registry or the installed binaries are not usable here."""


@dataclass(frozen=True)
class Clients:
    folder: Path
    claude: Path
    codex: Path


@dataclass
class Run:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return f"argv: {self.argv}\nrc: {self.returncode}\n--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"


def cache_dir() -> Path:
    env = os.environ.get("DRAGOMAN_NPM_CLIENTS", "").strip()
    return Path(env).expanduser().resolve() if env else ROOT / ".cache" / "npm-clients"


def _installed_version(folder: Path, pkg: str) -> str | None:
    try:
        return json.loads((folder / "node_modules" / pkg / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def _complete(folder: Path) -> bool:
    bins = folder / "node_modules" / ".bin"
    return (
        _installed_version(folder, CLAUDE_PKG) == CLAUDE_VERSION
        and _installed_version(folder, CODEX_PKG) == CODEX_VERSION
        and (bins / "claude").exists()
        and (bins / "codex").exists()
    )


def _tail(s: str, n: int = 1500) -> str:
    return s.strip()[-n:]


def ensure_clients() -> Clients:
    """Install (once, under a file lock) and return the pinned clients, or raise ClientsUnavailable."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ClientsUnavailable(f"cannot create the npm cache folder {folder}: {e}") from e
    gitignore = folder / ".gitignore"
    if not gitignore.exists():
        gitignore.write_text("*\n")  # the cache folder never shows up in git status
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # several xdist workers: one installs, the others wait
        if not _complete(folder):
            _install(folder)
    bins = folder / "node_modules" / ".bin"
    clients = Clients(folder, bins / "claude", bins / "codex")
    _check_runs(clients)
    return clients


def _install(folder: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ClientsUnavailable("npm is not on PATH (install Node.js >= 18 to run the real-client tests)")
    if not (folder / "package.json").exists():
        (folder / "package.json").write_text(json.dumps({"name": "dragoman-npm-clients", "private": True}) + "\n")
    argv = [
        npm,
        "install",
        "--no-audit",
        "--no-fund",
        "--fetch-retries=1",
        "--fetch-retry-maxtimeout=20000",
        f"{CLAUDE_PKG}@{CLAUDE_VERSION}",
        f"{CODEX_PKG}@{CODEX_VERSION}",
    ]
    try:
        r = subprocess.run(
            argv, cwd=folder, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as e:
        raise ClientsUnavailable(
            f"`npm install` of the clients timed out after {INSTALL_TIMEOUT_S} s (registry unreachable?)"
        ) from e
    if r.returncode != 0:
        raise ClientsUnavailable(
            f"`npm install` of {CLAUDE_PKG}@{CLAUDE_VERSION} and {CODEX_PKG}@{CODEX_VERSION} failed (rc {r.returncode}):\n{_tail(r.stderr or r.stdout)}"
        )
    if not _complete(folder):
        raise ClientsUnavailable(
            f"`npm install` succeeded but the client binaries are missing under {folder}/node_modules/.bin"
        )


def _check_runs(clients: Clients) -> None:
    for exe, want in ((clients.claude, CLAUDE_VERSION), (clients.codex, CODEX_VERSION)):
        try:
            r = subprocess.run(
                [str(exe), "--version"],
                capture_output=True,
                text=True,
                timeout=60,
                env=base_env(Path("/tmp")),
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ClientsUnavailable(f"{exe} --version could not run: {e}") from e
        if r.returncode != 0 or want not in r.stdout:
            raise ClientsUnavailable(
                f"{exe} --version gave rc {r.returncode}, expected {want}: {_tail(r.stdout + r.stderr, 500)}"
            )


def base_env(home: Path) -> dict[str, str]:
    """A clean environment (``env -i`` style): nothing from the caller's shell leaks in."""
    path = ["/usr/local/bin", "/usr/bin", "/bin"]
    node = shutil.which("node")
    if node:
        path.insert(0, str(Path(node).parent))
    return {
        "PATH": ":".join(dict.fromkeys(path)),
        "HOME": str(home),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> Run:
    try:
        r = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Run(argv, -9, out, err + f"\n[timed out after {timeout} s]")
    return Run(argv, r.returncode, r.stdout, r.stderr)


def run_claude(
    clients: Clients,
    base_url: str,
    prompt: str,
    workdir: Path,
    home: Path,
    extra_args: Sequence[str] = (),
    timeout: float = RUN_TIMEOUT_S,
) -> Run:
    """``claude -p PROMPT --output-format json`` against ``base_url`` (no /v1)."""
    home.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    env = base_env(home)
    env.update(
        {
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": API_KEY,
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_BUG_COMMAND": "1",
            "DISABLE_COST_WARNINGS": "1",
        }
    )
    argv = [str(clients.claude), "-p", prompt, "--output-format", "json", *extra_args]
    return _run(argv, env, workdir, timeout)


def codex_config(base_url: str, model: str | None, websockets: bool = False) -> str:
    """A ``CODEX_HOME/config.toml`` with a custom provider (the built-in one ignores OPENAI_BASE_URL);
    ``websockets``: the provider speaks Responses over WebSocket first (``supports_websockets``)."""
    lines = ['model_provider = "dragoman"', "check_for_update_on_startup = false"]
    if model:
        lines.append(f"model = {json.dumps(model)}")
    lines += [
        "",
        "[model_providers.dragoman]",
        'name = "Dragoman"',
        f"base_url = {json.dumps(base_url)}",
        'env_key = "DRAGOMAN_API_KEY"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "stream_idle_timeout_ms = 30000",
        *(["supports_websockets = true"] if websockets else []),
    ]
    return "\n".join(lines) + "\n"


def run_codex(
    clients: Clients,
    base_url: str,
    prompt: str,
    workdir: Path,
    codex_home: Path,
    model: str | None = None,
    resume: bool = False,
    timeout: float = RUN_TIMEOUT_S,
    extra_config: str = "",
    websockets: bool = False,
) -> Run:
    """``codex exec PROMPT`` with a ``[model_providers.dragoman]`` pointing at ``base_url`` (with /v1);
    ``extra_config``: top-level ``config.toml`` lines (e.g. ``model_context_window = N``).

    ``resume=True``: ``codex exec resume --last PROMPT``, a new turn of the newest session in ``codex_home``.
    """
    codex_home.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(extra_config + codex_config(base_url, model, websockets))
    env = base_env(codex_home / "home")
    env.update({"CODEX_HOME": str(codex_home), "DRAGOMAN_API_KEY": API_KEY})
    (codex_home / "home").mkdir(exist_ok=True)
    argv = [
        str(clients.codex),
        "exec",
        *(["resume", "--last"] if resume else ["--color", "never"]),
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        # no background traffic (github.com plugin sync, chatgpt.com analytics)
        "-c",
        "analytics.enabled=false",
        "--disable",
        "plugins",
        "--disable",
        "apps",
        prompt,
    ]
    return _run(argv, env, workdir, timeout)


def explain(run: Run, upstream_summary: str, proxy_log: str) -> str:
    """Everything needed to see why a client run failed, for an assertion message."""
    return (
        f"{run.describe()}\n--- upstream saw ---\n{upstream_summary}\n--- mitmdump log (tail) ---\n{proxy_log[-5000:]}"
    )
