"""The agent upstream (``dragoman.demo.agent``) behind a Chat-compatible provider's rules, for the real CLIs on
Gemini's and DeepSeek V4's Chat endpoints. The rules, and the sources of each, are ``tests/provider_upstream.py``
(``provider_problem``): a request that breaks one is answered the provider's 400, and kept in ``refused``.

* ``gemini``: every tool call the agent makes carries ``extra_content.google.thought_signature`` (a fresh value
  per answer, streamed on the call's first chunk as Gemini sends it, or on the whole message's call); a later
  request whose current-turn tool call does not bring back one issued here is refused.
* ``deepseek`` (V4): with thinking on, the agent answers ``reasoning_content`` before its call; an assistant
  tool-call message without ``reasoning_content`` is refused unless the request turned thinking off.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from agent_upstream import AgentUpstream

from dragoman.demo.wire import CHAT
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from provider_upstream import bad_request
from provider_upstream import provider_problem

DATA = b"data: "


class ProviderAgentUpstream(AgentUpstream):
    """The agent upstream whose ``agent`` scenario answers through the provider's rules."""

    def __init__(self, provider: str, thinking: bool = False) -> None:
        super().__init__()
        self.provider = provider
        self.agent.thinking = thinking
        self.signatures: list[str] = []
        self.refused: list[str] = []
        self.scenarios["agent"] = self._answer

    def _answer(self, request: Request) -> Reply:
        if request.protocol == CHAT:
            problem = provider_problem(self.provider, request.body, set(self.signatures))
            if problem is not None:
                self.refused.append(problem)
                return bad_request(problem, self.provider)
        reply = self.agent(request)
        if self.provider == "gemini" and request.protocol == CHAT:
            self._sign(reply)
        return reply

    def _signature(self) -> str:
        sig = "EiY" + uuid.uuid4().hex + "=="
        self.signatures.append(sig)
        return sig

    def _sign(self, reply: Reply) -> None:
        """Gemini's signature on each call (the first chunk of a streamed call: the one with its id)."""
        if reply.json_body is not None:
            for choice in reply.json_body.get("choices") or ():
                for call in (choice.get("message") or {}).get("tool_calls") or ():
                    call["extra_content"] = {"google": {"thought_signature": self._signature()}}
            return
        for i, event in enumerate(reply.events):
            if not event.startswith(DATA) or b'"tool_calls"' not in event:
                continue
            chunk: dict[str, Any] = json.loads(event[len(DATA) :].strip())
            calls = [c for ch in chunk.get("choices") or () for c in (ch.get("delta") or {}).get("tool_calls") or ()]
            if not any("id" in c for c in calls):
                continue
            for c in calls:
                if "id" in c:
                    c["extra_content"] = {"google": {"thought_signature": self._signature()}}
            reply.events[i] = DATA + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
