"""``harnessctl new-env NAME``: the name and the output directory checked (exit 2, nothing
written), the command pure data (no litellm, docker or git imported), and the scaffold end to
end: the package it writes, installed with ``pip install -e`` (offline, into a throwaway
target so the session's environment stays clean), passes its own tests, and ``eval`` (replay:
every task a success), ``evolve`` (offline defaults: at least one accepted sibling),
``profile`` and ``export-pool`` accept it as it stands (issue 56.4)."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from harnessctl.scaffold import TEMPLATE, new_env
from harnessctl.workspace import init_workspace
from tests.helpers import ROOT
from tests.helpers.ci import unavailable
from tests.helpers.cli import cli, cli_json
from tests.helpers.workspaces import isolate

NAME = "demo"  # the issue's own example: `harnessctl new-env demo`, then evolve on it
BASE = "demo-base"


# --- the command's checks (fast tier) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("Demo", "not a valid environment name"),
        ("my-env", "not a valid environment name"),
        ("9lives", "not a valid environment name"),
        ("x" * 33, "not a valid environment name"),
        ("class", "reserved name"),
        ("harnessctl", "reserved name"),
        ("dbbench", "existing environment kind"),
        ("json", "already an importable Python module"),
    ],
)
def test_a_bad_name_exits_2_and_writes_nothing(tmp_path, name, says):
    out = tmp_path / "out"
    result = cli(tmp_path, "new-env", name, "--out", out, code=2)
    assert says in result.output and f"'{name}'" in result.output
    assert not out.exists()


def test_a_name_whose_policy_is_registered_already_is_refused(tmp_path):
    from harnessctl.policies import OFFLINE_POLICIES

    OFFLINE_POLICIES.register("sim/ghost", object)
    try:
        result = cli(tmp_path, "new-env", "ghost", "--out", tmp_path / "g", code=2)
    finally:
        OFFLINE_POLICIES.unregister("sim/ghost")
    assert "the policy sim/ghost is registered already" in result.output
    assert not (tmp_path / "g").exists()


def test_an_existing_directory_is_refused_unless_empty(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    result = cli(tmp_path, "new-env", "mykind", "--out", tmp_path / "full", code=2)
    assert "not empty" in result.output and str(tmp_path / "full") in result.output
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]  # untouched
    (tmp_path / "file").write_text("x")
    assert (
        "not a directory"
        in cli(tmp_path, "new-env", "mykind", "--out", tmp_path / "file", code=2).output
    )
    (tmp_path / "empty").mkdir()
    made = cli_json(tmp_path, "new-env", "my_kind", "--out", tmp_path / "empty")
    assert made["kind"] == "new-env" and made["base"] == "my-kind-base"
    assert made["root"] == str(tmp_path / "empty")


def test_every_template_is_written_with_every_placeholder_filled(tmp_path):
    made = new_env("my_kind", tmp_path / "pkg")
    templates = sorted(TEMPLATE.rglob("*.tmpl"))
    assert len(made.files) == len(templates)
    assert {
        "pyproject.toml",
        ".gitignore",
        "harnessctl.yaml",
        "my_kind/__init__.py",
        "my_kind/sim.py",
        "suite/suite.yaml",
        "harnesses/my-kind-base/harness.py",
        "tests/test_my_kind.py",
    } <= set(made.files)
    for rel in made.files:
        text = (made.root / rel).read_text()
        assert "{{" not in text and "PKG" not in rel, rel
        if rel.endswith(".py"):
            compile(text, rel, "exec")  # the package is Python as written
    pyproject = (made.root / "pyproject.toml").read_text()
    assert 'my_kind = "my_kind:MyKindEnvironment"' in pyproject
    assert '"sim/my_kind" = "my_kind.sim:SimMyKind"' in pyproject


def test_the_plain_output_names_the_directory_and_the_next_commands(tmp_path):
    out = tmp_path / "k"
    result = cli(tmp_path, "new-env", "k", "--out", out)
    files = len(list(TEMPLATE.rglob("*.tmpl")))
    assert result.stdout.splitlines() == [
        f"wrote {out} ({files} files)",
        "next:",
        f"  cd {out}",
        "  pip install -e .",
        "  harnessctl init . --no-examples",
        "  pytest -q tests",
        "  harnessctl eval k-base --split dev --policy replay/k",
        "  harnessctl evolve k-base --rounds 1",
    ]


@pytest.mark.parametrize("name", ["x", "a" * 32])
def test_the_package_is_lint_clean_whatever_the_name_length(tmp_path, name):
    """ruff with the project's own rules and format, at the shortest and the longest name."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:  # the test extra installs it; CI must run this check
        unavailable("the scaffold's lint check", "ruff is not installed (pip install -e '.[test]')")
    made = new_env(name, tmp_path / "pkg")
    rules = ["--select", "E,F,W,I,B,UP,SIM", "--line-length", "100", "--no-cache"]
    for command in (["check", *rules], ["format", "--check", "--no-cache"]):
        run = subprocess.run([ruff, *command, "."], cwd=made.root, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout[-3000:]


def test_every_template_ships_as_package_data():
    """An installed (not editable) harnessctl holds the templates: pyproject's globs cover them."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["harnessctl"]
    shipped = {p for pattern in globs for p in (ROOT / "harnessctl").glob(pattern)}
    assert set(TEMPLATE.rglob("*.tmpl")) <= shipped


def test_new_env_is_pure_data(tmp_path):
    """No heavy library is imported on the way (``--help`` speed; CONVENTIONS, lazy imports)."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from harnessctl.cli import app\n"
        f"r = CliRunner().invoke(app, ['new-env', 'quick', '--out', {str(tmp_path / 'q')!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in ('litellm', 'docker', 'git', 'sqlalchemy') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


# --- the scaffold end to end (slow tier) ------------------------------------------------------


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``harnessctl new-env demo`` installed with ``pip install -e`` into a throwaway target,
    made importable here by ``site.addsitedir`` (which runs the editable install's .pth) and
    forgotten afterwards: sys.path, the import hooks and the modules as they were."""
    root = tmp_path_factory.mktemp("newenv") / NAME
    made = new_env(NAME, root)
    target = root.parent / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "-e", str(root), "--target", str(target)]
    subprocess.run([*pip, "--no-deps", "--no-build-isolation"], check=True, capture_output=True)
    saved = list(sys.path), list(sys.meta_path), list(sys.path_hooks)
    site.addsitedir(str(target))
    try:
        yield made, target
    finally:
        sys.path[:], sys.meta_path[:], sys.path_hooks[:] = saved
        sys.path_importer_cache.clear()
        for module in [m for m in sys.modules if m == NAME or m.startswith(f"{NAME}.")]:
            del sys.modules[module]


@pytest.fixture(scope="module")
def ws(installed, tmp_path_factory):
    made, _ = installed
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, tmp_path_factory.mktemp("home"), made.root)
        init_workspace(made.root, examples=False)  # `harnessctl init . --no-examples`
        yield made.root


@pytest.mark.slow
def test_the_generated_package_passes_its_own_tests(installed):
    made, target = installed
    code = (
        f"import site, sys; site.addsitedir({str(target)!r}); import pytest; "
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests']))"
    )
    # -I: the package is found through its editable install, not the working directory
    run = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=made.root, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "4 passed" in run.stdout


@pytest.mark.slow
def test_eval_evolve_profile_and_export_pool_accept_it_as_it_stands(ws, tmp_path):
    replay = cli_json(ws, "eval", BASE, "--split", "dev", "--policy", f"replay/{NAME}")
    summary = replay["summary"]
    assert summary["tasks"] >= 2 and summary["outcomes"] == {"success": summary["rollouts"]}

    evolved = cli_json(ws, "evolve", BASE, "--rounds", 1)  # sim/demo and the rules editor
    accepted = [e for e in evolved["edits"] if e["status"] == "accepted"]
    assert accepted, evolved["edits"]
    siblings = sorted(v["name"] for v in evolved["best"].values())
    assert siblings and all((ws / "harnesses" / s / "harness.yaml").is_file() for s in siblings)

    profiled = cli_json(ws, "profile", BASE, *siblings, "--split", "train", "--rollouts", 2)
    rates = {n: p["success"]["rate"] for n, p in profiled["profiles"].items()}
    assert all(rates[s] > rates[BASE] for s in siblings), rates

    out = tmp_path / "pool"
    cli(ws, "export-pool", "--out", out, "--base", BASE)
    assert "all checksums match" in cli(ws, "pool", "verify", out).stdout
    manifest = json.loads((out / "pool.json").read_text())
    assert {h["env"] for h in manifest["harnesses"]} == {NAME}
    assert {h["name"] for h in manifest["harnesses"]} >= {BASE}
