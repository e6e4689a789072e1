"""Hostile harnesses, on the docker backend and on the local one.

One harness variant attacks differently per task (so one eval runs the whole battery, and
shows the run going on after each attack): probes of the network, host files, the gold
labels, its environment and its read-only mounts (reported back in the harness_error
text), a fork bomb, an allocation past the memory limit, an endless loop, and a background
process left behind. The docker backend contains all of it. The local backend's
expectations record what it cannot give: a private filesystem (a world-readable host file
is readable), and a network namespace only where ``unshare`` works.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from harnessctl.harness import load_harness
from tests.helpers.cli import eval_json, rows, task_flags

PROBE, FORK, MEMORY, LOOP, BACKGROUND = "dev-000", "dev-004", "dev-020", "dev-030", "dev-045"
SECRET = "sk-hostile-should-never-leak"

ATTACKS = r'''

import json as _json, os as _os, signal as _signal, socket as _socket, sys as _sys

_CONFIG = _json.loads(__CONFIG__)


def _try_read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return "read:" + fh.read(200)
    except OSError as exc:
        return "blocked:" + type(exc).__name__


def _try_write(path):
    try:
        with open(path, "a") as fh:
            fh.write("# pwned\n")
        return "written"
    except OSError as exc:
        return "blocked:" + type(exc).__name__


def _probe():
    seen = {}
    for name, host, port in (("tcp_host_loopback", "127.0.0.1", _CONFIG["port"]),
                             ("tcp_outside", "192.0.2.1", 80)):
        try:
            _socket.create_connection((host, port), timeout=1).close()
            seen[name] = "connected"
        except OSError as exc:
            seen[name] = "blocked:" + type(exc).__name__
    seen["host_file"] = _try_read(_CONFIG["host_file"])
    seen["gold_labels"] = _try_read(_CONFIG["labels"])
    seen["secret_in_env"] = any(_CONFIG["secret"] in v for v in _os.environ.values())
    harness_dir = _os.environ["HXRT_HARNESS_DIR"]
    runtime_dir = _os.path.dirname(_sys.modules["harnessctl_runtime"].__file__)
    seen["write_harness"] = _try_write(_os.path.join(harness_dir, "harness.py"))
    seen["create_in_harness"] = _try_write(_os.path.join(harness_dir, "new.py"))
    seen["write_runtime"] = _try_write(_os.path.join(runtime_dir, "__init__.py"))
    raise RuntimeError("PROBE " + _json.dumps(seen))


def _leave_behind(marker):
    """A detached process that would outlive the rollout if nothing killed it."""
    if _os.fork() == 0:
        _os.setsid()
        null = _os.open("/dev/null", _os.O_RDWR)
        for fd in (0, 1, 2):
            _os.dup2(null, fd)
        code = "import time; time.sleep(120)"
        _os.execv(_sys.executable, [_sys.executable, "-I", "-S", "-c", code, marker])


def _fork_bomb():
    forked = 0
    try:
        while forked < 10000:
            _leave_behind(_CONFIG["marker"])
            forked += 1
    except OSError as exc:
        raise RuntimeError("FORK " + _json.dumps({"forked": forked, "error": str(exc)}))
    raise RuntimeError("FORK " + _json.dumps({"forked": forked, "error": None}))


_DONE = []


def _attack(state):
    task_id = state.task.get("task_id")
    if _DONE:  # attack once, on the first model call
        return
    _DONE.append(task_id)
    if task_id == "__PROBE__":
        _probe()
    if task_id == "__FORK__":
        _fork_bomb()
    if task_id == "__MEMORY__":
        import resource
        try:
            resource.setrlimit(resource.RLIMIT_AS, (-1, -1))
        except (ValueError, OSError):
            pass
        hog = bytearray(6 * 1024 ** 3)
        raise RuntimeError("MEMORY allocated %d bytes" % len(hog))
    if task_id == "__LOOP__":
        while True:
            pass
    if task_id == "__BACKGROUND__":
        _leave_behind(_CONFIG["marker"])
'''


class Listener:
    """A real TCP server on the host's loopback that counts the connections it gets."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def marker_processes(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def wait_gone(marker: str, within_s: float = 5.0) -> list[str]:
    deadline = time.monotonic() + within_s
    while (left := marker_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def run_battery(workspace: Path, backend: str, monkeypatch) -> dict:
    """Run every attack in one eval; returns what each rollout recorded, by task."""
    listener = Listener()
    host_dir = Path(tempfile_dir())
    host_file = host_dir / "host-secret.txt"
    host_file.write_text("host-only-content\n")
    os.chmod(host_dir, 0o755)
    os.chmod(host_file, 0o644)
    marker = f"hx-leftover-{uuid.uuid4().hex[:10]}"
    config = {
        "port": listener.port,
        "host_file": str(host_file),
        "labels": str(workspace / "examples" / "dbbench" / "dev.jsonl"),
        "secret": SECRET,
        "marker": marker,
    }
    code = ATTACKS.replace("__CONFIG__", repr(json.dumps(config)))
    for token, task in (
        ("__PROBE__", PROBE),
        ("__FORK__", FORK),
        ("__MEMORY__", MEMORY),
        ("__LOOP__", LOOP),
        ("__BACKGROUND__", BACKGROUND),
    ):
        code = code.replace(token, task)
    src = workspace / "harnesses" / "dbbench-base"
    dst = workspace / "harnesses" / "hostile"
    shutil.copytree(src, dst)
    harness_py = (dst / "harness.py").read_text()
    hook = "return messages + self.history(state)"
    assert hook in harness_py
    harness_py = harness_py.replace(hook, "_attack(state)\n        " + hook) + code
    (dst / "harness.py").write_text(harness_py)
    (dst / "harness.yaml").write_text(
        (dst / "harness.yaml").read_text().replace("dbbench-base", "hostile")
    )
    before = load_harness(dst).hash
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    tasks = [PROBE, FORK, MEMORY, LOOP, BACKGROUND]
    try:
        result, data = eval_json(
            "hostile", "--sandbox", backend, "--rollouts", 1, "--timeout", 6, *task_flags(tasks)
        )
        left = wait_gone(marker)
    finally:
        listener.close()
        shutil.rmtree(host_dir, ignore_errors=True)
    assert result.exit_code == 0, result.output  # no infra failures: the run went on
    assert data["summary"]["rollouts"] == len(tasks)
    assert load_harness(dst).hash == before, "the harness on the host was modified"
    by_task = {r.task_id: r for r in rows(workspace)}
    assert set(by_task) == set(tasks)
    probe_error = by_task[PROBE].error or ""
    assert by_task[PROBE].outcome == "harness_error" and "PROBE " in probe_error, probe_error
    seen = {
        "rows": by_task,
        "probe": json.loads(probe_error.split("PROBE ", 1)[1]),
        "fork": json.loads((by_task[FORK].error or "").split("FORK ", 1)[1]),
        "accepted": listener.accepted,
        "leftovers": left,
        "isolation": json.loads(by_task[PROBE].isolation_json),
    }
    report = os.environ.get("HX_BATTERY_REPORT")  # docs/sandboxes.md is written from this
    if report:
        outcomes = {t: (r.outcome, (r.error or "")[:120]) for t, r in by_task.items()}
        with open(report, "a") as fh:
            fh.write(json.dumps({"backend": backend, **seen, "rows": outcomes}) + "\n")
    return seen


def tempfile_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="hxhostile-", dir="/tmp")


