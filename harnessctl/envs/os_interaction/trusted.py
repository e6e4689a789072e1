"""The checks' own tools: a read-only copy of the task image's programs the agent cannot change.

The agent is root in its task container, and the checks run in that same container (they
read its state). Run with the container's own ``bash`` and ``python3``, a check's verdict is
the agent's to forge: one command that puts an ``exit 0`` ``python3`` first on ``PATH``
passes every check. So the checks run with tools from a Docker volume built once per image
from a pristine container of it and mounted read-only at :data:`PREFIX` in every task
container (the agent has no ``CAP_SYS_ADMIN``: it can neither remount nor unmount it):

- the image's ``/usr/{bin,sbin,lib,lib64,libexec}``, copied;
- every ELF file's interpreter set to the copy's own loader and its library path to the
  copy's library directories, default directories off (``patchelf --set-interpreter
  --set-rpath --force-rpath --no-default-lib``): nothing loads from the container's
  ``/usr/lib``, which the agent can write;
- the copy's loader reading ``/.hx/ld.so.preload`` and ``/.hx/ld.so.cache`` (which do not
  exist) instead of ``/etc/...`` (same length, patched in place): a preload library the
  agent names in ``/etc/ld.so.preload`` is never loaded into a check;
- links that leave ``/usr`` (``/etc/alternatives/awk``, ``/etc/python3.11/sitecustomize.py``)
  resolved against the pristine image, kept when they land inside the copy and dropped when
  they do not; scripts' ``#!/usr/...`` and ``#!/bin/...`` lines pointed into the copy.

Checks then run with ``PATH`` starting with the copy (the container's directories after it,
so a program the task asked the agent to write, ``calc``, is still found), an environment
of the host's choosing, and ``python3 -I`` (no current directory or user site on
``sys.path``). Building needs ``patchelf`` in the image (``scripts/build-os-image.sh``
installs it); the volume is named by the image's id, so a rebuilt image gets its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading

PREFIX = "/.hx"
MARK = ".harnessctl-tools-complete"
#: The checks' PATH: the copy first, then the container's own directories.
CHECK_PATH = ":".join(
    [f"{PREFIX}/usr/bin", f"{PREFIX}/usr/sbin"]
    + ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
)
BASH = f"{PREFIX}/usr/bin/bash"
PYTHON = f"{PREFIX}/usr/bin/python3"
SETPRIV = f"{PREFIX}/usr/bin/setpriv"
ENV = f"{PREFIX}/usr/bin/env"
#: A capability the task container keeps and every process that lives in it drops (its
#: first process, the agent's shell, the task's ``start`` program): only a check holds it.
#: ptrace and ``/proc/PID/{mem,environ,fd}`` of a process whose capabilities are not a
#: subset of the caller's need ``CAP_SYS_PTRACE``, which no process there holds, so nothing
#: the agent runs can reach into a check while it runs. No task needs it.
AGENT_DROPS = "audit_write"

#: Run by the image's own ``python3`` in a fresh container of it: builds the copy under
#: ``sys.argv[1]`` (the volume) from ``/`` (the pristine image).
BUILDER = r"""
import os, shutil, subprocess, sys
out = sys.argv[1]
PREFIX = "/.hx"
RPATH = ":".join(PREFIX + "/" + d for d in ("usr/lib/x86_64-linux-gnu", "usr/lib"))
LOADER = "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
if shutil.which("patchelf") is None:
    sys.exit("patchelf is not in the image: rebuild it with scripts/build-os-image.sh")
for name in os.listdir(out):  # what an interrupted build left
    path = os.path.join(out, name)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)
for part in ("bin", "sbin", "lib", "lib64", "libexec"):
    if os.path.isdir("/usr/" + part):
        shutil.copytree("/usr/" + part, os.path.join(out, "usr", part), symlinks=True)

def resolve(target):  # an absolute link's target, resolved in the pristine image
    hops, parts, cur = 0, target.strip("/").split("/"), ""
    while parts:
        name = parts.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = cur + "/" + name if cur else name
        if os.path.islink("/" + nxt):
            hops += 1
            if hops > 64:
                return None
            link = os.readlink("/" + nxt)
            if link.startswith("/"):
                cur, parts = "", link.strip("/").split("/") + parts
            else:
                parts = link.split("/") + parts
            continue
        cur = nxt
    return cur

elfs, scripts = [], []
for top, dirs, files in os.walk(out):
    for name in files + dirs:
        path = os.path.join(top, name)
        if os.path.islink(path):
            target = os.readlink(path)
            if target.startswith("/"):
                real = resolve(target)
                os.unlink(path)
                if real and real.startswith("usr/") and os.path.lexists(os.path.join(out, real)):
                    os.symlink(PREFIX + "/" + real, path)
            continue
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            head = f.read(4)
        if head == b"\x7fELF":
            elfs.append(path)
        elif head[:2] == b"#!":
            scripts.append(path)
loader = os.path.join(out, LOADER)
with open(loader, "rb") as f:
    data = f.read()
for old, new in ((b"/etc/ld.so.preload", b"/.hx/ld.so.preload"),
                 (b"/etc/ld.so.cache", b"/.hx/ld.so.cache")):
    if len(old) != len(new) or old not in data:
        sys.exit("the image's loader does not read %s: cannot pin it" % old.decode())
    data = data.replace(old, new)
