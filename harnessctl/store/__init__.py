"""The store: SQL tables (sqlmodel), numbered migrations, gzip trajectory files.

Names are resolved lazily so that ``import harnessctl.store`` does not import sqlmodel or
SQLAlchemy (about half a second); they load on first use of ``Store`` or a table model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .calls import CallTotals, HostCall
    from .models import (
        AttemptRow,
        EditRow,
        HarnessRow,
        ModelCallRow,
        ProfileRow,
        RolloutRow,
        RunMemberRow,
        RunRow,
    )
    from .store import Store

__all__ = [
    "AttemptRow",
    "CallTotals",
    "EditRow",
    "HarnessRow",
    "HostCall",
    "ModelCallRow",
    "ProfileRow",
    "RolloutRow",
    "RunMemberRow",
    "RunRow",
    "Store",
]

_WHERE = {
    "Store": ".store",
    "AttemptRow": ".models",
    "CallTotals": ".calls",
    "HostCall": ".calls",
    "EditRow": ".models",
    "HarnessRow": ".models",
    "ModelCallRow": ".models",
    "ProfileRow": ".models",
    "RolloutRow": ".models",
    "RunMemberRow": ".models",
    "RunRow": ".models",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
