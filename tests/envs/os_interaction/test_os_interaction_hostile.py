"""os_interaction's task container holds against hostile commands: a fork bomb, a disk
filler and a command that never ends are stopped, recorded in the score's detail, and the
episode goes on in a working shell; no mark the agent sets exempts a process from the limits;
a check's verdict depends on nothing the agent wrote but the state the task asks about (no
name-service module, locale, profile, loader or interpreter configuration reaches it); an
agent that breaks its own shell is scored; the expected answer comes from the state before
the agent acted (real task containers). Rounds 1-4 of the hostile reviews (issue #53)."""

from __future__ import annotations

import base64
import subprocess

import pytest

from harnessctl.envs.os_interaction import OSEnvironment
from harnessctl.envs.os_interaction.tasks import load_tasks
from tests.helpers import ROOT
from tests.helpers.ci import unavailable
from tests.helpers.os_env import constructor_library, require_os_image

require_os_image()
pytestmark = pytest.mark.timeout(300)

TASK = load_tasks(ROOT / "examples" / "os_interaction").by_id()["dev.4"]


@pytest.fixture
def episode():
    env = OSEnvironment(command_timeout_s=4, pids=64, disk_mb=160)
    played = env.open_episode(TASK, 0)
    played.reset()
    yield env, played
    container_id = played.container.id if played.container else None
    played.close()
    if container_id:  # closed means gone
        gone = subprocess.run(["docker", "inspect", container_id], capture_output=True)
        assert gone.returncode != 0


@pytest.mark.slow
def test_a_command_that_never_ends_is_stopped_and_the_shell_goes_on(episode):
    env, played = episode
    played.step("bash", "cd /usr && export MARK=kept", None)
    stopped = played.step("bash", "echo started; sleep 1000", None)
    assert stopped.info["limit"] == "timeout" and "stopped" in stopped.info["error"]
    assert "started" in stopped.observation
    loop = played.step("bash", "while true; do :; done", None)  # a shell builtin loop
    assert loop.info["limit"] == "timeout"
    after = played.step("bash", "pwd; echo ${MARK:-lost}", None)
    assert after.observation.split() == ["/usr", "lost"]  # same directory, a fresh shell
    # the directory it was in is gone when the next shell starts: that shell starts in /
    played.step("bash", "mkdir /gone && cd /gone", None)
    gone = played.step("bash", "rm -rf /gone && sleep 100", None)
    assert gone.info["limit"] == "timeout"
    assert played.step("bash", "pwd", None).observation.strip() == "/"
    detail = env.score(TASK, ROOT, "3", played).detail
    assert [e["limit"] for e in detail["events"]] == ["timeout", "timeout", "timeout"]


@pytest.mark.slow
def test_no_mark_the_agent_sets_exempts_a_process_from_the_limits(episode):
    """Round 4: ``HX_START=1`` (the mark of the task's start program) exempted any process.
    The host now spares what it started by identity (pid and start time, recorded after
    setup): a marked CPU burner and a marked command are stopped at the time limit, and the
    task's own ``start`` program (dev.4's writer of /root/log) keeps running."""
    env, played = episode
    burner = "HX_START=1 nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &"
    played.step("bash", burner, None)
    stopped = played.step("bash", "export HX_START=1; sleep 100", None)
    assert stopped.info["limit"] == "timeout", stopped.info
    left = played.step("bash", "ps -eo args | grep -c '[w]hile :'; pgrep -xc sleep", None)
    assert left.observation.split() == ["0", "0"], left.observation
    started = played.step("bash", "ps -eo args | grep -c '[r]oot/log'", None)
    assert started.observation.strip() == "1", started.observation  # start's program


