"""Playing ALFWorld games on the host with ALFWorld's own package (``textworld[pddl]`` and its
ALFRED name demangler), in engine processes.

A game is TextWorld's PDDL environment (``textworld.envs.pddl.PddlEnv``) wrapped as ALFWorld's
evaluation plays it (``AlfredDemangler``: objects named "desk 1", not mangled ids); the game
file's JSON is loaded directly, so no game file is written anywhere. Facts about that stack
shape this module:

- fast-downward's PDDL-to-SAS translation sets module globals (and ``sys.argv``) while it
  runs, so two games cannot run at once in one process. Games therefore run in **engine
  processes** (:mod:`.engine`): an episode leases one for as long as it is open, so
  concurrent rollouts play on as many cores as there are; this process keeps no lock around
  a game, only short ones around the pool and the memo;
- each ``PddlEnv`` loads its own copy of fast-downward's 34 MB shared library, and an engine
  process starts in 1-2 s, so idle engines are **pooled** and reused by later episodes (the
  one that played the same game first: its translations are memoised), and closed once none
  has been in use for :data:`IDLE_S` seconds, at interpreter exit, or when this process dies
  (they exit at EOF on their stdin): none outlives the run;
- a reset translates the game's PDDL four times (1-3 s of pure Python); the translation is a
  pure function of its inputs and is memoised in each engine.

Nothing here reaches the harness directly: :mod:`harnessctl.envs.alfworld` turns a
:class:`GameView` into the observation and public info of a step.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessctl.errors import ConfigError

NOTHING = "Nothing happens."
"""ALFWorld's answer to a command that is not admissible (nothing in the game changes)."""
INSTALL_HINT = "pip install 'harnessctl[alfworld]'"
#: Seconds without any engine in use after which the idle engines are closed.
IDLE_S = 60.0
_SOURCE_ROOT = Path(__file__).resolve().parents[3]


class EngineError(RuntimeError):
    """An engine process raised or died; the episode's rollout is an infrastructure error."""


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


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(_SOURCE_ROOT) + (os.pathsep + path if path else "")
    return env


