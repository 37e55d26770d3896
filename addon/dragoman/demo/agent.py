"""The ``agent`` scenario: a tiny tool-using model that real CLI clients (Claude Code, Codex) drive through a loop.

  * a request whose conversation holds no tool result -> ONE tool call the client can execute, picked
    from the tools the request offers:
      - ``apply_patch`` (only with ``patch=True``): a patch adding ``PATCH_FILE``;
      - ``Bash`` (Claude Code): ``{"command": COMMAND}``;
      - Codex's shell tools: ``exec_command`` ``{"cmd"}``, ``shell_command`` ``{"command"}``,
        ``shell`` ``{"command": [...]}``;
      - ``exec`` (Codex code mode, a freeform JavaScript tool): a script calling ``tools.exec_command``.
    A freeform (custom) tool that reached us as a function with one string property is filled through
    that property; a Responses ``custom`` tool is answered with a ``custom_tool_call``.
      - ``run_shell_command`` (Gemini CLI): ``{"command": COMMAND}``.
  * a request that carries a tool result -> a final text ``FINAL_MARK`` + the tool's output.
  * a request that offers no tool and asks for structured output (Gemini CLI's routing classifier) ->
    ``JSON_ANSWER``.

``thinking=True`` puts a reasoning part before the tool call: Anthropic a ``thinking`` block with
``SIGNATURE``, Chat ``reasoning_content``, Responses a ``reasoning`` item with ``ENCRYPTED`` (and a
summary). Whether the follow-up request gave it back unchanged is for the tests to check on the requests
the server recorded. Ids are random per answer, as a real model's are.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.answer import Ids
from dragoman.demo.answer import pieces
from dragoman.demo.render import render
from dragoman.demo.wire import ANTHROPIC
from dragoman.demo.wire import CHAT
from dragoman.demo.wire import GEMINI
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request

COMMAND = "echo dragoman-ok"
COMMAND_OUTPUT = "dragoman-ok"
FINAL_MARK = "dragoman-final"
THINKING = "I should run the command the user asked for."
SIGNATURE = "EqQBCkYIBxgCKkAsig-dragoman-test-0123456789abcdefABCDEF+/=="
ENCRYPTED = "gAAAAABenc-dragoman-test-reasoning-blob=="
REASONING_SUMMARY = "Running the command."
PATCH_FILE = "dragoman_patch.txt"
PATCH_LINE = "patched by dragoman"
PATCH_TEXT = f"*** Begin Patch\n*** Add File: {PATCH_FILE}\n+{PATCH_LINE}\n*** End Patch\n"
EXEC_JS = f"const r = await tools.exec_command({{cmd: {json.dumps(COMMAND)}}});\ntext(r);\n"
#: the answer to a request for structured output: any JSON object will do for the clients that ask one
JSON_ANSWER = '{"complexity_reasoning": "a single shell command", "complexity_score": 10}'
USAGE_IN = 100
USAGE_OUT = 20

#: name -> (kind, JSON schema): kind is "function" or "custom" (a freeform tool, raw input)
Tools = dict[str, tuple[str, dict[str, Any]]]


def _rid(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


# -- reading a request --------------------------------------------------------------------------------------


def _flatten_responses_tools(tools: Any, items: Any) -> list[dict[str, Any]]:
    """Responses tools, with namespaces opened and the ``additional_tools`` input items added."""
    out: list[dict[str, Any]] = []

    def walk(ts: Any) -> None:
        for t in ts or []:
            if isinstance(t, dict) and t.get("type") == "namespace":
                walk(t.get("tools"))
            elif isinstance(t, dict):
                out.append(t)

    walk(tools)
    for it in items if isinstance(items, list) else []:
        if isinstance(it, dict) and it.get("type") == "additional_tools":
            walk(it.get("tools"))
    return out


def offered_tools(protocol: str, body: dict[str, Any]) -> Tools:
    """name -> (kind, JSON schema) of the tools a request offers (tools without a name are left out)."""
    found: list[tuple[Any, str, Any]] = []  # (name, kind, schema)
    if protocol == ANTHROPIC:
        for t in body.get("tools") or []:
            if isinstance(t, dict) and t.get("type") in (None, "custom"):
                found.append((t.get("name"), "function", t.get("input_schema")))
    elif protocol == GEMINI:
        for t in body.get("tools") or []:
            for fd in (t.get("functionDeclarations") or []) if isinstance(t, dict) else []:
                if isinstance(fd, dict):
                    found.append((fd.get("name"), "function", fd.get("parametersJsonSchema") or fd.get("parameters")))
    elif protocol == CHAT:
        for t in body.get("tools") or []:
            if isinstance(t, dict) and t.get("type") in ("function", "custom"):
                spec = t.get(t["type"]) or {}
                found.append((spec.get("name"), t["type"], spec.get("parameters") if t["type"] == "function" else {}))
    else:
        for t in _flatten_responses_tools(body.get("tools"), body.get("input")):
            if t.get("type") in ("function", "custom"):
                found.append((t.get("name"), t["type"], t.get("parameters") if t["type"] == "function" else {}))
    return {name: (kind, schema or {}) for name, kind, schema in found if isinstance(name, str)}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _text_of(c.get("text", c.get("content", ""))) if isinstance(c, dict) else str(c) for c in content
        )
    if content is None:
        return ""
    return json.dumps(content)


def tool_results(protocol: str, body: dict[str, Any]) -> list[str]:
    """The texts of every tool result in the conversation, in order."""
    out: list[str] = []
    if protocol == ANTHROPIC:
        for m in body.get("messages") or []:
            content = m.get("content")
            for b in content if isinstance(content, list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    out.append(_text_of(b.get("content")))
    elif protocol == GEMINI:
        for c in body.get("contents") or []:
            for p in (c.get("parts") or []) if isinstance(c, dict) else []:
                fr = p.get("functionResponse") if isinstance(p, dict) else None
                resp = fr.get("response") if isinstance(fr, dict) else None
                if isinstance(resp, dict):
                    value = resp.get("output", resp.get("error", resp))
                    out.append(value if isinstance(value, str) else _text_of(value))
    elif protocol == CHAT:
        for m in body.get("messages") or []:
            if m.get("role") == "tool":
                out.append(_text_of(m.get("content")))
    else:
        items = body.get("input")
        for it in items if isinstance(items, list) else []:
            if isinstance(it, dict) and it.get("type") in ("function_call_output", "custom_tool_call_output"):
                out.append(_text_of(it.get("output")))
    return out


# -- choosing the call --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    name: str
    arguments: str  #: JSON text for a function, raw input for a custom tool
    custom: bool = False


def _single_string_property(schema: dict[str, Any]) -> str | None:
    props = schema.get("properties") or {}
    if len(props) == 1:
        name, spec = next(iter(props.items()))
        if isinstance(spec, dict) and spec.get("type") == "string":
            return str(name)
    return None


def wants_json(protocol: str, body: dict[str, Any]) -> bool:
    """The request asks for structured output (a JSON answer)."""
    if protocol == ANTHROPIC:
        oc = body.get("output_config")
        return isinstance(oc, dict) and "format" in oc
    if protocol == CHAT:
        rf = body.get("response_format")
        return isinstance(rf, dict) and rf.get("type") in ("json_object", "json_schema")
    if protocol == GEMINI:
        g = body.get("generationConfig")
        return isinstance(g, dict) and g.get("responseMimeType") == "application/json"
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    return isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")


def choose_call(tools: Tools, patch: bool) -> Choice | None:
    """The one call to make, from the tools offered (None: nothing usable)."""

    def freeform(name: str, raw: str) -> Choice:
        kind, schema = tools[name]
        if kind == "custom":
            return Choice(name, raw, custom=True)
        return Choice(name, json.dumps({_single_string_property(schema) or "input": raw}))

    if patch and "apply_patch" in tools:
        return freeform("apply_patch", PATCH_TEXT)
    for name, args in (
        ("Bash", {"command": COMMAND, "description": "Print the test marker"}),
        ("exec_command", {"cmd": COMMAND}),
        ("shell_command", {"command": COMMAND}),
        ("shell", {"command": ["bash", "-lc", COMMAND]}),
        ("run_shell_command", {"command": COMMAND, "description": "Print the test marker"}),
    ):
        if name in tools:
            return Choice(name, json.dumps(args))
    if "exec" in tools:
        return freeform("exec", EXEC_JS)
    return None


# -- the scenario -------------------------------------------------------------------------------------------


@dataclass
class Agent:
    """The scenario (a callable); tests flip ``thinking`` / ``patch`` between runs."""

    thinking: bool = False
    patch: bool = False

    def __call__(self, request: Request) -> Reply:
        return render(request, self.answer(request.protocol, request.body))

    def answer(self, protocol: str, body: dict[str, Any]) -> Answer:
        ids = Ids(message=_rid("msg_"), completion=_rid("chatcmpl-"), response=_rid("resp_"), reasoning=_rid("rs_"))
        results = tool_results(protocol, body)
        if results:
            return self._say(f"{FINAL_MARK}: the tool printed {results[-1].strip()[:400]}", ids)
        tools = offered_tools(protocol, body)
        if not tools and wants_json(protocol, body):
            return self._say(JSON_ANSWER, ids)
        choice = choose_call(tools, self.patch)
        if choice is None:
            return self._say(f"no usable tool offered; tools were {sorted(tools)}", ids)
        hexid = uuid.uuid4().hex[:24]
        call = Call(
            call_id=("toolu_" if protocol == ANTHROPIC else "call_") + hexid,
            name=choice.name,
            fragments=pieces(choice.arguments),
            item_id=_rid("ctc_" if choice.custom else "fc_"),
            custom=choice.custom,
        )
        return Answer(
            thinking=pieces(THINKING) if self.thinking else (),
            signature=SIGNATURE,
            encrypted=ENCRYPTED,
            summary=pieces(REASONING_SUMMARY),
            calls=(call,),
            usage_in=USAGE_IN,
            usage_out=USAGE_OUT,
            reasoning_tokens=5 if self.thinking else 0,
            ids=ids,
        )

    @staticmethod
    def _say(text: str, ids: Ids) -> Answer:
        return Answer(text=pieces(text), usage_in=USAGE_IN, usage_out=USAGE_OUT, ids=ids)
