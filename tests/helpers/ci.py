"""Tests that need something from the machine (a Docker engine, Chromium, PostgreSQL, Ray)
skip with the reason where it is missing, and fail instead under CI (``CI`` set, as
``.ci/run`` does): CI must exercise those paths, never skip them silently."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(what: str, reason: str, *, module: bool = False) -> NoReturn:
    """Skip the current test (the whole module with ``module``, called at import) with
    ``reason``; under CI, fail: ``what`` must run there."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must run {what}, but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=module)
