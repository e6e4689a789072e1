"""Scaffolds: ``harnessctl new-env NAME`` writes an environment plugin package.

The package it writes (from ``template/``, package data) is both a pip-installable plugin
(the entry points the environment and policy registries read) and a harnessctl workspace
(``harnessctl.yaml``, ``harnesses/``, ``suite/``), so that once installed with ``pip install
-e`` and made a git repository with ``harnessctl init``, ``eval``, ``evolve``, ``profile`` and
``export-pool`` accept it as it stands. It holds a working example (a host-served episode, a
suite with train/dev/test splits, a base harness, ``sim/NAME`` with two seeded failure modes,
``replay/NAME`` through the kind's ``replay``, two directions with the rule-based editor's
repairs, and tests) for the user to replace part by part (docs/environments.md).

Pure data: the standard library only, so the command starts as fast as ``--help``.
"""

from __future__ import annotations

import importlib.util
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError

TEMPLATE = Path(__file__).resolve().parent / "template"
SUFFIX = ".tmpl"  # template files are not Python to the project's own linters and tests
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
#: Names the scaffold's package may not take: its own host and the generated layout's parts.
RESERVED = frozenset({"harnessctl", "harnessctl_runtime", "suite", "tests", "harnesses"})


@dataclass(frozen=True)
class Scaffold:
    """What :func:`new_env` wrote."""

    name: str  # the environment kind, also the Python package's name
    root: Path  # the package's directory
    files: list[str] = field(default_factory=list)  # relative paths, sorted

    @property
    def base(self) -> str:
        return f"{slug(self.name)}-base"


def slug(name: str) -> str:
    """``name`` as harness and distribution names spell it (no underscores)."""
    return name.replace("_", "-")


def check_name(name: str) -> str:
    """``name`` if it can be a new environment kind; ``ConfigError`` (exit 2) saying why not.

    It becomes the kind, the Python package, ``sim/NAME`` and ``NAME-base``: a lower-case
    identifier, no keyword, no kind already registered, no module Python already imports."""
    if not NAME_RE.match(name):
        raise ConfigError(
            "NAME",
            f"{name!r} is not a valid environment name: a lower-case letter, then lower-case "
            "letters, digits or underscores, at most 32 characters (it becomes the kind, the "
            "Python package and sim/NAME)",
        )
    if keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in RESERVED:
        raise ConfigError("NAME", f"{name!r} is a reserved name: choose another")
    from ..envs import known_environments

    if name in known_environments():
        raise ConfigError("NAME", f"{name!r} is an existing environment kind: choose another")
    from ..policies import OFFLINE_POLICIES

    taken = sorted({f"sim/{name}", f"replay/{name}"} & set(OFFLINE_POLICIES.names()))
    if taken:  # a plugin registered the policy of a kind it does not (or no longer) provide
        raise ConfigError("NAME", f"{name!r}: the policy {taken[0]} is registered already")
    if importlib.util.find_spec(name) is not None:  # finds without importing (no dots)
        raise ConfigError(
            "NAME",
            f"{name!r} is already an importable Python module: its package would shadow it, "
            "or be shadowed; choose another",
        )
    return name


def _target(rel: Path, name: str) -> Path:
    parts = [
        {"PKG": name, "BASE": f"{slug(name)}-base", "gitignore": ".gitignore"}.get(p, p)
        for p in rel.with_suffix("").parts
    ]
    parts[-1] = parts[-1].replace("PKG", name)  # tests/test_PKG.py
    return Path(*parts)


def render(text: str, name: str) -> str:
    """A template's text for ``name``: ``{{name}}``, ``{{slug}}`` and ``{{Name}}`` filled."""
    camel = "".join(part.capitalize() for part in name.split("_"))
    return text.replace("{{name}}", name).replace("{{slug}}", slug(name)).replace("{{Name}}", camel)


def new_env(name: str, out: Path | None = None) -> Scaffold:
    """Write the package for kind ``name`` into ``out`` (default ``./NAME``), which must not
    exist or be empty; nothing is written when a check fails."""
    check_name(name)
    root = Path(out if out is not None else name).resolve()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        what = "a directory that is not empty" if root.is_dir() else "not a directory"
        raise ConfigError(str(root), f"--out: {what}; choose a new or empty directory")
    templates = sorted(p for p in TEMPLATE.rglob(f"*{SUFFIX}") if p.is_file())
    if not templates:  # an install without the package data
        raise ConfigError(str(TEMPLATE), "the scaffold's templates are missing from the install")
    written = []
    for source in templates:
        rel = _target(source.relative_to(TEMPLATE), name)
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(source.read_text(encoding="utf-8"), name), encoding="utf-8")
        written.append(rel.as_posix())
    return Scaffold(name=name, root=root, files=sorted(written))


__all__ = ["NAME_RE", "TEMPLATE", "Scaffold", "check_name", "new_env", "render", "slug"]
