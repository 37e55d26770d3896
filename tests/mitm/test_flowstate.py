from __future__ import annotations

import json

from dragoman.mitm.flowstate import FlowState
from dragoman.mitm.flowstate import FlowStates
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.translate.plan import Plan


def test_states_and_metadata_are_json():
    ctx = Context()
    ctx.dropped.add("top_k")
    st = FlowState(Plan(Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT), ctx, "claude-x", "gpt-4o", True)
    states = FlowStates()
    states.put("f1", st)
    assert "f1" in states and len(states) == 1 and states.get("f1") is st
    assert json.loads(json.dumps(st.metadata())) == {
        "client": "anthropic",
        "target": "openai-chat",
        "client_model": "claude-x",
        "upstream_model": "gpt-4o",
        "stream": True,
        "dropped": ["top_k"],
        "lossy": [{"path": "top_k", "kind": "dropped", "reason": "the target protocol has no top_k sampling"}],
        "profile": "generic",
    }
    assert states.pop("f1") is st and states.pop("f1") is None and len(states) == 0
