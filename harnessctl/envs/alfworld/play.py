"""Playing ALFWorld games on the host with ALFWorld's own package (``textworld[pddl]`` and its
ALFRED name demangler), in this process.

A game is TextWorld's PDDL environment (``textworld.envs.pddl.PddlEnv``) wrapped as ALFWorld
plays it (``AlfredDemangler``: objects named "desk 1", not mangled ids); the game file's JSON
is loaded directly, so no game file is written anywhere. Three facts about that stack shape
this module:

- each ``PddlEnv`` loads its own copy of fast-downward's 34 MB shared library and never
  unloads it, so environments are pooled (:class:`_Pool`) and reused by later episodes
  rather than built per rollout;
- fast-downward's PDDL-to-SAS translation sets module globals (and ``sys.argv``) while it
  runs, so it is not thread-safe: every call into the game holds one lock (episodes of
  concurrent rollouts take turns; a step is ~0.05-0.15 s of the game's own time);
- a reset translates the game's PDDL four times (~1-3 s of pure Python). The translation is a
  pure function of (domain, problem, options), so it is memoised (:func:`_memo_translation`):
  the first reset of a game pays it, later resets of the same game (other seeds, other
  harnesses) take a fraction of a second.

Nothing here reaches the harness directly: :mod:`harnessctl.envs.alfworld` turns a
:class:`GameView` into the observation and public info of a step.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from harnessctl.errors import ConfigError

NOTHING = "Nothing happens."
"""ALFWorld's answer to a command that is not admissible (nothing in the game changes)."""
INSTALL_HINT = "pip install 'harnessctl[alfworld]'"
_LOCK = threading.RLock()


@dataclass(frozen=True)
class GameView:
    """What the game shows after a reset or a step."""

    observation: str
    won: bool
    admissible: tuple[str, ...]


def require_package() -> None:
    """Raise ``ConfigError`` naming the extra when ALFWorld's package is not installed."""
    import importlib.util

    for module in ("alfworld", "textworld", "fast_downward"):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(
                "env",
                f"the alfworld environment plays games with ALFWorld's package, and {module!r} "
                f"is not installed: {INSTALL_HINT}",
            )


def _memo_translation(translate: Any) -> Any:
    """``fast_downward.pddl2sas`` memoised on its arguments; ``sys.argv`` restored after it
    (the translator rewrites it to parse its own options)."""

    @functools.lru_cache(maxsize=128)
    def cached(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
        argv = list(sys.argv)
        try:
            return translate(domain, problem, verbose=verbose, optimize=optimize)
        finally:
            sys.argv[:] = argv

    cached.__wrapped_translation__ = translate  # type: ignore[attr-defined]
    return cached


@functools.cache
def _stack() -> tuple[Any, Any]:
    """(PddlEnv class, AlfredDemangler class), imported once (textworld takes ~1 s)."""
    require_package()
    import fast_downward
    import textworld  # noqa: F401  (registers the PDDL backend's logic)
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
    from textworld.envs.pddl import PddlEnv

    if not hasattr(fast_downward.pddl2sas, "__wrapped_translation__"):
        fast_downward.pddl2sas = _memo_translation(fast_downward.pddl2sas)
    return PddlEnv, AlfredDemangler


class _Pool:
    """Idle game environments (each holds a private copy of the planner library)."""

    def __init__(self) -> None:
        self.idle: list[Any] = []
        self.created = 0

    def take(self) -> Any:
        if self.idle:
            return self.idle.pop()
        pddl_env, demangler = _stack()
        import textworld

        request = textworld.EnvInfos(won=True, admissible_commands=True)
        self.created += 1
        return demangler(pddl_env(request))

    def give_back(self, env: Any) -> None:
        self.idle.append(env)


_POOL = _Pool()


def pool_size() -> int:
    """How many game environments this process has built (reused ones counted once)."""
    return _POOL.created


def _view(state: Any) -> GameView:
    return GameView(
        observation=str(state.feedback or ""),
        won=bool(state["won"]),
        admissible=tuple(state["admissible_commands"] or ()),
    )


class _Memo:
    """Game answers already computed, keyed by (game, commands since the reset): the games
    are deterministic (a PDDL state machine, the first production of each grammar rule, no
    shuffling of names), so the same commands from the same start give the same answer.
    Bounded: 20,000 answers (least recently used out first), some tens of MB."""

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self.views: OrderedDict[tuple[str, tuple[str, ...]], GameView] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key: tuple[str, tuple[str, ...]]) -> GameView | None:
        view = self.views.get(key)
        if view is None:
            self.misses += 1
            return None
        self.views.move_to_end(key)
        self.hits += 1
        return view

    def put(self, key: tuple[str, tuple[str, ...]], view: GameView) -> None:
        self.views[key] = view
        if len(self.views) > self.limit:
            self.views.popitem(last=False)


