"""Fixtures shared by the tests of the addon layer: a ``Translate`` addon in a mitmproxy test context."""

from __future__ import annotations

import pytest
from mitmproxy.test import taddons

from dragoman.mitm.translate_addon import Translate


@pytest.fixture
def addon():
    return Translate()


@pytest.fixture
def tctx(addon):
    with taddons.context(addon) as tctx:
        yield tctx
