"""The strict protocol validators live in the product (``dragoman.lint``, also the live lint option);
the tests keep importing them as ``validators`` through these thin shims."""

from dragoman.lint import Summary
from dragoman.lint import ToolCall
from dragoman.lint import is_int
from dragoman.lint import load_body
from dragoman.lint import need
from dragoman.lint import parse_json_object

__all__ = ["Summary", "ToolCall", "is_int", "load_body", "need", "parse_json_object"]
