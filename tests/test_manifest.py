import os
import shutil

import pytest

from harnessctl.errors import ConfigError
from harnessctl.harness import load_harness, tree_hash
from tests.helpers import BASE_HARNESS


@pytest.fixture
def harness_copy(tmp_path):
    dst = tmp_path / "h"
    shutil.copytree(BASE_HARNESS, dst)
    return dst


def test_base_harness_loads_with_a_stable_hash(harness_copy):
    spec = load_harness(harness_copy)
    assert spec.name == "dbbench-base"
    assert spec.manifest.entry == "harness.py:DBBenchHarness"
    assert spec.hash == load_harness(BASE_HARNESS).hash  # identity is content, not location
    assert len(spec.hash) == 64


def test_hash_changes_with_any_file_and_ignores_bytecode(harness_copy):
    before = tree_hash(harness_copy)
    (harness_copy / "__pycache__").mkdir()
    (harness_copy / "__pycache__" / "harness.cpython-311.pyc").write_bytes(b"junk")
    assert tree_hash(harness_copy) == before
    prompt = harness_copy / "prompts" / "big_prompt.md"
    prompt.write_text(prompt.read_text() + " ")
    assert tree_hash(harness_copy) != before


def test_unknown_field_is_named_with_the_file(harness_copy):
    path = harness_copy / "harness.yaml"
    path.write_text(path.read_text() + "colour: blue\n")
    with pytest.raises(ConfigError) as err:
        load_harness(harness_copy)
    assert err.value.where == f"{path}: colour"
    assert "unknown field" in str(err.value)


def test_malformed_yaml_names_file_and_line(harness_copy):
    path = harness_copy / "harness.yaml"
    path.write_text("name: x\nsettings: [unclosed\n")
    with pytest.raises(ConfigError) as err:
        load_harness(harness_copy)
    assert str(path) in str(err.value)
    assert "line" in err.value.where
    assert "invalid YAML" in err.value.message


def test_bad_entry_and_bad_name_name_the_field(harness_copy):
    path = harness_copy / "harness.yaml"
    path.write_text("name: Bad Name\n")
    with pytest.raises(ConfigError) as err:
        load_harness(harness_copy)
    assert err.value.where.endswith(": name")
    path.write_text("name: ok\nenv: dbbench\nentry: missing.py:Harness\n")
    with pytest.raises(ConfigError) as err:
        load_harness(harness_copy)
    assert err.value.where.endswith(": entry")
    assert "missing.py" in err.value.message
    path.write_text("name: ok\nenv: dbbench\nentry: ../../etc/passwd.py:X\n")
    with pytest.raises(ConfigError):
        load_harness(harness_copy)


def test_the_environment_must_be_named(harness_copy):
    path = harness_copy / "harness.yaml"
    path.write_text("name: ok\nentry: harness.py:DBBenchHarness\n")
    with pytest.raises(ConfigError) as err:
        load_harness(harness_copy)
    assert err.value.where.endswith(": env")
    assert "required" in err.value.message.lower()


def test_symlinks_are_refused(harness_copy):
    os.symlink("/etc/hostname", harness_copy / "link.txt")
    with pytest.raises(ConfigError, match="regular files and directories only"):
        load_harness(harness_copy)


def test_runtime_settings_are_checked_on_the_host(harness_copy):
    path = harness_copy / "harness.yaml"
    text = path.read_text()
    assert "max_rounds: 16" in text
    path.write_text(text.replace("max_rounds: 16", 'max_rounds: "fifteen"'))
    with pytest.raises(ConfigError) as err:
        load_harness(harness_copy)
    assert err.value.where == f"{path}: settings.max_rounds"
    path.write_text(text.replace("max_rounds: 16", "max_rounds: 0\n  my_own: anything"))
    with pytest.raises(ConfigError, match="greater than or equal to 1"):
        load_harness(harness_copy)
    path.write_text(text.replace("max_rounds: 16", "max_rounds: 9\n  my_own: anything"))
    assert load_harness(harness_copy).manifest.settings["my_own"] == "anything"
