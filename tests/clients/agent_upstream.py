"""The fake "agent" upstream of the real-CLI tests: Dragoman's fake upstream running the ``agent`` scenario.

The agent itself (which tool it calls, what it answers after the tool ran) is ``dragoman.demo.agent``;
this module runs it with a per-test configuration (``reset``) and re-exports the markers the tests check.
Every POST is recorded (``requests``: method, path, headers, parsed body, protocol) and, when
``log_path`` is set, appended as one JSON line to that file.
"""

from __future__ import annotations

from pathlib import Path

from npm_clients import Clients
from npm_clients import Run
from npm_clients import run_claude

from dragoman.demo.agent import COMMAND
from dragoman.demo.agent import COMMAND_OUTPUT
from dragoman.demo.agent import ENCRYPTED
from dragoman.demo.agent import EXEC_JS
from dragoman.demo.agent import FINAL_MARK
from dragoman.demo.agent import PATCH_FILE
from dragoman.demo.agent import PATCH_LINE
from dragoman.demo.agent import PATCH_TEXT
from dragoman.demo.agent import SIGNATURE
from dragoman.demo.agent import THINKING
from dragoman.demo.agent import Agent
from dragoman.demo.agent import offered_tools
from dragoman.demo.agent import tool_results
from dragoman.demo.server import FakeUpstream
from dragoman.demo.server import RecordedRequest

__all__ = [
    "COMMAND",
    "COMMAND_OUTPUT",
    "ENCRYPTED",
    "EXEC_JS",
    "FINAL_MARK",
    "PATCH_FILE",
    "PATCH_LINE",
    "PATCH_TEXT",
    "SIGNATURE",
    "THINKING",
    "AgentUpstream",
    "offered_tools",
    "run_claude_loop",
    "summary",
    "tool_results",
]


class AgentUpstream(FakeUpstream):
    """``with AgentUpstream() as up: ... up.url ... up.requests``; configure per test with ``reset``."""

    def __init__(self, log_path: Path | None = None) -> None:
        self.agent = Agent()
        super().__init__(scenario="agent", scenarios={"agent": self.agent}, log_path=log_path)

    def reset(self, *, thinking: bool = False, patch: bool = False, log_path: Path | None = None) -> None:
        with self.lock:
            self.requests = []
            self.agent.thinking = thinking
            self.agent.patch = patch
            self.log_path = log_path

    def model_requests(self) -> list[RecordedRequest]:
        """The POSTs to one of the three endpoints, in arrival order."""
        with self.lock:
            return [r for r in self.requests if r.method == "POST" and r.protocol is not None]


def summary(requests: list[RecordedRequest]) -> str:
    """One line per request (no bodies beyond the shape): for failure messages."""
    lines = []
    for i, r in enumerate(requests):
        if r.protocol is None or not isinstance(r.body, dict):
            lines.append(f"  {i}: {r.method} {r.path}")
            continue
        tools = sorted(offered_tools(r.protocol, r.body))
        results = [t[:80] for t in tool_results(r.protocol, r.body)]
        lines.append(
            f"  {i}: {r.method} {r.path} [{r.protocol}] model={r.body.get('model')} stream={r.body.get('stream')} "
            f"tools={tools[:12]}{'...' if len(tools) > 12 else ''} tool_results={results}"
        )
    return "\n".join(lines) or "  (no requests reached the upstream)"


def run_claude_loop(clients: Clients, port: int, tmp_path: Path) -> Run:
    """Claude Code asked to run ``COMMAND`` with only Bash allowed, through the proxy on ``port``."""
    return run_claude(
        clients,
        f"http://127.0.0.1:{port}",
        f"run {COMMAND}",
        tmp_path / "work",
        tmp_path / "home",
        ["--allowedTools", "Bash"],
    )
