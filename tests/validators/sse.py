"""The strict sse validator now lives in the product (``dragoman.lint.sse``); tests import it from here."""

import sys

from dragoman.lint import sse as _impl

sys.modules[__name__] = _impl
