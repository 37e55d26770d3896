"""Custom tool input wrapped as function-call arguments and unwrapped again."""

from __future__ import annotations

import json

import pytest

from dragoman.protocols._custom_args import unwrap_custom_args
from dragoman.protocols._custom_args import wrap_custom_args


@pytest.mark.parametrize("raw", ["", "plain", '*** Begin "Patch"\n+x\n*** End', "naïve ✓", '{"input": 1}'])
def test_round_trip(raw):
    wrapped = wrap_custom_args(raw)
    assert json.loads(wrapped) == {"input": raw}
    assert unwrap_custom_args(wrapped) == raw


@pytest.mark.parametrize("arguments", ["not json", '{"input": 5}', '["input"]', '{"other": "x"}', ""])
def test_anything_else_is_returned_unchanged(arguments):
    assert unwrap_custom_args(arguments) == arguments
