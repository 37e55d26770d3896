"""Blocks held while a tool block is open on the wire (``stream_hold``)."""

from __future__ import annotations

from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.protocols.anthropic_messages import CODEC
from dragoman.protocols.anthropic_messages.stream_hold import BlockStatus
from dragoman.protocols.anthropic_messages.stream_hold import OutBlock
from dragoman.protocols.anthropic_messages.stream_hold import Run
from dragoman.protocols.anthropic_messages.stream_hold import hold
from dragoman.protocols.base import Context

from .helpers import accumulate_raw
from .helpers import check_wire_order


def test_pending_tool_call_is_buffered_as_joined_text():
    """A tool call whose deltas arrive while another tool block is open is buffered as text pieces
    (compacted), not one IR object per fragment (issue 6), and replays its full arguments."""

    e = CODEC.stream_encoder(Context())
    head = [
        MessageStart("m1", "gpt"),
        BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="call_a", name="a"),
        BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="call_b", name="b"),
    ]
    out = b"".join(e.encode(ev) for ev in head)
    frags_a = ['{"x":"', *["a"] * 3000, '"}']
    frags_b = ['{"y":"', *["é"] * 3000, '"}']
    for fa, fb in zip(frags_a, frags_b):
        out += e.encode(ToolArgsDelta(0, fa))
        out += e.encode(ToolArgsDelta(1, fb))
    buffered = e._blocks[1].buffer
    assert len(buffered) == 1 and type(buffered[0]) is Run
    assert len(buffered[0].parts) <= 3002 // 256 + 256  # compacted, not one piece per fragment
    for ev in (BlockStop(0), BlockStop(1), MessageDelta(StopReason.TOOL_USE, Usage(output_tokens=9)), MessageStop()):
        out += e.encode(ev)
    out += e.close()
    check_wire_order(out)
    blocks = accumulate_raw(out)
    assert [(b["id"], b["args"]) for b in blocks] == [("call_a", "".join(frags_a)), ("call_b", "".join(frags_b))]


def test_run_compacts_and_replays_one_delta():
    run = Run(ToolArgsDelta, 3, "a")
    for _ in range(1000):
        run.add("b")
    assert len(run.parts) < 1001 // 256 + 256
    assert run.event() == ToolArgsDelta(3, "a" + "b" * 1000)


def test_hold_joins_consecutive_deltas_of_one_type_only():
    b = OutBlock(BlockStart(4, BlockKind.THINKING), None)
    for ev in [
        ThinkingDelta(4, "x"),
        ThinkingDelta(4, "y"),
        SignatureDelta(4, signature="s"),
        ThinkingDelta(4, "z"),
        TextDelta(4, "t"),
        BlockStop(4),
    ]:
        hold(b, ev)
    replay = [ev.event() if isinstance(ev, Run) else ev for ev in b.buffer]
    assert replay == [
        ThinkingDelta(4, "xy"),
        SignatureDelta(4, signature="s"),
        ThinkingDelta(4, "z"),
        TextDelta(4, "t"),
        BlockStop(4),
    ]
    assert b.status is BlockStatus.PENDING and b.wire_index == -1
