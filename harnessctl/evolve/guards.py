"""Guards of the engineer's reward against patches and records that would game it.

A trained engineer optimises whatever the reward measures, so the reward must measure only
the patch's realised effect:

- :func:`gaming_paths`: a patch may edit only what its direction allows, and never what
  decides how it is judged or what runs around it, whatever the direction's globs say: the
  manifest (``harness.yaml``: the environment, the entry point, the child's identity), hidden
  or byte-code files, interpreter start-up hooks (``sitecustomize.py``, ``*.pth``), or a new
  module that would shadow the standard library or harnessctl's runtime. Such a patch earns
  the recipe's invalid reward before anything runs. (The sandbox keeps the rest out: a patch
  cannot reach the host's files, the gold labels or the store.)
- :func:`shown_pairs` / :func:`reward_pairs` / :func:`reruns_shown_seeds`: the pairs a
  reward re-runs must be seeds the prompt never showed, or a patch could be fitted to the
  very rollouts in its prompt (a seeded simulator replays them).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

from .directions import Direction
from .patch import Block

PROTECTED_NAMES = frozenset({"harness.yaml", "sitecustomize.py", "usercustomize.py"})
PROTECTED_SUFFIXES = (".pth", ".pyc", ".so")
RUNTIME_PREFIXES = ("harnessctl", "hxenv", "hxrt")
_DIGEST = re.compile(r"^### task (?P<task>\S+) \(.*\), seed (?P<seed>-?\d+): ", re.M)


def gaming_paths(direction: Direction, blocks: Iterable[Block], existing: set[str]) -> str | None:
    """Why a patch's paths game the scorer (None: they do not). ``existing``: the parent
    harness's files."""
    for block in blocks:
        path = PurePosixPath(block.path.strip())
        rel = path.as_posix()
        if path.is_absolute() or ".." in path.parts or not path.parts:
            return f"{block.path!r} is not a path inside the harness"
        if not direction.allows(rel):
            return f"{rel} is not in the direction's files ({', '.join(direction.files)})"
        if path.name in PROTECTED_NAMES:
            return f"{rel}: the manifest and start-up hooks decide how a harness is judged"
        if any(part.startswith(".") or part == "__pycache__" for part in path.parts):
            return f"{rel}: a hidden or byte-code path"
        if path.name.endswith(PROTECTED_SUFFIXES):
            return f"{rel}: not source a harness may carry"
        new_module = rel not in existing and path.suffix == ".py"
        if new_module and (
            path.stem in sys.stdlib_module_names or path.stem.startswith(RUNTIME_PREFIXES)
        ):
            return f"{rel}: a new module named like one the runtime imports would shadow it"
    return None


def shown_pairs(prompt: Iterable[Any]) -> set[tuple[str, int]]:
    """The (task, seed) pairs whose rollouts the prompt's failure digests show."""
    pairs = set()
    for message in prompt:
        content = message["content"] if isinstance(message, dict) else message.content
        for match in _DIGEST.finditer(content or ""):
            pairs.add((match["task"], int(match["seed"])))
    return pairs


def reward_pairs(recipe: Any) -> set[tuple[str, int]] | None:
    """The (task, seed) pairs the recipe re-runs; None when they are drawn as it runs (a
    sequential gate without recorded seeds: fresh ones after the parent's evaluation)."""
    if recipe.gate is None:  # the same-batch design: the record's own pairs
        return {(str(t), int(s)) for t, s in [*recipe.batch, *recipe.control]}
    tasks = {str(t) for t, _ in [*recipe.batch, *recipe.control]}
    if recipe.seeds is None:
        return None
    return {(t, int(s)) for t in tasks for s in recipe.seeds}


def reruns_shown_seeds(prompt: Iterable[Any], recipe: Any) -> list[tuple[str, int]]:
    """The pairs a reward would re-run that the prompt shows (empty: none, as it must be)."""
    shown = shown_pairs(prompt)
    pairs = reward_pairs(recipe)
    if pairs is None:  # fresh seeds start past the parent evaluation's
        first = recipe.seed + (recipe.rollouts or 3)
        return sorted(p for p in shown if p[1] >= first)
    return sorted(shown & pairs)
