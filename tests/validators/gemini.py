"""The strict gemini validator now lives in the product (``dragoman.lint.gemini``); tests import it from here."""

import sys

from dragoman.lint import gemini as _impl

sys.modules[__name__] = _impl
