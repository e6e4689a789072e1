"""Harbor (harborframework.com) task folders from harnessctl suites (docs/harbor.md).

:mod:`.taskdir` writes Harbor's task folder format; :mod:`.export` turns a suite's split into
such folders through the exporter its environment kind registers (``os_interaction`` has
one: :mod:`harnessctl.envs.os_interaction.harbor`).
"""

from __future__ import annotations

from harnessctl.envs.harbor import (
    ANSWER_FILE,
    HARBOR_EXPORTERS,
    ExportContext,
    HarborExporter,
    HarborTask,
    exporter_for,
)

from .export import ExportedTask, HarborExportResult, export_suite
from .taskdir import dumps_toml, write_task

__all__ = [
    "ANSWER_FILE",
    "HARBOR_EXPORTERS",
    "ExportContext",
    "ExportedTask",
    "HarborExportResult",
    "HarborExporter",
    "HarborTask",
    "dumps_toml",
    "export_suite",
    "exporter_for",
    "write_task",
]