_MEMO = _Memo()


def memo_stats() -> dict[str, int]:
    """Hits, misses and size of this process's memo of game answers."""
    return {"hits": _MEMO.hits, "misses": _MEMO.misses, "size": len(_MEMO.views)}


class Game:
    """One ALFWorld game being played: ``reset()`` and ``step(command)``, each a
    :class:`GameView`; ``close()`` hands the environment back to the pool.

    With ``memo`` (the default) an answer already computed for the same game and the same
    commands since the reset comes from memory, and the game itself only runs from the
    first command it has not seen in that position (catching up by replaying the episode's
    earlier commands): replays, paired seeds and sibling harnesses mostly retrace paths
    already played. A command that is not admissible is answered as the game answers it
    (``PddlEnv`` runs only admissible commands; any other is "Nothing happens." with the
    state, the admissible commands and ``won`` unchanged) without running it, and is left
    out of the path. ``memo=False`` runs every command in the game."""

    def __init__(self, data: dict[str, Any], memo: bool = True) -> None:
        self.data = {k: data[k] for k in ("pddl_domain", "grammar", "pddl_problem")}
        canonical = json.dumps(self.data, sort_keys=True).encode("utf-8")
        self.key = hashlib.sha256(canonical).hexdigest()
        self.memo = memo
        self.commands: list[str] = []
        self._env: Any = None
        self._synced = -1  # commands of self.commands the environment has run (-1: not reset)
        self._current: GameView | None = None  # the environment's view at ``_synced``
        self._last: GameView | None = None  # the episode's latest answer

    def _run(self, upto: int) -> GameView:
        """Bring the environment to ``self.commands[:upto]`` and return its view (lock held)."""
        if self._env is None:
            self._env = _POOL.take()
        if self._synced < 0 or self._synced > upto:
            # ``load`` reads the grammar and names the objects; ``reset`` builds the start
            self._env.load(dict(self.data))
            self._current = _view(self._env.reset())
            self._synced = 0
            self._remember((), self._current)
        while self._synced < upto:
            state, _score, _done = self._env.step(self.commands[self._synced])
            self._synced += 1
            self._current = _view(state)
            self._remember(tuple(self.commands[: self._synced]), self._current)
        assert self._current is not None
        return self._current

    def _remember(self, commands: tuple[str, ...], view: GameView) -> None:
        if self.memo:
            _MEMO.put((self.key, commands), view)

    def _answer(self, command: str | None) -> GameView:
        with _LOCK:
            last = self._last
            known_refusal = last is not None and command not in last.admissible
            if self.memo and command is not None and known_refusal:
                assert last is not None
                return GameView(NOTHING, last.won, last.admissible)
            if command is not None:
                self.commands.append(command)
            known = _MEMO.get((self.key, tuple(self.commands))) if self.memo else None
            if known is None:
                try:
                    known = self._run(len(self.commands))
                except BaseException:
                    # an engine that raised may be in any state: never hand it to another game
                    self._env, self._synced, self._current = None, -1, None
                    raise
            self._last = known
            return known

    def reset(self) -> GameView:
        self.commands, self._last = [], None
        if self._synced > 0:
            self._synced = -1
        return self._answer(None)

    def step(self, command: str) -> GameView:
        if self._last is None:
            raise RuntimeError("step before reset")
        return self._answer(command)

    def close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            with _LOCK:
                _POOL.give_back(env)


__all__ = [
    "INSTALL_HINT",
    "NOTHING",
    "Game",
    "GameView",
    "memo_stats",
    "pool_size",
    "require_package",
]