@pytest.mark.slow
def test_a_fork_bomb_is_held_by_the_pids_limit_and_stopped(episode):
    env, played = episode
    limit = subprocess.run(
        ["docker", "inspect", "-f", "{{.HostConfig.PidsLimit}}", played.container.id],
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert limit == "64"  # the engine holds the bomb at 64 processes
    played.step("bash", "echo kept > /root/file", None)
    played.step("bash", "bomb() { bomb | bomb & }; bomb", None)
    # the next command runs past its limit: every process the commands started is stopped
    # (or, when no process can start to do it, the container restarts: files kept, `start`
    # started again), and that is recorded
    held = played.step("bash", "sleep 6", None)
    assert held.info["limit"] in ("timeout", "pids"), held.info
    events = [e["limit"] for e in env.score(TASK, ROOT, "3", played).detail["events"]]
    # on a loaded machine the bomb's own command may be stopped too, before it returns
    assert events[-1] == held.info["limit"] and set(events) <= {"timeout", "pids"}, events
    after = played.step("bash", "cat /root/file; ps -e --no-headers | wc -l", None)
    assert "limit" not in after.info, after
    kept, count = after.observation.split()
    assert kept == "kept" and int(count) < 10, after.observation  # the bomb is gone
    assert "python3" in played.step("bash", "ps -eo args", None).observation  # `start` runs


@pytest.mark.slow
def test_filling_the_disk_is_stopped_and_recorded(episode):
    env, played = episode
    big = played.step("bash", "head -c 200M /dev/zero > /root/big; ls -l /root/big", None)
    assert "File size limit exceeded" in big.observation  # RLIMIT_FSIZE: 64 MiB a file
    assert " 67108864 " in big.observation
    tmp = played.step(
        "bash", "head -c 40M /dev/zero > /tmp/a; head -c 40M /dev/zero > /tmp/b", None
    )
    assert "No space left" in tmp.observation  # /tmp: a 64 MiB tmpfs
    many = played.step(
        "bash", "for i in $(seq 50); do head -c 60M /dev/zero > /root/f$i; sleep 0.2; done", None
    )
    assert many.info["limit"] == "disk", many
    events = env.score(TASK, ROOT, "3", played).detail["events"]
    assert [e["limit"] for e in events] == ["disk"]


@pytest.mark.slow
def test_a_background_writer_is_stopped_at_the_disk_limit_between_commands(episode):
    """A writer left running after its command returned (``nohup ... &``) fills the layer
    while no command runs: the container's monitor stops it past ``disk_mb`` and records a
    ``disk`` event; the agent is told with its next command."""
    import time

    env, played = episode
    played.step(
        "bash",
        "HX_START=1 nohup sh -c 'i=0; while true; do i=$((i+1)); head -c 8M /dev/zero >"
        " /root/w$i; done' >/dev/null 2>&1 &",
        None,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not played.container.background:
        time.sleep(0.5)
    assert played.container.background, "the writer was never stopped"
    time.sleep(2)
    size_mb, _ = played.container.layer_usage()
    time.sleep(3)
    assert played.container.layer_usage()[0] == size_mb  # stopped: the layer grows no more
    # the overshoot is what the writer wrote in one poll and the stop (~1 GB/s here; under
    # 80 MiB on a quiet machine, ~100 under a loaded test run), not the 1.4 GB of no limit
    assert size_mb < env.limits.disk_mb + 256, size_mb
    after = played.step("bash", "ls /root | wc -l", None)
    assert after.info["limit"] == "disk" and "left running" in after.info["error"]
    events = env.score(TASK, ROOT, "3", played).detail["events"]
    assert events[0]["limit"] == "disk" and events[0]["background"] is True
    assert abs(events[0]["mb"] - size_mb) < 1, (events, size_mb)  # what the stop left


@pytest.mark.slow
def test_empty_files_count_against_the_file_limit():
    """15,000 empty files are 0 bytes but 15,000 inodes: the file limit stops them (marked
    ``HX_START=1``, as round 4's 89,956 files were)."""
    env = OSEnvironment(command_timeout_s=20, disk_mb=160, files=5_000)
    played = env.open_episode(TASK, 0)
    played.reset()
    try:
        fill = "HX_START=1 sh -c 'mkdir /root/e && cd /root/e && seq 15000 | xargs touch'"
        out = played.step("bash", fill, None)
        assert out.info.get("limit") == "disk", out
        mb, files = played.container.layer_usage()
        assert files > 5_000 and mb < 160
    finally:
        played.close()


def test_the_task_container_has_no_network(episode):
    _, played = episode
    out = played.step("bash", "curl -sS -m 3 http://deb.debian.org/ 2>&1; echo rc=$?", None)
    assert "rc=0" not in out.observation


# --- a hostile harness: everything it can reach from the sandbox --------------------------

PROBE = r"""

def _probe(self, state):
    import glob, json, os, shutil, socket
    seen = {"sockets": {}, "tcp": {}}
    for path in ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"):
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.connect(path)
            seen["sockets"][path] = "reached"
        except OSError as exc:
            seen["sockets"][path] = type(exc).__name__
        finally:
            sock.close()
    for port in (2375, 2376):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            seen["tcp"][port] = "reached"
        except OSError as exc:
            seen["tcp"][port] = type(exc).__name__
    seen["docker_cli"] = shutil.which("docker")
    seen["scripts_visible"] = os.path.exists(__SCRIPTS__)
    seen["task_dir"] = sorted(os.listdir(self.task_dir))
    procs = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(cmdline, "rb") as f:
                procs.append(f.read().replace(b"\0", b" ").decode("utf-8", "replace"))
        except OSError:
            pass
    seen["container_procs"] = [p for p in procs if "sleep infinity" in p or "docker" in p]
    # through the environment's own actions: the container, and nothing of the checks
    found = self.tools["bash"].run(
        "grep -rls 'int(argv' / --include='*.py' 2>/dev/null | head -3; ls /", limit=4000
    )
    seen["bash_sees_checks"] = "integer-match" in found.text or "argv[1]" in found.text
    seen["bash_ok"] = "root" in found.text.split()
    other = self.tools["bash"].client.step("score", "3")
    seen["other_tool"] = other.info.get("error", "")
    raise RuntimeError("HOSTILE " + json.dumps(seen))
"""


def _hostile_harness(tmp_path):
    import shutil

    dst = tmp_path / "os-hostile"
    shutil.copytree(ROOT / "harnesses" / "os-base", dst)
    scripts = str(ROOT / "examples" / "os_interaction" / "scripts")
    harness_py = (dst / "harness.py").read_text()
    # probe before the first model call, whatever os-base's own hooks say
    hook = (
        "\n\n_plain_context = OSHarness.build_context\n\n\n"
        "def _probing_context(self, state):\n"
        "    _probe(self, state)\n"
        "    return _plain_context(self, state)\n\n\n"
        "OSHarness.build_context = _probing_context\n"
    )
    probe = PROBE.replace("__SCRIPTS__", repr(scripts))
    (dst / "harness.py").write_text(harness_py + probe + hook)
    manifest = (dst / "harness.yaml").read_text().replace("name: os-base", "name: os-hostile")
    (dst / "harness.yaml").write_text(manifest)
    return dst


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["local", "docker"])
def test_a_hostile_harness_reaches_the_task_container_only_through_the_actions(tmp_path, sandbox):
    import json

    from harnessctl.harness import load_harness
    from harnessctl.policy import Policy
    from harnessctl.run.session import RolloutSession
    from harnessctl.sandbox import Limits
    from harnessctl.suite import load_suite

    suite = load_suite(ROOT / "examples" / "os_interaction")
    task = suite.tasks("dev").by_id()["dev.6"]
    harness = load_harness(_hostile_harness(tmp_path))
    with RolloutSession(suite.environment, sandbox=sandbox, limits=Limits(timeout_s=60)) as s:
        rec = s.run(harness, task, 0, Policy("replay/os_interaction"))
    assert rec.outcome == "harness_error" and "HOSTILE " in (rec.error or ""), rec.error
    seen = json.loads(rec.error.split("HOSTILE ", 1)[1])
    assert set(seen["sockets"].values()) <= {"FileNotFoundError", "PermissionError"}, seen
    assert "reached" not in seen["tcp"].values(), seen
    assert seen["docker_cli"] is None and not seen["scripts_visible"], seen
    assert set(seen["task_dir"]) <= {"task.json", "events.jsonl"}, seen  # the runtime's own
    assert seen["container_procs"] == [], seen
    assert seen["bash_ok"] and not seen["bash_sees_checks"], seen
    assert "unknown tool" in seen["other_tool"], seen
    print("seen by the hostile harness:", json.dumps(seen))


def test_a_task_container_whose_owner_is_gone_is_reaped(monkeypatch):
    from harnessctl.envs.os_interaction import container as tc

    live = tc.TaskContainer()  # owned by this process, which is alive: left alone
    live.start()
    monkeypatch.setattr(tc.os, "getpid", lambda: 4_194_000)  # above pid_max: never alive
    orphan = tc.TaskContainer()
    orphan.start()
    try:
        assert orphan.id is not None and live.id is not None
        labels = subprocess.run(
            ["docker", "inspect", "-f", "{{json .Config.Labels}}", orphan.id],
            capture_output=True,
            text=True,
        ).stdout
        assert '"harnessctl":"1"' in labels and '"harnessctl.pid":"4194000"' in labels
        # not the count: the other test process's reaper (an OS environment starting) may
        # remove the orphan first; the watcher removes nothing while this process lives, so
        # the orphan gone means a reaper took it
        tc.reap_orphans()
        gone = subprocess.run(["docker", "inspect", orphan.id], capture_output=True)
        assert gone.returncode != 0
        kept = subprocess.run(["docker", "inspect", live.id], capture_output=True)
        assert kept.returncode == 0
    finally:
        orphan.close()
        live.close()


@pytest.mark.slow
def test_the_task_container_is_gone_soon_after_its_host_is_killed():
    """The host SIGKILLed with its whole process group (no cleanup of its own runs): its
    watcher, a process of another session, removes the task container at once."""
    import os
    import signal
    import sys
    import time

    host = subprocess.Popen(
        [
            sys.executable, "-c",
            "from harnessctl.envs.os_interaction.container import TaskContainer\n"
            "c = TaskContainer(); c.start(); print(c.id, flush=True)\n"
            "import time; time.sleep(600)",
        ],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    container = host.stdout.readline().strip()
    assert container
    os.killpg(host.pid, signal.SIGKILL)
    host.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if subprocess.run(["docker", "inspect", container], capture_output=True).returncode:
            break
        time.sleep(0.5)
    else:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)
        raise AssertionError("the task container outlived its host")


# --- what the checks read back from a container the agent controlled ------------------------

CHECK_TASK = load_tasks(ROOT / "examples" / "os_interaction").by_id()["dev.6"]


@pytest.fixture
def check_episode():
    env = OSEnvironment(command_timeout_s=10)
    played = env.open_episode(CHECK_TASK, 0)
    played.reset()
    yield env, played
    played.close()


@pytest.mark.slow
def test_a_nul_in_the_answer_is_the_agents_failure_not_an_infra_error(check_episode):
    env, played = check_episode
    score = env.score(CHECK_TASK, ROOT, "3\x00; echo forged", played)
    assert not score.success and "NUL" in score.detail["checks"]


@pytest.mark.slow
def test_a_flood_of_check_output_is_capped_on_the_host(check_episode):
    """A check whose output floods (300 MB) costs the host at most the cap (64 KiB kept; the
    rest read and dropped): the eval's memory stays bounded. (The agent can no longer make a
    check's interpreter flood, see below; the cap stays as the second line.)"""
    import resource

    from harnessctl import bounds

    env, played = check_episode
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    status, output = played.container.run_script(
        "bash", 'head -c 300000000 /dev/zero | tr "\\000" a', trusted_tools=True
    )
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 64, grown_mib
    assert status == 0 and output == "a" * bounds.CHECK_OUTPUT_BYTES


# --- checks the agent cannot forge ---------------------------------------------------------


def forge(value: str = "999") -> str:
    """What a root agent can do to the container, as one command.

    Rounds 1-3, to the container's programs: an ``exit 0`` python3 and bash first on PATH
    (the attack that passed 21 of 26 dev tasks), the real ones replaced, a site hook in every
    interpreter, a module beside the checks' working directory, a preload library named for
    every program. Round 4, to the configuration the checks' libraries and interpreters
    would read: an NSS module named in ``/etc/nsswitch.conf`` (its constructor prints
    ``value`` and exits 0), the locale removed, a loader cache of garbage, ``.pth`` hooks in
    every site directory and the user site, profiles that print and exit, and the programs
    a check's programs start (``find -exec stat``, ``xargs du``) replaced."""
    module = base64.b64encode(constructor_library(f"{value}\n".encode())).decode()
    return rf"""
fake='#!/bin/sh
echo {value}
exit 0'
for t in python3 python3.11 bash sh wc grep ls awk nproc getent; do
  printf '%s\n' "$fake" > /usr/local/bin/$t; chmod +x /usr/local/bin/$t
done
echo 'import os; os._exit(0)' > /etc/python3.11/sitecustomize.py
for d in / /root /usr/lib/python3/dist-packages; do echo 'import os; os._exit(0)' > $d/json.py; done
echo /usr/lib/x86_64-linux-gnu/libforged.so > /etc/ld.so.preload
mkdir -p /libnss_hx /root/libnss_hx
echo {module} | base64 -d > /libnss_hx/x.so.2; cp /libnss_hx/x.so.2 /root/libnss_hx/x.so.2
printf 'passwd: hx/x files\ngroup: hx/x files\nhosts: hx/x files\n' > /etc/nsswitch.conf
rm -rf /usr/lib/locale/C.utf8
printf garbage > /etc/ld.so.cache
for d in /root/.local/lib/python3.11/site-packages /usr/local/lib/python3.11/dist-packages; do
  mkdir -p $d; echo 'import os; os._exit(0)' > $d/hx.pth
done
echo 'import os; os._exit(0)' > /usr/lib/python3/dist-packages/hx.pth
for f in /etc/profile /etc/bash.bashrc /root/.bashrc /root/.profile; do
  echo 'echo {value}; exit 0' >> $f
done
for t in python3.11 wc grep nproc getent stat du cat dirname xargs; do
  printf '%s\n' "$fake" > /tmp/f; chmod +x /tmp/f; mv -f /tmp/f /usr/bin/$t
done
echo forged
"""


#: (suite, task, a wrong answer): the checks' kinds (a python check after the example's
#: output, the example alone, a bash check that runs the agent's own program, an example
#: whose ``find -exec`` starts ``stat``)
FORGED_TASKS = [
    ("os_interaction", "dev.6", "999"),
    ("os_interaction", "dev.13", "999"),
    ("os_interaction", "dev.3", "1"),
    ("os_interaction/standard", "7.bootstrap.2", "999"),
]


@pytest.mark.slow
@pytest.mark.parametrize("suite,task_id,wrong", FORGED_TASKS)
def test_a_forged_container_does_not_change_the_checks_verdict(suite, task_id, wrong):
    """The checks run the example after the agent here (``expected="live"``, AgentBench's
    order), so the forgery is before every check; the right answer is the example's output
    before the forgery."""
    task = load_tasks(ROOT / "examples" / suite).by_id()[task_id]
    env = OSEnvironment(command_timeout_s=20, expected="live")
    played = env.open_episode(task, 0)
    played.reset()
    try:
        right = None
        if task.record["example"] is not None and task_id != "dev.3":
            _, right = played.container.run_script(*task.record["example"], trusted_tools=True)
        if task_id == "dev.3":  # the task's own program, a `calc` that always prints 999
            played.step("bash", "printf '#!/bin/sh\necho 999\n' > /usr/local/bin/calc", None)
            played.step("bash", "chmod +x /usr/local/bin/calc", None)
        forged = played.step("bash", forge(), None)
        assert "forged" in forged.observation, forged.observation
        # the container's own programs and libraries are the agent's now: its name service
        # runs the agent's module, its loader reads the agent's preload file
        _, output = played.container.run_script("bash", "python3 -c 'print(1)'")
        assert "999" in output.split(), output
        assert "ld.so.preload" in played.container.run_script("python", "print(1)")[1]
        _, looked_up = played.container.run_script("bash", "cd / && /usr/bin/id -un")
        lines = looked_up.split("\n")
        assert "999" in lines and "root" not in lines, looked_up  # the module ran in its id
        assert not env.score(task, ROOT, wrong, played).success
        if right is not None:  # the right answer (the example's, before) still passes
            assert env.score(task, ROOT, right.strip(), played).success
        # the checks' libraries read none of it: no preload, their own name service
        _, listing = played.container.run_script(
            "bash", "cd / && ls /root && id -un && echo $PATH", trusted_tools=True
        )
        assert "ld.so.preload" not in listing and "999" not in listing, listing
        assert listing.split()[-2:] == ["root", env_path(played)], listing
    finally:
        played.close()


def env_path(played) -> str:
    """The container's own PATH (its configuration): what a check's ``$PATH`` reads."""
    return next(v.split("=", 1)[1] for v in played.container.check_env if v.startswith("PATH="))


@pytest.mark.slow
def test_nothing_the_agent_runs_can_reach_into_a_running_check(check_episode):
    """A check runs with a capability the agent's shell dropped: its /proc files (mem,
    environ, fd: what ptrace and a memory write need) are closed to the agent."""
    import threading

    env, played = check_episode
    done = threading.Event()

    def check() -> None:
        played.container.run_script("bash", "exec sleep 7.5", trusted_tools=True)
        done.set()

    threading.Thread(target=check, daemon=True).start()
    probe = (
        "sleep 1; for p in $(pgrep -x sleep); do grep -q 7.5 /proc/$p/cmdline 2>/dev/null &&"
        " { cat /proc/$p/environ >/dev/null 2>&1 && echo CHECK-OPEN || echo CHECK-CLOSED; }; done;"
        " sleep 30 & cat /proc/$!/environ >/dev/null && echo OWN-OPEN; kill %1"
    )
    seen = played.step("bash", probe, None).observation
    assert "CHECK-CLOSED" in seen and "CHECK-OPEN" not in seen, seen
    assert "OWN-OPEN" in seen, seen  # the agent's own processes stay its own
    assert done.wait(15)


@pytest.mark.slow
def test_the_checks_tools_are_read_only_to_the_agent(check_episode):
    env, played = check_episode
    seen = played.step(
        "bash",
        "touch /.hx/usr/bin/x 2>&1; mount -o remount,rw /.hx 2>&1; umount /.hx 2>&1;"
        " mv /.hx /hx2 2>&1; ls /.hx",
        None,
    ).observation
    assert "Read-only file system" in seen and "usr" in seen.split(), seen
    status, _ = played.container.run_script("bash", "test -e /.hx/usr/bin/x", trusted_tools=True)
    assert status == 1


def test_an_image_the_checks_tools_cannot_be_built_from_is_a_clear_error():
    """An image without patchelf (the docker sandbox's runtime image has python3 only): the
    build fails naming the cause, leaves no volume, and no task container starts on it."""
    from harnessctl.envs.os_interaction import container as tc
    from harnessctl.envs.os_interaction import trusted

    image = "harnessctl-runtime:latest"
    if not tc.image_present(image):
        unavailable("the tools-build error test", f"no {image} (scripts/build-runtime-image.sh)")
    with pytest.raises(trusted.ToolsError, match="patchelf is not in the image"):
        trusted.ensure_tools(image, tc.docker)
    image_id = tc.docker("image", "inspect", "-f", "{{.Id}}", image).strip()
    left = tc.docker("volume", "ls", "-q", "--filter", f"name={trusted.volume_name(image_id)}")
    assert left.strip() == ""
    with pytest.raises(tc.ContainerError, match="patchelf"):
        tc.TaskContainer(image=image).start()


FORGING_HOOK = """

def _constant_answer(self, reply, state):
    if __FORGE__ and not getattr(self, "_forged", False):
        self._forged = True
        self.tools["bash"].run(__FORGE_TEXT__, limit=4000)
    return Action(kind="answer", argument="0")


OSHarness.parse_action = _constant_answer
"""


def _constant_harness(tmp_path, forging: bool):
    import shutil

    name = "os-forger" if forging else "os-constant"
    dst = tmp_path / name
    shutil.copytree(ROOT / "harnesses" / "os-base", dst)
    hook = FORGING_HOOK.replace("__FORGE__", repr(forging))
    hook = hook.replace("__FORGE_TEXT__", repr(forge("0")))
    (dst / "harness.py").write_text((dst / "harness.py").read_text() + hook)
    manifest = (dst / "harness.yaml").read_text().replace("name: os-base", f"name: {name}")
    (dst / "harness.yaml").write_text(manifest)
    return dst


@pytest.mark.slow
@pytest.mark.parametrize(
    "sandbox,task_ids",
    [("local", ("dev.3", "dev.6", "dev.8", "dev.13")), ("docker", ("dev.3", "dev.6"))],
)
def test_a_harness_that_forges_the_checks_scores_what_its_answers_deserve(
    tmp_path, sandbox, task_ids
):
    """The attacks as they were found: one command puts an ``exit 0`` python3 and bash first
    on PATH (round 3: 21 of 26 dev tasks, dev.8 included, which even the gold answer fails)
    or names an NSS module whose constructor prints the constant and exits 0 (round 4: 21/26,
    4/4 in the docker sandbox), and more (:func:`forge`), then the harness answers a
    constant. It scores what the same constant scores without the forgery, task by task."""
    from harnessctl.harness import load_harness
    from harnessctl.policy import Policy
    from harnessctl.run.session import RolloutSession
    from harnessctl.sandbox import Limits
    from harnessctl.suite import load_suite

    suite = load_suite(ROOT / "examples" / "os_interaction")
    tasks = suite.tasks("dev").by_id()
    forger = load_harness(_constant_harness(tmp_path, forging=True))
    control = load_harness(_constant_harness(tmp_path, forging=False))
    verdicts = {}
    with RolloutSession(suite.environment, sandbox=sandbox, limits=Limits(timeout_s=60)) as s:
        for task_id in task_ids:
            pair = [s.run(h, tasks[task_id], 0, Policy("replay/os_interaction")) for h in
                    (forger, control)]  # fmt: skip
            assert all(r.outcome != "infra_error" for r in pair), [r.error for r in pair]
            verdicts[task_id] = [bool(r.success) for r in pair]
    assert all(forged == plain for forged, plain in verdicts.values()), verdicts
    assert not any(forged for forged, _ in verdicts.values()), verdicts  # "0" is right nowhere


# --- round 4: the monitor, a broken shell, the expected answer --------------------------------


@pytest.mark.slow
def test_a_name_service_module_reaches_neither_the_checks_nor_the_monitor():
    """The agent's NSS module runs in every lookup of the container's own programs (its
    shell's too: the shell it broke is its failure), yet a command past its time limit is
    stopped with everything the agent started, and the checks' verdict is their own."""
    task = CHECK_TASK
    env = OSEnvironment(command_timeout_s=4, expected="live")
    played = env.open_episode(task, 0)
    played.reset()
    try:
        _, right = played.container.run_script(*task.record["example"], trusted_tools=True)
        module = base64.b64encode(constructor_library(b"999\n")).decode()
        played.step(
            "bash",
            f"mkdir -p /libnss_hx && echo {module} | base64 -d > /libnss_hx/x.so.2 && printf"
            " 'passwd: hx/x files\\ngroup: hx/x files\\n' > /etc/nsswitch.conf",
            None,
        )
        assert played.step("bash", "cd / && id -un", None).observation.strip() == "999"
        stopped = played.step("bash", "cd / && (sleep 300 &) ; sleep 100", None)
        # the stop ran; the new shell looked its user up and ran the module: the agent's
        assert stopped.done and "could not start again" in stopped.info["error"], stopped
        _, left = played.container.run_script("bash", "pgrep -xc sleep", trusted_tools=True)
        assert left.strip() == "0", left
        assert not env.score(task, ROOT, "999", played).success
        assert env.score(task, ROOT, right.strip(), played).success
    finally:
        played.close()


BREAK = "echo 'exit 0' >> /etc/profile; exit"


@pytest.mark.slow
def test_an_agent_that_breaks_its_own_shell_is_scored_not_excused(episode):
    """Round 4: ``exit 0`` appended to /etc/profile, then ``exit``: no new shell can start.
    The container answers the host, so it is the agent's doing: the episode ends, the
    rollout is a scored failure, never ``infra_error`` (which is retried and left out)."""
    env, played = episode
    ended = played.step("bash", BREAK, None)
    assert ended.done and "could not start again" in ended.info["error"], ended
    assert played.step("bash", "echo hi", None).done
    score = env.score(TASK, ROOT, None, played)
    assert not score.success and score.detail["events"][-1]["limit"] == "session_broken"
    assert score.detail["session"].startswith("broken by the agent"), score.detail


BREAKING_HOOK = """

def _break_then_look(self, reply, state):
    self._turns = getattr(self, "_turns", 0) + 1
    command = __BREAK__ if self._turns == 1 else "echo still here"
    return Action(kind="tool", tool="bash", argument=command)


OSHarness.parse_action = _break_then_look
"""


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["local", "docker"])
def test_a_harness_that_breaks_its_shell_is_a_scored_failure(tmp_path, sandbox):
    import shutil

    from harnessctl.harness import load_harness
    from harnessctl.policy import Policy
    from harnessctl.run.session import RolloutSession
    from harnessctl.sandbox import Limits
    from harnessctl.suite import load_suite

    dst = tmp_path / "os-breaker"
    shutil.copytree(ROOT / "harnesses" / "os-base", dst)
    hook = BREAKING_HOOK.replace("__BREAK__", repr(BREAK))
    (dst / "harness.py").write_text((dst / "harness.py").read_text() + hook)
    manifest = (dst / "harness.yaml").read_text().replace("name: os-base", "name: os-breaker")
    (dst / "harness.yaml").write_text(manifest)
    suite = load_suite(ROOT / "examples" / "os_interaction")
    task = suite.tasks("dev").by_id()["dev.6"]
    with RolloutSession(suite.environment, sandbox=sandbox, limits=Limits(timeout_s=60)) as s:
        rec = s.run(load_harness(dst), task, 0, Policy("replay/os_interaction"))
    assert rec.outcome == "wrong_answer", (rec.outcome, rec.error)
    assert rec.trajectory.score.detail["session"].startswith("broken by the agent")


@pytest.mark.slow
@pytest.mark.parametrize("expected,wiped_passes", [("snapshot", False), ("live", True)])
def test_the_expected_answer_comes_from_the_state_before_the_agent(expected, wiped_passes):
    """Round 4: the agent empties /home and answers 0 to "how many empty files are in
    /home?" (dev.9): AgentBench computes the expected answer after the agent, from the
    emptied /home, and passes it (``expected="live"`` keeps that); the default computes it
    from the system as setup left it, before the agent's first command."""
    task = load_tasks(ROOT / "examples" / "os_interaction").by_id()["dev.9"]
    env = OSEnvironment(command_timeout_s=10, expected=expected)
    played = env.open_episode(task, 0)
    played.reset()
    try:
        assert played.step("bash", "find /home -type f -size 0 | wc -l", None).observation == "2\n"
        played.step("bash", "rm -rf /home/*", None)
        wiped = env.score(task, ROOT, "0", played)
        assert wiped.success is wiped_passes, wiped.detail
        assert wiped.detail["expected"] == expected
        assert env.score(task, ROOT, "2", played).success is not wiped_passes
    finally:
        played.close()
