"""The strict responses validator now lives in the product (``dragoman.lint.responses``); tests import it from here."""

import sys

from dragoman.lint import responses as _impl

sys.modules[__name__] = _impl
