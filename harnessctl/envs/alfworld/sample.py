"""Copy a seeded sample of ALFWorld games, stratified by task type, keeping the release's
layout: the shipped `examples/alfworld/games/` is

    python -m harnessctl.envs.alfworld.sample ../shared/data/alfworld/valid_seen \
        examples/alfworld/games --per-type 6 --seed 0

Within each task type, games are ordered by sha256("<seed>:<task id>") and the first
--per-type are taken (all of a smaller type). Broken game files are reported and skipped.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
from pathlib import Path

from .games import GAME_FILE, TASK_TYPES, load_games


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a directory of ALFWorld games")
    parser.add_argument("dest", type=Path, help="where the sample goes (must not exist)")
    parser.add_argument("--per-type", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    loaded = load_games(args.source)
    for problem in loaded.problems:
        print(f"skipped {problem}")
    if args.dest.exists():
        raise SystemExit(f"{args.dest} exists: choose a new directory")
    for kind in TASK_TYPES:
        games = [t for t in loaded.tasks if t.category == kind]
        games.sort(key=lambda t: hashlib.sha256(f"{args.seed}:{t.id}".encode()).hexdigest())
        for task in games[: args.per_type]:
            target = args.dest / task.record["game_dir"] / GAME_FILE
            target.parent.mkdir(parents=True)
            shutil.copyfile(args.source / task.record["game_dir"] / GAME_FILE, target)
        print(f"{kind}: {min(len(games), args.per_type)} of {len(games)}")


if __name__ == "__main__":
    main()
