"""Harness directories on the host: the manifest (``harness.yaml``) and the content hash.

The host never imports harness code (it is untrusted); it validates the manifest, hashes
the tree and hands both to a sandbox.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError, HarnessctlError

# re-exported: callers import the tree helpers from here as well
from .trees import (  # noqa: F401
    EXCLUDED_DIRS,
    EXCLUDED_SUFFIXES,
    IGNORED_DIRS,
    IGNORED_SUFFIXES,
    harness_files,
    hash_files,
    read_tree,
    tree_hash,
)

MANIFEST = "harness.yaml"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")


class RuntimeSettings(BaseModel):
    """The ``settings`` the sandbox runtime's base harness reads (``harnessctl.runtime.
    harness``), checked on the host so that a bad value is a ConfigError naming the field,
    not a ``harness_error`` in every rollout. Other keys pass through to the harness."""

    model_config = ConfigDict(extra="allow", strict=True)

    max_rounds: int | None = Field(default=None, ge=1)
    """Model calls per episode."""
    observation_limit: int | None = Field(default=None, ge=1)
    """Characters an observation is cut to."""
    tool_choice: str | dict[str, Any] | None = None
    """Sent with the function specs (``auto``, ``required``, ``none`` or a function)."""


class HarnessManifest(BaseModel):
    """The contents of ``harness.yaml``."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Directory-safe name, unique in a workspace (lowercase letters, digits, ``._-``)."""
    description: str = ""
    """One or two sentences: what this harness does differently."""
    env: str
    """The environment kind the harness speaks (a suite's ``env`` must match)."""
    entry: str = "harness.py:Harness"
    """``file.py:Class`` of the harness class, relative to the harness directory."""
    parent: str | None = None
    """Name of the harness this one was derived from (``None`` for a base harness)."""
    parent_hash: str | None = None
    """Content hash of the parent at the time of the edit."""
    direction: str | None = None
    """Repair direction that produced this harness."""
    edit_id: str | None = None
    """Id of the edit record that produced this harness."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """Settings handed to the harness class: those the runtime's base class reads are
    checked here, on the host (:class:`RuntimeSettings`); the rest are the harness's own."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError("must be lowercase letters, digits, '.', '_' or '-' (max 100)")
        return value

    @field_validator("settings")
    @classmethod
    def _settings(cls, value: dict[str, Any]) -> dict[str, Any]:
        RuntimeSettings.model_validate(value)  # its errors name settings.<key>
        return value

    @field_validator("entry")
    @classmethod
    def _entry(cls, value: str) -> str:
        filename, sep, klass = value.partition(":")
        if not (sep and filename.endswith(".py") and klass.isidentifier()):
            raise ValueError("must look like 'harness.py:ClassName'")
        if filename.startswith("/") or ".." in Path(filename).parts:
            raise ValueError("must be a path inside the harness directory")
        return value


@dataclass(frozen=True)
class HarnessSpec:
    """A validated harness directory."""

    path: Path
    manifest: HarnessManifest
    hash: str

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def short_hash(self) -> str:
        return self.hash[:12]


def check_compiles(spec: HarnessSpec) -> None:
    """Every ``.py`` file of the harness compiles, or ``ConfigError`` naming the file and
    line: found before any rollout runs (and is cached) instead of as failed rollouts.
    Compiling runs none of the code; importing it happens in the sandbox, as rollouts do."""
    for path in sorted(spec.path.rglob("*.py")):
        if path.is_symlink() or not path.is_file():
            continue
        rel = path.relative_to(spec.path)
        try:
            compile(path.read_bytes(), str(rel), "exec", dont_inherit=True)
        except SyntaxError as exc:
            where = f"{spec.path / rel}:{exc.lineno or 0}"
            raise ConfigError(where, f"the harness does not compile: {exc.msg}") from None
        except ValueError as exc:  # a NUL byte in the source
            message = f"the harness does not compile: {exc}"
            raise ConfigError(str(spec.path / rel), message) from None


def format_validation_error(where: str, exc: ValidationError) -> ConfigError:
    """Every problem of a validated file, the first one's field in ``where`` (a typo such as
    ``target:`` for ``targets:`` shows both: the missing field and the unknown one)."""
    problems = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "(top level)"
        message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        problems.append((field, message))
    (field, message), rest = problems[0], problems[1:]
    also = "".join(f"; also {f}: {m}" for f, m in rest)
    return ConfigError(f"{where}: {field}", message + also)


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), "file not found") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}{line}", f"invalid YAML: {problem}") from None


def load_manifest(path: Path) -> HarnessManifest:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(str(path), "expected a mapping at the top level")
    try:
        return HarnessManifest.model_validate(data)
    except ValidationError as exc:
        raise format_validation_error(str(path), exc) from None


def load_harness(path: Path | str) -> HarnessSpec:
    """Validate a harness directory: its tree (regular files and directories only, see
    :mod:`harnessctl.trees`), manifest, entry file, content hash."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise ConfigError(str(path), "not a harness directory")
    files = read_tree(root)  # first: refuses a link or FIFO before any file is read by name
    manifest_path = root / MANIFEST
    manifest = load_manifest(manifest_path)
    entry = PurePosixPath(manifest.entry.partition(":")[0]).as_posix()
    if entry not in {f.rel for f in files}:  # an excluded file is not there (never copied)
        raise ConfigError(f"{manifest_path}: entry", f"{entry} is not a file of the harness")
    return HarnessSpec(path=root, manifest=manifest, hash=hash_files(files))


def check_environment(spec: HarnessSpec, env_kind: str) -> None:
    """A harness runs only in the environment its manifest names: ``ConfigError`` otherwise."""
    if spec.manifest.env != env_kind:
        raise ConfigError(
            f"{spec.path / MANIFEST}: env",
            f"harness {spec.name!r} speaks {spec.manifest.env!r}, the tasks are {env_kind!r}",
        )


def runtime_version(env: Any = None) -> str:
    """The rollout's code version, part of every cache key: the runtime protocol version, a
    hash of the generic runtime sources and, given the environment, its own version (its
    sandbox code's hash for an in-sandbox kind), so changing one environment's code
    invalidates that environment's rollouts only."""
    from .runtime import PROTOCOL_VERSION

    version = f"{PROTOCOL_VERSION}+{tree_hash(Path(__file__).parent / 'runtime')[:12]}"
    if env is not None:
        version += f"+{env.cache_version()}"
    return version


def rollout_version(env: Any, model: str) -> str:
    """Everything besides harness, task, policy id and seed that can change a rollout's
    outcome, for its cache key: :func:`runtime_version` with the environment, and an offline
    test-double policy's code version (a changed simulator must not serve old results)."""
    from .policies import offline_version

    policy = offline_version(model)
    return runtime_version(env) + (f"+{policy}" if policy else "")


def lineage_root(spec: HarnessSpec, harnesses_dir: Path) -> HarnessSpec:
    """Follow ``parent`` in the manifests up to the harness that has none."""
    seen = {spec.name}
    while spec.manifest.parent:
        path = harnesses_dir / spec.manifest.parent
        if not (path / "harness.yaml").is_file():
            raise HarnessctlError(
                f"harness {spec.name}: parent {spec.manifest.parent!r} not found in "
                f"{harnesses_dir}; pass --base"
            )
        spec = load_harness(path)
        if spec.name in seen:
            raise HarnessctlError(f"harness {spec.name}: its parent chain has a cycle")
        seen.add(spec.name)
    return spec