class _Engine:
    """One engine process (:mod:`.engine`), used by one episode at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harnessctl.envs.alfworld.engine"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_child_env(),
        )
        self.known: set[str] = set()  # games whose files this engine has been sent

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def play(
        self, key: str, data: dict[str, Any], reset: bool, commands: list[str]
    ) -> list[GameView]:
        request = {
            "game": key,
            "data": None if key in self.known else data,
            "reset": reset,
            "commands": commands,
        }
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = b""
        if not line:
            self.close(wait_s=1.0)
            raise EngineError(f"the ALFWorld engine process exited (code {self.proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise EngineError(f"the ALFWorld engine raised {reply['error']}")
        self.known.add(key)
        return [GameView(str(o), bool(w), tuple(a)) for o, w, a in reply["views"]]

    def close(self, wait_s: float = 2.0) -> None:
        """End the process: EOF on its stdin, then a kill if it has not exited in ``wait_s``."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class _Pool:
    """Engine processes: idle ones kept for later episodes, every one closed at exit."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Engine] = []
        self.live: set[_Engine] = set()
        self.created = 0
        self.last_active = time.monotonic()  # when an engine was last taken or given back
        self._reaper: threading.Thread | None = None

    def take(self, key: str) -> _Engine:
        """An idle engine (one that has played ``key`` first), else a new one."""
        with self.lock:
            self.last_active = time.monotonic()
            self.idle = [e for e in self.idle if e.alive() or self._forget(e)]
            for engine in reversed(self.idle):
                if key in engine.known:
                    self.idle.remove(engine)
                    return engine
            if self.idle:
                return self.idle.pop()
            self.created += 1
        engine = _Engine()  # outside the lock: starting one takes a second or two
        with self.lock:
            self.live.add(engine)
        return engine

    def _forget(self, engine: _Engine) -> bool:
        self.live.discard(engine)
        return False

    def give_back(self, engine: _Engine) -> None:
        if not engine.alive():
            self.discard(engine)
            return
        with self.lock:
            self.last_active = time.monotonic()
            self.idle.append(engine)
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap, name="alfworld-engine-reaper", daemon=True
                )
                self._reaper.start()

    def discard(self, engine: _Engine) -> None:
        """Close an engine that must not be reused (it raised, or its episode broke)."""
        with self.lock:
            self.live.discard(engine)
            if engine in self.idle:
                self.idle.remove(engine)
        engine.close(wait_s=1.0)

    def _reap(self) -> None:
        """Close the idle engines once no engine has been in use for :data:`IDLE_S` seconds
        (the run is over; while it goes on, an idle engine is kept for when concurrency rises
        again, its translations memoised); ends when none is left."""
        while True:
            time.sleep(min(5.0, IDLE_S / 4))
            with self.lock:
                in_use = len(self.live) - len(self.idle)
                quiet = time.monotonic() - self.last_active > IDLE_S
                stale = self.idle if in_use == 0 and quiet else []
                for engine in stale:
                    self.live.discard(engine)
                if stale:
                    self.idle = []
                if not self.live:
                    self._reaper = None
            for engine in stale:
                engine.close()
            if self._reaper is None:
                return

    def close_all(self) -> None:
        """Close every engine, idle or not (interpreter exit, or a test's cleanup)."""
        with self.lock:
            engines, self.idle, self.live = list(self.live), [], set()
        for engine in engines:
            engine.close(wait_s=1.0)

    def pids(self) -> list[int]:
        with self.lock:
            return sorted(e.pid for e in self.live)


_POOL = _Pool()
atexit.register(_POOL.close_all)


def pool_size() -> int:
    """How many engine processes this process has started (reused ones counted once)."""
    return _POOL.created


def engine_pids() -> list[int]:
    """The process ids of the engines now running (idle or in use)."""
    return _POOL.pids()


def close_engines() -> None:
    """Close every engine process now (they are also closed at exit and when idle)."""
    _POOL.close_all()


class _Memo:
    """Game answers already computed, keyed by (game, commands since the reset): the games
    are deterministic (a PDDL state machine, the first production of each grammar rule, no
    shuffling of names), so the same commands from the same start give the same answer.
    Bounded: 20,000 answers (least recently used out first), some tens of MB."""

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self.views: OrderedDict[tuple[str, tuple[str, ...]], GameView] = OrderedDict()
        self.hits = self.misses = 0
        self.lock = threading.Lock()

    def get(self, key: tuple[str, tuple[str, ...]]) -> GameView | None:
        with self.lock:
            view = self.views.get(key)
            if view is None:
                self.misses += 1
                return None
            self.views.move_to_end(key)
            self.hits += 1
            return view

    def put(self, key: tuple[str, tuple[str, ...]], view: GameView) -> None:
        with self.lock:
            self.views[key] = view
            if len(self.views) > self.limit:
                self.views.popitem(last=False)


_MEMO = _Memo()


def memo_stats() -> dict[str, int]:
    """Hits, misses and size of this process's memo of game answers."""
    return {"hits": _MEMO.hits, "misses": _MEMO.misses, "size": len(_MEMO.views)}


class Game:
    """One ALFWorld game being played: ``reset()`` and ``step(command)``, each a
    :class:`GameView`; ``close()`` hands the engine process back to the pool.

    A command is stripped of leading and trailing whitespace and nothing else, as
    ``PddlEnv.step`` does. With ``memo`` (the default) an answer already computed for the
    same game and the same commands since the reset comes from memory, and the engine only
    runs from the first command it has not seen in that position (catching up by replaying
    the episode's earlier commands in one request): replays, paired seeds and sibling
    harnesses mostly retrace paths already played. A command that is not admissible is
    answered as the game answers it (``PddlEnv`` runs only admissible commands; any other is
    "Nothing happens." with the state, the admissible commands and ``won`` unchanged) without
    running it, and is left out of the path. ``memo=False`` runs every command in the game.
    Not for concurrent use: one episode plays one game."""

    def __init__(self, data: dict[str, Any], memo: bool = True) -> None:
        self.data = {k: data[k] for k in ("pddl_domain", "grammar", "pddl_problem")}
        canonical = json.dumps(self.data, sort_keys=True).encode("utf-8")
        self.key = hashlib.sha256(canonical).hexdigest()
        self.memo = memo
        self.commands: list[str] = []
        self._engine: _Engine | None = None
        self._synced = -1  # commands of self.commands the engine has run (-1: not reset)
        self._current: GameView | None = None  # the engine's view at ``_synced``
        self._last: GameView | None = None  # the episode's latest answer

    def _run(self, upto: int) -> GameView:
        """Bring the engine to ``self.commands[:upto]`` and return its view."""
        if self._engine is None:
            self._engine = _POOL.take(self.key)
        reset = self._synced < 0 or self._synced > upto
        start = 0 if reset else self._synced
        try:
            views = self._engine.play(self.key, self.data, reset, self.commands[start:upto])
        except BaseException:
            # an engine that raised may be in any state: never hand it to another game
            engine, self._engine, self._synced = self._engine, None, -1
            self._current = None
            _POOL.discard(engine)
            raise
        self._current = views[-1] if views else self._current
        if reset:
            self._remember((), views[0])
            views = views[1:]
        for offset, view in enumerate(views, start=start + 1):
            self._remember(tuple(self.commands[:offset]), view)
        self._synced = upto
        assert self._current is not None
        return self._current

    def _remember(self, commands: tuple[str, ...], view: GameView) -> None:
        if self.memo:
            _MEMO.put((self.key, commands), view)

    def _answer(self, command: str | None) -> GameView:
        last = self._last
        refused = last is not None and command is not None and command not in last.admissible
        if self.memo and refused:
            assert last is not None
            return GameView(NOTHING, last.won, last.admissible)
        if command is not None:
            self.commands.append(command)
        known = _MEMO.get((self.key, tuple(self.commands))) if self.memo else None
        if known is None:
            known = self._run(len(self.commands))
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
        return self._answer(command.strip())

    def close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            _POOL.give_back(engine)


__all__ = [
    "IDLE_S",
    "INSTALL_HINT",
    "NOTHING",
    "EngineError",
    "Game",
    "GameView",
    "close_engines",
    "engine_pids",
    "memo_stats",
    "pool_size",
    "require_package",
]
