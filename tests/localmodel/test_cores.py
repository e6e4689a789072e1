"""The local model server's thread choice: the cores this process may use, and of those the
share that was idle over a short window; never fewer than one thread."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from harnessctl.localmodel import cores

STAT = """cpu  100 0 100 800 0 0 0 0 0 0
cpu0 50 0 50 400 0 0 0 0 0 0
cpu1 50 0 50 400 0 0 0 0 0 0
intr 12345
procs_running 3
"""


def test_proc_stat_is_read_per_core_idle_and_iowait_counting():
    text = STAT.replace("cpu1 50 0 50 400 0", "cpu1 50 0 50 400 30")
    assert cores.per_core(text) == {0: (400, 500), 1: (430, 530)}
    assert cores.per_core("") == {}


@pytest.mark.parametrize(
    ("idle_ticks", "expected"),
    [((100, 100), 2.0), ((0, 0), 0.0), ((50, 100), 1.5), ((90, 90), 1.8)],
)
def test_idle_cores_over_a_window(idle_ticks, expected):
    before = {0: (400, 500), 1: (400, 500)}
    after = {0: (400 + idle_ticks[0], 600), 1: (400 + idle_ticks[1], 600)}
    assert cores.idle_between(before, after, {0, 1}) == pytest.approx(expected)
    assert cores.idle_between(before, after, {0}) == pytest.approx(idle_ticks[0] / 100)
    assert cores.idle_between(before, after, {0, 7}) is None  # a core it cannot see


@pytest.mark.parametrize(
    ("idle", "allowed", "threads"),
    [(0.0, 2, 1), (0.9, 2, 1), (1.5, 2, 1), (1.8, 2, 2), (2.0, 2, 2), (15.9, 16, 16),
     (7.2, 16, 7), (None, 4, 4), (3.0, 1, 1)],
)  # fmt: skip
def test_a_core_counts_when_it_is_mostly_idle(idle, allowed, threads):
    """Two cores 90% idle are two threads, one and a half are one: a thread on a core
    another process wants stalls every other thread at llama.cpp's barrier."""
    assert cores.threads_for(idle, allowed) == threads


def test_a_cgroup_quota_caps_the_cores(tmp_path):
    cpu_max = tmp_path / "cpu.max"
    assert cores.quota(8, cpu_max) == 8  # no cgroup file: the affinity alone
    cpu_max.write_text("max 100000\n")
    assert cores.quota(8, cpu_max) == 8
    cpu_max.write_text("150000 100000\n")
    assert cores.quota(8, cpu_max) == 2  # 1.5 cores: two threads may run
    cpu_max.write_text("garbage\n")
    assert cores.quota(8, cpu_max) == 8


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_busy_cores_give_one_thread():
    """Every allowed core kept busy by a loop of its own (pinned to it): the window sees
    no idle core, so the server takes one thread, whatever else the machine runs."""
    allowed = sorted(os.sched_getaffinity(0))
    ctx = multiprocessing.get_context("fork")
    loops = [ctx.Process(target=_spin, args=(4.0,), daemon=True) for _ in allowed]
    try:
        for cpu, loop in zip(allowed, loops, strict=True):
            loop.start()
            os.sched_setaffinity(loop.pid, {cpu})
        time.sleep(0.3)  # every loop running
        choice = cores.pick_threads(window_s=0.5)
    finally:
        for loop in loops:
            loop.kill()
            loop.join()
    assert choice.threads == 1 and choice.allowed >= 1
    assert choice.idle is not None and choice.idle < 0.75 * len(allowed), choice
    assert "1 of" in choice.describe()
