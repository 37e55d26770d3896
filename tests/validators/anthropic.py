"""The strict anthropic validator now lives in the product (``dragoman.lint.anthropic``); tests import it from here."""

import sys

from dragoman.lint import anthropic as _impl

sys.modules[__name__] = _impl
