"""The strict search validator now lives in the product (``dragoman.lint.search``); tests import it from here."""

import sys

from dragoman.lint import search as _impl

sys.modules[__name__] = _impl
