"""An ALFWorld engine process: plays games with ALFWorld's own stack for
:mod:`harnessctl.envs.alfworld.play`, one request at a time.

Run as ``python -m harnessctl.envs.alfworld.engine``; it reads one JSON request per line on
stdin and writes one JSON reply per line on the protocol's own copy of stdout (anything the
libraries print goes to stderr instead). A request plays a game from a position:

    {"game": KEY, "data": {pddl_domain, grammar, pddl_problem} or null,
     "reset": true|false, "commands": [...]}

``data`` is sent the first time this process sees ``KEY``; ``reset`` loads the game and puts
it at its start (the first view in the reply is the start's); each command is then run in
order. The reply is ``{"views": [[observation, won, admissible], ...]}`` or, when the engine
raised, ``{"error": "Type: message"}`` and the process exits (an engine that raised may be in
any state; the host starts a fresh one).

Why a process: fast-downward's PDDL translation sets module globals while it runs, so two
games cannot run in one process at once; a process per concurrent episode lets games use
every core. The process ignores SIGINT (the host decides when it ends) and exits at EOF on
stdin, which also comes when the host process dies in any way, so none outlives its host.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import os
import pickle
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

_REQUEST = ("won", "admissible_commands")


TRANSLATIONS_ENV = "HARNESSCTL_ALFWORLD_CACHE"
"""Where translated games are kept across processes (default
``~/.cache/harnessctl/alfworld-translations``; ``off`` keeps none)."""


@functools.cache
def _translator() -> str:
    """The translator's version (its distribution's and TextWorld's): part of the key."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for dist in ("fast-downward-textworld", "textworld"):
        try:
            found.append(f"{dist}=={version(dist)}")
        except PackageNotFoundError:
            found.append(dist)
    return ",".join(found)


def _translations_dir() -> Path | None:
    configured = os.environ.get(TRANSLATIONS_ENV)
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "harnessctl" / "alfworld-translations"


def _memo_translation(translate: Any) -> Any:
    """``fast_downward.pddl2sas`` memoised on its arguments; ``sys.argv`` restored after it
    (the translator rewrites it to parse its own options). A reset translates the game's PDDL
    four times (1-3 s of pure Python) and the translation is a pure function of its inputs.
    A game makes 2 distinct translations of ~0.7 MB each: 300 of them hold a whole split
    (ALFWorld's evaluation splits have 134 and 140 games), about 200 MB.

    Each translation is also kept on disk (:func:`_translations_dir`, keyed by a hash of the
    translator's version and its inputs), so every engine process and every later command
    loads it (3 ms) instead of translating again (0.1-0.5 s a game, about half of a game
    process's CPU). The files are pickles written by this process alone into the user's own
    cache directory, which harness code, run in its sandbox, cannot reach; a file that does
    not load is translated again and replaced."""

    @functools.lru_cache(maxsize=300)
    def cached(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
        where = _translations_dir()
        path = None
        if where is not None:
            key = hashlib.sha256(
                json.dumps([_translator(), domain, problem, verbose, optimize]).encode()
            ).hexdigest()
            path = where / f"{key[:32]}.pickle"
            with contextlib.suppress(Exception):  # missing, partial or foreign: translate
                return pickle.loads(path.read_bytes())
        argv = list(sys.argv)
        try:
            result = translate(domain, problem, verbose=verbose, optimize=optimize)
        finally:
            sys.argv[:] = argv
        if path is not None:
            _store(path, pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        return result

    cached.__wrapped_translation__ = translate  # type: ignore[attr-defined]
    return cached


def _store(path: Path, data: bytes) -> None:
    """Write ``data`` at ``path`` atomically (a reader sees the whole file or none); a cache
    that cannot be written is no error."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _memo_parse(parse: Any) -> Any:
    """A TextWorld grammar parser (``textworld.envs.pddl.textgen._parse_and_convert``,
    ``textworld.logic._parse_and_convert``) memoised on its text: TextWorld parses the same
    few hundred template and query strings with a PEG parser at every step, about half of a
    game process's time. Each call gets a deep copy of the parsed symbols, as a fresh parse
    gives it (callers set contexts on them). Equivalence with ALFWorld's own environment is
    tested (tests/envs/alfworld/test_alfworld_official.py)."""

    @functools.lru_cache(maxsize=4096)
    def cached(text: str, options: tuple) -> Any:
        return parse(text, **dict(options))

    def memo(*args: Any, **kwargs: Any) -> Any:
        options = tuple(sorted(kwargs.items()))
        if len(args) != 1 or not isinstance(args[0], str):
            return parse(*args, **kwargs)
        try:
            hash(options)
        except TypeError:
            return parse(*args, **kwargs)
        return copy.deepcopy(cached(args[0], options))

    memo.__wrapped_parse__ = parse  # type: ignore[attr-defined]
    return memo


def _memo_parsers() -> None:
    import textworld.logic
    from textworld.envs.pddl import textgen

    for module in (textgen, textworld.logic):
        if not hasattr(module._parse_and_convert, "__wrapped_parse__"):
            module._parse_and_convert = _memo_parse(module._parse_and_convert)


def make_env() -> Any:
    """A game environment as ALFWorld's evaluation builds it (``AlfredTWEnv.init_env``):
    TextWorld's PDDL environment with the ``won`` and ``admissible_commands`` infos, wrapped
    in ``AlfredDemangler`` (no shuffling of names). Its ``load`` takes the game's JSON."""
    import fast_downward
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
    from textworld.envs.pddl import PddlEnv

    if not hasattr(fast_downward.pddl2sas, "__wrapped_translation__"):
        fast_downward.pddl2sas = _memo_translation(fast_downward.pddl2sas)
    _memo_parsers()
    request = textworld.EnvInfos(**{name: True for name in _REQUEST})
    return AlfredDemangler(PddlEnv(request))


def _view(state: Any) -> list[Any]:
    return [
        str(state.feedback or ""),
        bool(state["won"]),
        list(state["admissible_commands"] or ()),
    ]


class Engine:
    """One game environment and the game files this process has been sent."""

    def __init__(self) -> None:
        self.env = make_env()
        self.games: dict[str, dict[str, Any]] = {}

    def play(self, request: dict[str, Any]) -> list[list[Any]]:
        key = request["game"]
        if request.get("data") is not None:
            self.games[key] = request["data"]
        views = []
        if request.get("reset"):
            # ``load`` reads the grammar and names the objects; ``reset`` builds the start
            self.env.load(dict(self.games[key]))
            views.append(_view(self.env.reset()))
        for command in request.get("commands", ()):
            state, _score, _done = self.env.step(command)
            views.append(_view(state))
        return views


def serve(requests: Any, replies: Any) -> int:
    """Answer requests until EOF: 0 at EOF, 1 after an engine error (reported first). The
    engine is built before the first request arrives (imports take 1-2 s), so a new process
    warms up while its host does other work."""
    engine, failure = None, None
    try:
        engine = Engine()
    except Exception as exc:  # reported with the first request
        failure = f"{type(exc).__name__}: {exc}"
    for line in requests:
        if engine is not None and failure is None:
            try:
                reply: dict[str, Any] = {"views": engine.play(json.loads(line))}
            except Exception as exc:  # reported to the host, which records it for the rollout
                failure = f"{type(exc).__name__}: {exc}"
        if failure is not None:
            reply = {"error": failure[:2000]}
        replies.write(json.dumps(reply).encode("utf-8") + b"\n")
        replies.flush()
        if failure is not None:
            return 1
    return 0


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the libraries print must not reach the protocol
    return serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    sys.exit(main())