with open(loader, "wb") as f:
    f.write(data)
for path in elfs:
    if os.path.samefile(path, loader):
        continue
    if subprocess.run(["patchelf", "--print-rpath", path], capture_output=True).returncode:
        continue  # no dynamic section: a static program or an object file
    args = ["patchelf", "--set-rpath", RPATH, "--force-rpath", "--no-default-lib"]
    interp = subprocess.run(["patchelf", "--print-interpreter", path], capture_output=True)
    if interp.returncode == 0 and interp.stdout.strip():
        args += ["--set-interpreter", PREFIX + "/" + LOADER]
    done = subprocess.run(args + [path], capture_output=True, text=True)
    if done.returncode:
        sys.exit("patchelf failed on %s: %s" % (path, done.stderr.strip()[:300]))
for path in scripts:
    with open(path, "rb") as f:
        first, rest = f.readline(), f.read()
    line = first.decode("latin-1")
    body = line[2:].lstrip()
    if body.startswith("/usr/"):
        line = "#!" + PREFIX + body
    elif body.startswith(("/bin/", "/sbin/")):
        line = "#!" + PREFIX + "/usr" + body
    with open(path, "wb") as f:
        f.write(line.encode("latin-1") + rest)
with open(os.path.join(out, MARK_NAME), "w") as f:
    f.write("%d programs, %d scripts\n" % (len(elfs), len(scripts)))
"""

_ready: dict[str, str] = {}
_lock = threading.Lock()


class ToolsError(RuntimeError):
    """The checks' tools could not be built from the image."""


def volume_name(image_id: str) -> str:
    return f"harnessctl-os-tools-{image_id.removeprefix('sha256:')[:16]}"


def ensure_tools(image: str, docker) -> str:
    """The read-only tools volume of ``image`` (built on first use; ``docker`` is the
    container module's CLI runner). One build at a time on this host (a file lock): a
    volume is used only once its completion mark is there."""
    image_id = docker("image", "inspect", "-f", "{{.Id}}", image).strip()
    with _lock:
        if image_id in _ready:
            return _ready[image_id]
        volume = volume_name(image_id)
        lock_path = os.path.join(tempfile.gettempdir(), f"{volume}.lock")
        with open(lock_path, "a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                if not _complete(volume, image, docker):
                    _build(volume, image, docker)
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)
        _ready[image_id] = volume
        return volume


def _complete(volume: str, image: str, docker) -> bool:
    if not docker("volume", "ls", "-q", "--filter", f"name=^{volume}$", check=False).strip():
        return False
    probe = docker(
        "run", "--rm", "--network", "none", "-v", f"{volume}:/v:ro", image,
        "bash", "-c", f"test -f /v/{MARK} && echo yes", check=False,
    )  # fmt: skip
    return probe.strip() == "yes"


def _build(volume: str, image: str, docker) -> None:
    # ``docker`` raises the container module's ContainerError, a RuntimeError (not imported
    # here: that module imports this one)
    with contextlib.suppress(RuntimeError):
        docker("volume", "rm", "-f", volume)  # an interrupted build: start again
    docker("volume", "create", "--label", "harnessctl.kind=os-tools", volume)
    try:
        docker(
            "run", "--rm", "--network", "none", "-v", f"{volume}:/out", image,
            "python3", "-I", "-c", f"MARK_NAME = {MARK!r}\n{BUILDER}", "/out",
            timeout=600,
        )  # fmt: skip
    except RuntimeError as exc:
        with contextlib.suppress(RuntimeError):
            docker("volume", "rm", "-f", volume)
        raise ToolsError(f"building the checks' tools from {image} failed: {exc}") from None
    # the copies of images rebuilt since: removed unless a container still uses them
    # (the engine refuses to remove a volume in use)
    kind = "label=harnessctl.kind=os-tools"
    for old in docker("volume", "ls", "-q", "--filter", kind, check=False).split():
        if old != volume:
            docker("volume", "rm", old, check=False)


def check_command(language: str, code: str, params: tuple[str, ...]) -> list[str]:
    """The command (after ``docker exec ID``) of a check run with the trusted tools, in an
    environment of the host's making (nothing of the container's or the agent's)."""
    env = [ENV, "-i", f"PATH={CHECK_PATH}", "LANG=C.UTF-8", "HOME=/root"]
    if language == "python":
        return [*env, PYTHON, "-I", "-c", code, *params]
    return [*env, BASH, "-c", code, *(("--", *params) if params else ())]


#: The container's first process, with the agent's capabilities (so that everything that
#: lives in the container, but a running check, is the agent's peer: ``find /`` and
#: ``ls /proc/1/fd`` read as they did): reaps what is reparented to it, as ``--init`` did.
INIT = """
import os, time
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.5)
    except InterruptedError:
        pass
"""


def init_command() -> list[str]:
    return agent_command(PYTHON, "-I", "-S", "-c", INIT)


def agent_command(*argv: str) -> list[str]:
    """``argv`` run without :data:`AGENT_DROPS` (the agent's shell, the task's program)."""
    drop = f"-{AGENT_DROPS}"
    return [SETPRIV, f"--inh-caps={drop}", f"--bounding-set={drop}", "--", *argv]
