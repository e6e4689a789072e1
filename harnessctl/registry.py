"""One plugin mechanism for every kind of pluggable part.

A :class:`Registry` resolves a short name to an object, looking in this order:

1. names registered in this process with :meth:`Registry.register` (tests, embedding apps);
2. the built-ins, declared as ``"name": "package.module:attr"`` strings, so nothing is imported
   until it is asked for (``--help`` stays fast);
3. the entry points of the registry's group (``harnessctl.environments``,
   ``harnessctl.sandboxes``, ``harnessctl.executors``, ``harnessctl.editors``,
   ``harnessctl.policies``): how a third-party package registers a plugin;
4. a dotted path ``package.module:attr`` given in place of a name.

Built-ins are registered exactly as a plugin is: an import path under a name. The registry
returns the object itself (usually a class or a factory); the caller instantiates it.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from .errors import ConfigError

T = TypeVar("T")


def load_object(target: str) -> Any:
    """Import ``package.module:attr`` (or ``package.module.attr``) and return the attribute."""
    module_name, _, attr = target.partition(":")
    if not attr:
        module_name, _, attr = target.rpartition(".")
    if not module_name or not attr:
        raise ImportError(f"{target!r} is not a 'package.module:attr' path")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _path_state() -> tuple:
    """``sys.path`` with each entry's modification time: installing or removing a package
    changes its directory's, so a changed state means entry points must be read again."""
    state: list[tuple[str, int | None]] = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, None))
    return tuple(state)


@functools.lru_cache(maxsize=32)
def _group_entry_points(group: str, _state: tuple) -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=group)}


class Registry(Generic[T]):
    """Named plugins of one kind (``what``: "environment", "sandbox backend"...).

    ``option`` names the flag or field a user set, so an unknown name is reported against it.
    """

    def __init__(
        self, group: str, what: str, builtins: Mapping[str, str], *, option: str = ""
    ) -> None:
        self.group, self.what, self.option = group, what, option or what
        self._builtins = dict(builtins)
        self._registered: dict[str, T | Callable[..., T]] = {}

    def register(self, name: str, obj: T | Callable[..., T]) -> None:
        """Register ``obj`` under ``name`` in this process (replaces an earlier one)."""
        self._registered[name] = obj

    def unregister(self, name: str) -> None:
        """Forget a name registered in this process; unknown names are ignored."""
        self._registered.pop(name, None)

    def _entry_points(self) -> dict[str, Any]:
        # reading every installed distribution's metadata took a seventh of a simulated
        # rollout's host time when done for each rollout's policy; read once per path state
        return dict(_group_entry_points(self.group, _path_state()))

    def names(self) -> list[str]:
        """Every name :meth:`get` resolves without a dotted path."""
        return sorted({*self._builtins, *self._registered, *self._entry_points()})

    def has(self, name: str) -> bool:
        """Whether ``name`` resolves (a dotted path counts when it imports)."""
        try:
            self.get(name)
        except ConfigError:
            return False
        return True

    def get(self, name: str) -> Any:
        """The object registered under ``name``; ``ConfigError`` naming the known ones if none."""
        if name in self._registered:
            return self._registered[name]
        if name in self._builtins:
            return load_object(self._builtins[name])
        plugins = self._entry_points()
        if name in plugins:
            try:
                return plugins[name].load()
            except (ImportError, AttributeError) as exc:
                raise ConfigError(self.option, f"cannot load {self.what} {name!r}: {exc}") from exc
        if ":" in name:
            try:
                return load_object(name)
            except (ImportError, AttributeError) as exc:
                raise ConfigError(self.option, f"cannot load {self.what} {name!r}: {exc}") from exc
        known = ", ".join(self.names()) or "none"
        raise ConfigError(self.option, f"unknown {self.what} {name!r} (known: {known})")

    def create(self, name: str, *args: Any, **kwargs: Any) -> T:
        """Resolve ``name`` and call it (a class or a factory) with the arguments."""
        obj = self.get(name)
        return obj(*args, **kwargs) if callable(obj) else obj


__all__ = ["Registry", "load_object"]
