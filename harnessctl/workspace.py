"""Workspaces: a git repository with ``harnesses/``, ``profiles/``, ``harnessctl.yaml`` and
the store in an ignored ``.harnessctl/``. The project's own checkout is one."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .constants import (
    ENV_CACHE_FROM,
    ENV_EXECUTOR,
    ENV_SANDBOX,
    ENV_STORE_URL,
    ENV_WORKERS,
    ENV_WORKSPACE,
    STATE_DIR,
    WORKSPACE_FILE,
)
from .errors import ConfigError
from .harness import (
    MANIFEST,
    HarnessSpec,
    format_validation_error,
    lineage_root,
    load_harness,
    read_yaml,
)
from .trees import copy_tree


class WorkspaceConfig(BaseModel):
    """``harnessctl.yaml``: defaults for every command run inside the workspace."""

    model_config = ConfigDict(extra="forbid")

    store_url: str | None = None
    """SQLAlchemy URL of the store; default: SQLite at ``.harnessctl/store.db``."""
    cache_from: list[str] = Field(default_factory=list)
    """Read-through rollout caches, in order: other workspaces or store directories (relative
    to the workspace) whose matching rollouts are copied in instead of run (docs/store.md)."""
    sandbox: str = "local"
    """Sandbox backend: ``local`` or a registered one."""
    workers: int = 2
    """Rollouts run in parallel."""
    executor: str = "local"
    """Where rollouts run: ``local`` (threads of this process), ``ray`` (one Ray task per
    rollout), or an executor registered under ``harnessctl.executors``."""
    ray_address: str | None = None
    """Ray cluster for the ``ray`` executor (default: ``RAY_ADDRESS``, else a local one)."""
    policy: str | None = None
    """Default policy (any litellm model string); None: ``sim/<env>``, the environment's
    offline test double."""
    suite: str | None = None
    """Default suite directory, relative to the workspace."""
    model_timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds one model call may take; None: 120 for a provider (re-sent after it), 600 for
    a server on this machine (sent once). ``HARNESSCTL_MODEL_TIMEOUT`` and
    ``--model-timeout`` override it."""
    confirm_above_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """USD above which a paid run's cost bound (printed before it starts) needs ``--yes`` or a
    confirmation on the terminal; None: 5. ``HARNESSCTL_CONFIRM_USD`` overrides it."""


@dataclass(frozen=True)
class Workspace:
    root: Path
    config: WorkspaceConfig
    found: bool = True
    """Whether a workspace was found (a ``harnessctl.yaml`` here or above, or
    ``HARNESSCTL_WORKSPACE``); otherwise ``root`` is only the current directory."""

    def _nowhere(self) -> str:
        return (
            f"no workspace here (no {WORKSPACE_FILE} in {self.root} or above it): run "
            f"`harnessctl init DIR` and work in DIR, or set {ENV_WORKSPACE}"
        )

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def harnesses_dir(self) -> Path:
        return self.root / "harnesses"

    def harness_dirs(self) -> list[Path]:
        """Every harness directory under ``harnesses/``, by name."""
        return harness_dirs(self.harnesses_dir)

    def harness_dir(self, name: str) -> Path | None:
        """The directory of the harness called ``name`` under ``harnesses/``, if there is one."""
        path = self.harnesses_dir / name
        return path if (path / MANIFEST).is_file() else None

    def resolve_harness(self, name: str) -> Path:
        """``name`` as a directory, else as a name under ``harnesses/``; as given when neither
        exists (loading it then reports the missing manifest)."""
        path = Path(name)
        if path.is_dir():
            return path
        candidate = self.harnesses_dir / name
        return candidate if candidate.is_dir() else path

    def load_harness(self, name: str) -> HarnessSpec:
        """The harness ``name`` names (see :meth:`resolve_harness`)."""
        path = self.resolve_harness(name)
        if not self.found and not path.is_dir():
            raise ConfigError(name, f"not a harness directory, and {self._nowhere()}")
        return load_harness(path)

    def harnesses(self) -> list[HarnessSpec]:
        """Every harness under ``harnesses/``, by name."""
        return [load_harness(path) for path in self.harness_dirs()]

    def base_harness(self, name: str | None, among: list[str] | None = None) -> HarnessSpec:
        """The base harness: ``name``, else the one lineage root of ``among``, else the
        workspace's only harness without a parent (``ConfigError`` naming the candidates when
        there are several)."""
        if name:
            return self.load_harness(name)
        if among:
            found = [lineage_root(self.load_harness(h), self.harnesses_dir) for h in among]
            roots = list({spec.name: spec for spec in found}.values())
        else:
            roots = [spec for spec in self.harnesses() if not spec.manifest.parent]
        if len(roots) != 1:
            names = ", ".join(s.name for s in roots) or "none"
            raise ConfigError("--base", f"pass --base: the base harnesses here are {names}")
        return roots[0]

    def store_url(self, override: str | None = None) -> str:
        url = override or os.environ.get(ENV_STORE_URL) or self.config.store_url
        return url or f"sqlite:///{self.state_dir / 'store.db'}"

    def load_suite(self, suite: str | None = None):
        """The suite at ``suite`` (a path, or relative to the workspace), else the default."""
        from .suite import load_suite

        chosen = suite or self.config.suite
        if chosen is None:
            raise ConfigError("--suite", "pass --suite (or set suite: in harnessctl.yaml)")
        path = Path(chosen)
        return load_suite(path if path.exists() else self.root / chosen)

    def open_store(self, url: str | None = None):
        """The store: ``url``, else ``HARNESSCTL_STORE_URL``, else the workspace's SQLite
        file. Outside a workspace only a store named explicitly is opened (none is created
        in whatever directory the command ran from)."""
        from .store import Store

        if not self.found and not (url or os.environ.get(ENV_STORE_URL)):
            raise ConfigError("--store", f"{self._nowhere()} (or pass --store URL)")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        return Store(self.store_url(url), self.state_dir / "trajectories", self.cache_from())

    def cache_from(self) -> list[Path]:
        """The read-through caches: ``HARNESSCTL_CACHE_FROM``, else ``cache_from:``."""
        from .store.readthrough import parse_sources

        value = os.environ.get(ENV_CACHE_FROM)
        return parse_sources(value if value is not None else self.config.cache_from, self.root)


