"""Regression tests of harness variants against baseline profiles (``harnessctl test``).

For each harness, the baseline is its profile YAML under ``profiles/`` for the policy and
suite. The harness is re-evaluated on the baseline's split and seeds (served from the
cache when nothing changed; ``--seed-offset`` draws fresh seeds) and compared:

- ``overall`` and ``category:<name>`` fail on a *significant drop*: the 95% Newcombe
  interval of (current - baseline) success lies entirely below zero AND the drop is at
  least ``min_drop`` (overall) or ``category_min_drop`` (per category). Both conditions
  keep noise (other seeds, a sampling model) from failing an unchanged variant.
- ``flips`` lists tasks that always succeeded in the baseline and never do now; reported
  separately, failing only with ``fail_on_flips``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError
from ..profiles.files import read_profile, slug
from ..profiles.reanchor import newcombe
from ..records import Profile, Rate


class Check(BaseModel):
    """One check of one harness against its baseline: ``overall``, ``category:<name>`` or
    ``flips``."""

    model_config = ConfigDict(extra="forbid")

    harness: str
    name: str
    passed: bool
    message: str
    details: dict[str, Any] = Field(default_factory=dict)
    """A drop check: ``current`` and ``baseline`` as [successes, rollouts], ``diff`` and its
    ``ci95``; ``flips``: the flipped ``tasks``."""


def baseline_path(root: Path, harness: str, policy_id: str, suite: str, split: str | None) -> Path:
    folder = root / harness / slug(policy_id)
    if split is not None:
        return folder / f"{slug(suite)}.{slug(split)}.yaml"
    found = sorted(folder.glob(f"{slug(suite)}.*.yaml")) if folder.is_dir() else []
    if not found:
        raise ConfigError(
            str(folder),
            f"no baseline profile of {harness} for this policy and "
            "suite; create one with --update-baseline",
        )
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise ConfigError(str(folder), f"several baselines ({names}); pass --split")
    return found[0]


def load_baseline(path: Path) -> Profile:
    """The baseline profile in ``path``; a malformed one is a ConfigError naming the file and
    the field."""
    return read_profile(path)


def _drop_check(
    harness: str, name: str, base: Rate, cur_s: int, cur_n: int, min_drop: float
) -> Check:
    b_s, b_n = base.successes, base.rollouts
    diff, lo, hi = newcombe(cur_s, cur_n, b_s, b_n)
    drop = -diff
    significant = hi < 0 and drop >= min_drop
    msg = (
        f"{cur_s}/{cur_n} now vs {b_s}/{b_n} baseline: {diff:+.1%} (95% CI {lo:+.1%} to {hi:+.1%})"
    )
    if significant:
        msg = f"significant drop: {msg}"
    return Check(
        harness=harness,
        name=name,
        passed=not significant,
        message=msg,
        details={"current": [cur_s, cur_n], "baseline": [b_s, b_n], "diff": diff, "ci95": [lo, hi]},
    )


def compare(
    harness: str,
    baseline: Profile,
    rows: list,
    *,
    min_drop: float = 0.05,
    category_min_drop: float = 0.15,
    fail_on_flips: bool = False,
) -> list[Check]:
    checks = [
        _drop_check(
            harness,
            "overall",
            baseline.success,
            sum(1 for r in rows if r.success),
            len(rows),
            min_drop,
        )
    ]
    for cat, base in sorted(baseline.categories.items()):
        mine = [r for r in rows if r.category == cat]
        checks.append(
            _drop_check(
                harness,
                f"category:{cat}",
                base,
                sum(1 for r in mine if r.success),
                len(mine),
                category_min_drop,
            )
        )
    now: dict[str, list[int]] = {}
    for r in rows:
        cell = now.setdefault(r.task_id, [0, 0])
        cell[0] += int(bool(r.success))
        cell[1] += 1
    flips = sorted(
        t for t, (s, n) in baseline.per_task.items() if n and s == n and t in now and now[t][0] == 0
    )
    message = (
        (
            f"{len(flips)} task(s) always succeeded in the baseline and never now: "
            + ", ".join(flips)
        )
        if flips
        else "no task flipped from success to failure"
    )
    passed = not (flips and fail_on_flips)
    checks.append(
        Check(
            harness=harness, name="flips", passed=passed, message=message, details={"tasks": flips}
        )
    )
    return checks


def junit_xml(checks: list[Check], path: Path, errors: dict[str, str] | None = None) -> None:
    """JUnit XML: a test case per check (a regression is a ``failure``), and one ``error``
    case per harness that could not be checked (``errors``: harness -> why)."""
    errors = errors or {}
    failures = sum(1 for c in checks if not c.passed)
    tests = str(len(checks) + len(errors))
    suites = ET.Element("testsuites", tests=tests, failures=str(failures), errors=str(len(errors)))
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="harnessctl",
        tests=tests,
        failures=str(failures),
        errors=str(len(errors)),
        skipped="0",
    )
    for harness, why in errors.items():
        case = ET.SubElement(suite, "testcase", classname=f"harnessctl.{harness}", name="run")
        ET.SubElement(case, "error", message=why, type="infrastructure").text = why
    for c in checks:
        case = ET.SubElement(suite, "testcase", classname=f"harnessctl.{c.harness}", name=c.name)
        if not c.passed:
            failure = ET.SubElement(case, "failure", message=c.message, type="regression")
            failure.text = c.message
        else:
            out = ET.SubElement(case, "system-out")
            out.text = c.message
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
