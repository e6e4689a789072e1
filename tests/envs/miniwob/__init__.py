"""The miniwob environment's tests, and what they need from the machine."""

from __future__ import annotations

import importlib.util
import shutil

from tests.helpers.ci import unavailable


def require_browser() -> None:
    """Skip the calling module where MiniWoB++, Selenium or Chromium is missing; under CI
    fail instead (.ci/run installs them: the `miniwob` extra, chromium, chromium-driver)."""
    missing = [m for m in ("miniwob", "selenium") if importlib.util.find_spec(m) is None]
    missing += [b for b in ("chromium", "chromedriver") if shutil.which(b) is None]
    if missing:
        unavailable(
            "the miniwob tests",
            f"missing {', '.join(missing)}: pip install -e '.[miniwob]' and apt-get install "
            "chromium chromium-driver",
            module=True,
        )
