"""All repairs combined (harnessctl/evolve/combine.py): git's three-way merge of every
sibling's change from the base, conflicting or uncompilable merges left out and named, the
result outside harnesses/ and the same for the same inputs."""

from __future__ import annotations

import yaml

from harnessctl.evolve.combine import combine
from harnessctl.harness import load_harness

CODE = """class H:
    def a(self):
        return 1

    def b(self):
        return 2

    def c(self):
        return 3
"""


def harness(root, name, *, code=CODE, settings=None, parent=None, extra=None):
    path = root / name
    path.mkdir(parents=True)
    manifest = {"name": name, "env": "dbbench", "entry": "harness.py:H"}
    if parent:
        manifest.update(parent=parent.name, parent_hash=parent.hash, direction=name)
    manifest["settings"] = {"max_rounds": 15, **(settings or {})}
    (path / "harness.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (path / "harness.py").write_text(code)
    for rel, text in (extra or {}).items():
        (path / rel).write_text(text)
    return load_harness(path)


def test_changes_to_different_places_merge_and_a_conflict_is_left_out_and_named(tmp_path):
    src = tmp_path / "harnesses"
    base = harness(src, "base")
    one = harness(src, "one", code=CODE.replace("return 1", "return 10"), parent=base)
    two = harness(
        src,
        "two",
        code=CODE.replace("return 3", "return 30"),
        parent=base,
        settings={"max_rounds": 20},
        extra={"prompt.txt": "schema first\n"},
    )
    clash = harness(src, "clash", code=CODE.replace("return 1", "return 11"), parent=base)
    got = combine(base, [one, two, clash], tmp_path / "combined")
    assert got.merged == ["one", "two"]
    assert list(got.left_out) == ["clash"] and "harness.py" in got.left_out["clash"]
    code = (got.spec.path / "harness.py").read_text()
    assert "return 10" in code and "return 30" in code and "return 2\n" in code
    assert "return 11" not in code
    assert (got.spec.path / "prompt.txt").read_text() == "schema first\n"
    manifest = got.spec.manifest
    assert manifest.settings["max_rounds"] == 20
    assert manifest.parent == "base" and manifest.direction == "combined"
    assert got.spec.path.parent == tmp_path / "combined"  # never under harnesses/
    assert "one, two" in manifest.description
    # the base is untouched, and the same inputs give the same harness
    assert (base.path / "harness.py").read_text() == CODE
    again = combine(base, [one, two, clash], tmp_path / "combined")
    assert again.spec.name == got.spec.name and again.spec.hash == got.spec.hash


def test_a_round_two_sibling_merges_with_its_own_parent_and_settings_clash_is_named(tmp_path):
    src = tmp_path / "harnesses"
    base = harness(src, "base")
    one = harness(src, "one", code=CODE.replace("return 1", "return 10"), parent=base)
    child = harness(
        src, "one-r2", code=CODE.replace("return 1", "return 10").replace("return 2", "return 20")
    )
    low = harness(src, "low", parent=base, settings={"max_rounds": 5})
    high = harness(src, "high", parent=base, settings={"max_rounds": 25})
    got = combine(base, [one, child, low, high], tmp_path / "combined")
    assert got.merged == ["one", "one-r2", "low"]
    assert "settings.max_rounds" in got.left_out["high"]
    code = (got.spec.path / "harness.py").read_text()
    assert "return 10" in code and "return 20" in code
    # other inputs, another harness
    other = combine(base, [one], tmp_path / "combined")
    assert other.spec.name != got.spec.name and other.merged == ["one"]


def test_a_merge_that_does_not_compile_is_left_out(tmp_path):
    src = tmp_path / "harnesses"
    base = harness(src, "base")
    # each side alone compiles (a string; a comment); merged, the comment closes the string
    quoted = CODE.replace("return 1", 'return """').replace("        return 3", '        """')
    one = harness(src, "one", code=quoted, parent=base)
    two = harness(src, "two", code=CODE.replace("return 2", 'return 2  # """'), parent=base)
    for spec in (one, two):
        compile((spec.path / "harness.py").read_text(), "harness.py", "exec")
    got = combine(base, [one, two], tmp_path / "combined")
    assert got.merged == ["one"]
    assert "does not compile" in got.left_out["two"]
    assert (got.spec.path / "harness.py").read_text() == quoted
