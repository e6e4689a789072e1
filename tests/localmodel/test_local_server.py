"""The local model server itself (llama.cpp, SmolLM2-135M): it picks its threads from the
free cores unless told, measures its speed at start and warns below a floor."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from tests.helpers.ci import unavailable

try:
    import xllamacpp  # noqa: F401  (the `local-model` extra; .ci/run installs it)
except ImportError:
    unavailable("the local model server", "pip install -e '.[local-model]'", module=True)

from harnessctl.localmodel import READY, LocalModel, model_dir

pytestmark = pytest.mark.slow  # starts llama.cpp (the slow tier, as tests/policies' real model)

MODEL_DIR = model_dir()  # read before the tests isolate HOME: the model is fetched once


def test_the_server_picks_its_threads_and_reports_its_speed(caplog):
    with caplog.at_level(logging.WARNING), LocalModel(model_dir=MODEL_DIR) as served:
        assert 1 <= served.threads <= len(os.sched_getaffinity(0))
        assert served.tokens_per_s is not None and served.tokens_per_s > 0
        assert served.slow is (served.tokens_per_s < served.min_speed)
    assert bool(caplog.records) is served.slow  # a warning only below the floor


def test_threads_given_are_used_and_a_speed_below_the_floor_warns():
    """``--threads`` overrides the choice; below ``--min-speed`` the start says so, with
    what a full reply would take, and still serves."""
    cmd = [sys.executable, "-m", "harnessctl.localmodel", "--model-dir", str(MODEL_DIR),
           "--threads", "1", "--min-speed", "100000"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line.startswith(READY), line
        ready = json.loads(line[len(READY) :])
        assert ready["threads"] == 1 and ready["tokens_per_s"] > 0
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "threads: 1 (--threads)" in err
    assert "speed: " in err and "tokens/s generating" in err
    assert "warning: " in err and "below the floor of 100000 tokens/s" in err
    assert "512-token reply would take" in err