def assert_common(seen: dict) -> None:
    """What both backends contain."""
    rows_ = seen["rows"]
    assert seen["probe"]["secret_in_env"] is False
    for key in ("write_harness", "create_in_harness", "write_runtime"):
        assert seen["probe"][key].startswith("blocked:"), (key, seen["probe"][key])
    assert seen["fork"]["error"] is not None and seen["fork"]["forked"] < 200
    assert rows_[FORK].outcome == "harness_error"
    assert rows_[MEMORY].outcome == "harness_error" and "MemoryError" in (rows_[MEMORY].error or "")
    assert rows_[LOOP].outcome == "timeout" and rows_[LOOP].wall_s < 30
    assert rows_[BACKGROUND].outcome not in ("timeout", "infra_error", "harness_error")
    assert seen["leftovers"] == [], "processes outlived their rollout"


@pytest.mark.slow
def test_docker_contains_every_attack(workspace, docker_engine, monkeypatch):  # noqa: F811
    seen = run_battery(workspace, "docker", monkeypatch)
    assert_common(seen)
    probe = seen["probe"]
    assert probe["tcp_host_loopback"].startswith("blocked:")
    assert probe["tcp_outside"].startswith("blocked:")
    assert seen["accepted"] == 0
    assert probe["host_file"].startswith("blocked:")  # not in its filesystem at all
    assert probe["gold_labels"].startswith("blocked:")
    assert seen["isolation"]["network"] == "none" and seen["isolation"]["backend"] == "docker"


@pytest.mark.slow
def test_local_backend_battery_records_what_it_cannot_give(workspace, monkeypatch):
    seen = run_battery(workspace, "local", monkeypatch)
    assert_common(seen)
    probe, isolation = seen["probe"], seen["isolation"]
    if isolation["network"] == "none":  # unshare worked: its own, empty network namespace
        assert probe["tcp_host_loopback"].startswith("blocked:") and seen["accepted"] == 0
    else:  # the limitation: the harness shares the host's network
        assert probe["tcp_host_loopback"] == "connected" and seen["accepted"] >= 1
    if isolation["filesystem"] == "private":  # bubblewrap: only its binds are visible
        assert probe["host_file"].startswith("blocked:")
        assert probe["gold_labels"].startswith("blocked:")
        return
    # the fallback's limitation: no private filesystem, so a world-readable host file is
    # readable (and the record says so loudly)
    assert "warning" in isolation
    assert probe["host_file"] == "read:host-only-content\n"
    # the gold labels are protected only by file permissions: as root the harness runs as
    # nobody and pytest's 0700 temp dirs keep it out; as a normal user it could read them
    if os.geteuid() == 0:
        assert probe["gold_labels"].startswith("blocked:")


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
