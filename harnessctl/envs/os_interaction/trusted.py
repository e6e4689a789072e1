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

- the copy's C library reading no configuration the agent can write (same-length paths,
  patched in place): the name-service switch from ``/.hx/nsswitch.conf`` (``files`` only,
  built into the library: no NSS module the agent names in ``/etc/nsswitch.conf`` is ever
  loaded), locales from the copy's (``/.hx/usr/locale``), conversion modules from the
  copy's; and the search path of ``execvp``/``posix_spawnp`` read from ``HXPT`` instead of
  ``PATH`` (so ``find -exec``, ``xargs``, ``env`` run the copy's programs while the script
  sees the container's ``PATH``).

A check sees the environment AgentBench's ``docker exec`` gives it (:func:`check_env`): the
container's own variables, ``PATH`` included, nothing of the copy in it. Its bash finds the
copy's programs first all the same: ``BASH_ENV`` names ``/.hx/check.bashrc``, which fills
bash's command table with them (``hash -p``; a ``PATH`` the check itself changes, as
``source ~/.bashrc`` does, is searched as it says); ``HXPT`` does the same for the library;
python checks run ``python3 -I``, and a ``python3`` a bash check starts gets
``PYTHONSAFEPATH``/``PYTHONNOUSERSITE`` (no current directory, no user site). Building needs
``patchelf`` in the image (``scripts/build-os-image.sh`` installs it); the volume is named by
the image's id and this builder's hash, so a rebuilt image or a new builder gets its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from typing import Any

PREFIX = "/.hx"
MARK = ".harnessctl-tools-complete"
#: The image's PATH (its ``ENV``), when the container's own cannot be read.
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: What the copy's C library reads for ``execvp``'s search instead of ``PATH``.
EXEC_PATH_VAR = "HXPT"
#: Sourced by a check's bash (``BASH_ENV``): the copy's programs in bash's command table.
CHECK_RC = f"{PREFIX}/check.bashrc"
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
def pin(path, pairs):  # same-length string replacements in a program of the copy
    with open(path, "rb") as f:
        data = f.read()
    for old, new in pairs:
        if len(old) != len(new) or old not in data:
            sys.exit("%s does not read %s: cannot pin it" % (path, old.decode()))
        data = data.replace(old, new)
    with open(path, "wb") as f:
        f.write(data)

loader = os.path.join(out, LOADER)
pin(loader, [(b"/etc/ld.so.preload", b"/.hx/ld.so.preload"),
             (b"/etc/ld.so.cache", b"/.hx/ld.so.cache")])
# the C library: name service, locales and conversion modules from the copy, and exec's
# search path from HXPT (every "PATH" the library names is a variable name: GCONV_PATH,
# LOCPATH, NLSPATH and, as their tail, PATH itself; none of them is set by a check)
gconv = b"/usr/lib/x86_64-linux-gnu/gconv"
gconv_alias = b"/.hx/g" + b"c" * (len(gconv) - 6)
os.symlink("usr/lib/x86_64-linux-gnu/gconv", os.path.join(out, gconv_alias[5:].decode()))
os.symlink("lib/locale", os.path.join(out, "usr", "locale"))
pin(os.path.realpath(os.path.join(out, "usr/lib/x86_64-linux-gnu/libc.so.6")),
    [(b"/etc/nsswitch.conf", b"/.hx/nsswitch.conf"), (b"/usr/lib/locale", b"/.hx/usr/locale"),
     (gconv, gconv_alias), (b"PATH\0", (EXEC_PATH_VAR + "\0").encode())])
with open(os.path.join(out, "nsswitch.conf"), "w") as f:
    for db in ("passwd", "group", "shadow", "gshadow", "hosts", "networks", "protocols",
               "services", "ethers", "rpc", "netgroup"):
        f.write("%s: files\n" % db)
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
import shlex
with open(os.path.join(out, "check.bashrc"), "w") as f:
    f.write("unset BASH_ENV\n")  # this check's bash only, not a shell it starts
    for part in ("bin", "sbin"):  # sbin last: it comes first on the image's PATH
        folder = os.path.join(out, "usr", part)
        for name in sorted(os.listdir(folder)):
            if "/" not in name and name not in (".", ".."):
                f.write("hash -p %s %s\n" % (shlex.quote(PREFIX + "/usr/%s/%s" % (part, name)),
                                             shlex.quote(name)))
with open(os.path.join(out, MARK_NAME), "w") as f:
    f.write("%d programs, %d scripts\n" % (len(elfs), len(scripts)))
"""

_ready: dict[str, str] = {}
_lock = threading.Lock()


class ToolsError(RuntimeError):
    """The checks' tools could not be built from the image."""


def volume_name(image_id: str) -> str:
    """The copy's volume: one per image and version of :data:`BUILDER`."""
    import hashlib

    builder = hashlib.sha256(BUILDER.encode()).hexdigest()[:8]
    return f"harnessctl-os-tools-{image_id.removeprefix('sha256:')[:16]}-{builder}"


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
            "python3", "-I", "-c", f"MARK_NAME = {MARK!r}\nEXEC_PATH_VAR = {EXEC_PATH_VAR!r}\n"
            f"{BUILDER}", "/out",
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


def check_env(container_env: list[str] | tuple[str, ...] = ()) -> list[str]:
    """A check's environment: what ``docker exec`` gives a command in the container (its
    configured variables, ``HOME`` of root), as AgentBench's checks see it, and the host's
    additions that keep the copy's programs first without showing it (see the module
    docstring). ``container_env`` is the container's configuration (``docker inspect``),
    the host's record, not anything the agent wrote."""
    env = {"PATH": IMAGE_PATH}
    for item in container_env:
        name, sep, value = item.partition("=")
        if sep and name:
            env[name] = value
    env["HOME"] = "/root"
    env[EXEC_PATH_VAR] = f"{PREFIX}/usr/bin:{PREFIX}/usr/sbin:{env['PATH']}"
    env["BASH_ENV"] = CHECK_RC
    env["PYTHONSAFEPATH"] = env["PYTHONNOUSERSITE"] = "1"
    return [f"{k}={v}" for k, v in env.items()]


def check_command(
    language: str, code: str, params: tuple[str, ...], env: list[str] | None = None
) -> list[str]:
    """The command (after ``docker exec ID``) of a check run with the trusted tools, in
    ``env`` (:func:`check_env`; nothing of the agent's)."""
    head = [ENV, "-i", *(env if env is not None else check_env())]
    if language == "python":
        return [*head, PYTHON, "-I", "-c", code, *params]
    return [*head, BASH, "-c", code, *(("--", *params) if params else ())]


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


def agent_command(*argv: str, user: Any = None) -> list[str]:
    """``argv`` run without :data:`AGENT_DROPS` (the agent's shell, the task's program);
    ``user`` (``uid``, ``gid``): as that user, its groups from ``/etc/group`` (the capability
    is dropped before the user changes: the bounding set needs root to change)."""
    drop = f"-{AGENT_DROPS}"
    who: list[str] = []
    if user is not None and user.uid != 0:
        who = [f"--reuid={user.uid}", f"--regid={user.gid}", "--init-groups"]
    return [SETPRIV, *who, f"--inh-caps={drop}", f"--bounding-set={drop}", "--", *argv]