def harness_dirs(directory: Path) -> list[Path]:
    """The harness directories (each holding a ``harness.yaml``) in ``directory``, by name."""
    if not directory.is_dir():
        return []
    return [p for p in sorted(directory.iterdir()) if (p / MANIFEST).is_file()]


def find_root(start: Path | None = None) -> tuple[Path, bool]:
    """The workspace root and whether one was found (else the start directory). A
    ``start`` a caller names wins over ``HARNESSCTL_WORKSPACE``."""
    env = os.environ.get(ENV_WORKSPACE)
    if env and start is None:
        return Path(env).resolve(), True
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / WORKSPACE_FILE).is_file():
            return candidate, True
    return here, False


def load_workspace(start: Path | None = None) -> Workspace:
    root, found = find_root(start)
    path = root / WORKSPACE_FILE
    data = read_yaml(path) if path.is_file() else {}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), "expected a mapping at the top level")
    if os.environ.get(ENV_SANDBOX):
        data["sandbox"] = os.environ[ENV_SANDBOX]
    if os.environ.get(ENV_WORKERS):
        data["workers"] = os.environ[ENV_WORKERS]
    if os.environ.get(ENV_EXECUTOR):
        data["executor"] = os.environ[ENV_EXECUTOR]
    try:
        config = WorkspaceConfig.model_validate(data)
    except ValidationError as exc:
        raise format_validation_error(str(path), exc) from None
    # a directory a caller names is its workspace; only the current directory is a guess
    return Workspace(root=root, config=config, found=found or start is not None)


DEFAULT_CONFIG = """\
# harnessctl workspace settings (flags and HARNESSCTL_* variables override these).
sandbox: local
workers: 2
# executor: ray   # one Ray task per rollout (pip install 'harnessctl[ray]'); default local
# policy: openai/gpt-4o-mini   # any litellm model string; default sim/<env>, a test double
# store_url: postgresql+psycopg://user@host/db   # default: SQLite in .harnessctl/
# cache_from: [../team-cache]   # read-through rollout caches, read-only (docs/store.md)
"""


def init_workspace(directory: Path, *, examples: bool = True) -> Workspace:
    """Create (or complete) a workspace; existing files are left alone."""
    from .vcs import ensure_repo

    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    for sub in ("harnesses", "profiles"):
        (directory / sub).mkdir(exist_ok=True)
        keep = directory / sub / ".gitkeep"
        if not any((directory / sub).iterdir()):
            keep.touch()
    config = directory / WORKSPACE_FILE
    if not config.exists():
        text = DEFAULT_CONFIG
        if examples:
            text += "suite: examples/dbbench\n"
        config.write_text(text, encoding="utf-8")
    ignore = directory / ".gitignore"
    lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
    if f"{STATE_DIR}/" not in lines:
        ignore.write_text("\n".join([*lines, f"{STATE_DIR}/"]) + "\n", encoding="utf-8")
    if examples:
        _copy_examples(directory)
    ensure_repo(directory, message="harnessctl init")
    return load_workspace(directory)


def _copy_examples(directory: Path) -> None:
    """Copy the bundled base harnesses (every one under ``harnesses/``) and the example
    suites (every folder of ``examples/`` with a ``suite.yaml``, but not a plugin package's
    such as ``examples/toyenv``, which needs its package installed) when this is a source
    checkout."""
    source = Path(__file__).resolve().parent.parent
    bundled = sorted(p for p in (source / "harnesses").glob("*") if (p / "harness.yaml").is_file())
    pairs = [(src, directory / "harnesses" / src.name) for src in bundled]
    for suite in sorted(p.parent for p in (source / "examples").glob("*/suite.yaml")):
        if not (suite / "pyproject.toml").is_file():
            pairs.append((suite, directory / "examples" / suite.name))
    for src, dst in pairs:
        if src.is_dir() and not dst.exists() and src.resolve() != dst.resolve():
            if src in bundled:  # a harness tree: its files as hashed (harnessctl.trees)
                copy_tree(src, dst)
            else:
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
