"""The strict chat validator now lives in the product (``dragoman.lint.chat``); tests import it from here."""

import sys

from dragoman.lint import chat as _impl

sys.modules[__name__] = _impl
