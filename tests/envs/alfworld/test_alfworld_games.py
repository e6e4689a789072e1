"""Reading ALFWorld game files: the shipped sample, and broken files named one by one."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from harnessctl.envs.alfworld.games import GAME_FILE, TASK_TYPES, load_games
from tests.helpers import ROOT

SAMPLE = ROOT / "examples" / "alfworld" / "games"


def test_the_shipped_sample_loads_six_games_of_each_type():
    loaded = load_games(SAMPLE)
    assert loaded.problems == []
    assert Counter(t.category for t in loaded.tasks) == {kind: 6 for kind in TASK_TYPES}
    task = loaded.tasks[0]
    game_dir, trial = task.record["game_dir"].split("/")
    assert task.id == f"{game_dir}.{trial.removeprefix('trial_')}" and task.env == "alfworld"
    assert task.record["walkthrough"] and task.record["solvable"] is True
    assert len({t.id for t in loaded.tasks}) == 36 == len({t.content_hash for t in loaded.tasks})


def _copy(games: list[Path], dest: Path) -> list[Path]:
    out = []
    for path in games:
        target = dest / path.parent.parent.name / path.parent.name / GAME_FILE
        target.parent.mkdir(parents=True)
        shutil.copyfile(path, target)
        out.append(target)
    return out


def test_each_broken_game_is_a_problem_naming_its_file_and_field(tmp_path):
    sample = sorted(SAMPLE.rglob(GAME_FILE))
    good, not_json, no_walk, unsolvable, empty = _copy(sample[:5], tmp_path / "split")
    not_json.write_text("{not json")
    data = json.loads(no_walk.read_text())
    del data["walkthrough"]
    no_walk.write_text(json.dumps(data))
    data = json.loads(unsolvable.read_text())
    unsolvable.write_text(json.dumps({**data, "solvable": False}))
    empty.write_text(json.dumps({**data, "walkthrough": []}))
    stray = tmp_path / "split" / "make_coffee-Mug-None-Machine-1" / "trial_T1" / GAME_FILE
    stray.parent.mkdir(parents=True)
    shutil.copyfile(good, stray)
    loaded = load_games(tmp_path / "split")
    assert [t.source for t in loaded.tasks] == [f"{good}:1"]  # the rest still load
    problems = {p.file: p.message for p in loaded.problems}
    assert problems[str(not_json)].startswith("(file): not JSON")
    assert problems[str(no_walk)].startswith("walkthrough: missing")
    assert problems[str(unsolvable)].startswith("solvable: false")
    assert problems[str(empty)].startswith("walkthrough: empty")
    assert "task type 'make_coffee' is not one of ALFWorld's six" in problems[str(stray)]


def test_an_empty_directory_is_a_problem_not_silence(tmp_path):
    loaded = load_games(tmp_path)
    assert loaded.tasks == [] and "no game.tw-pddl" in loaded.problems[0].message
