"""The game processes' translation cache (``engine._memo_translation``): a translation made
by one process is loaded by the next from disk, keyed by its inputs; a damaged file is
translated again and replaced; ``off`` keeps nothing. Plain functions stand in for the
translator (it is a pure function of its inputs), so this runs without ALFWorld."""

from __future__ import annotations

import pickle

from harnessctl.envs.alfworld import engine


def _counting():
    calls = []

    def translate(domain, problem, verbose=False, optimize=False):
        calls.append((domain, problem, optimize))
        return {"task": [domain, problem], "optimize": optimize}

    return translate, calls


def test_a_translation_is_made_once_across_processes_and_a_damaged_one_again(tmp_path, monkeypatch):
    monkeypatch.setenv(engine.TRANSLATIONS_ENV, str(tmp_path / "cache"))
    translate, calls = _counting()
    first = engine._memo_translation(translate)  # one process
    assert first("D", "P") == {"task": ["D", "P"], "optimize": False}
    assert first("D", "P", optimize=True)["optimize"] is True
    assert len(calls) == 2
    files = sorted((tmp_path / "cache").glob("*.pickle"))
    assert len(files) == 2
    second = engine._memo_translation(translate)  # another process: loads, never translates
    assert second("D", "P") == {"task": ["D", "P"], "optimize": False}
    assert len(calls) == 2
    assert second("D", "Q")["task"] == ["D", "Q"] and len(calls) == 3  # other inputs
    for path in files:
        path.write_bytes(b"\x80\x05 damaged")
    third = engine._memo_translation(translate)
    assert third("D", "P")["task"] == ["D", "P"] and len(calls) == 4
    repaired = [pickle.loads(p.read_bytes()) for p in files if p.stat().st_size > 20]
    assert {"task": ["D", "P"], "optimize": False} in repaired
    assert not list((tmp_path / "cache").glob(".tmp-*"))  # atomic writes leave nothing


def test_off_keeps_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv(engine.TRANSLATIONS_ENV, "off")
    monkeypatch.setenv("HOME", str(tmp_path))
    translate, calls = _counting()
    engine._memo_translation(translate)("D", "P")
    engine._memo_translation(translate)("D", "P")
    assert len(calls) == 2 and not any(tmp_path.rglob("*.pickle"))
