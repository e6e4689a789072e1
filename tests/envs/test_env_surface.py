"""Environments own their action surface: an in-sandbox kind's own code (DBBench's SQL layer),
a host-served kind's episode behind the gateway, replay/<kind> through the whole rollout
path, the offline policies' oracle channel, and cache keys per environment.

The host-served environment here is defined in the test and registered in-process: a counter
the harness must bring to a target with `inc` / `dec` commands, one per turn."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from harnessctl import envs
from harnessctl.envs import SandboxCode, Score, StepResult, Task, TaskProblem, TaskSet
from harnessctl.errors import ConfigError
from harnessctl.harness import load_harness, runtime_version
from harnessctl.policies import oracle
from harnessctl.policy import Policy
from harnessctl.run.evaluate import EvalRequest, evaluate
from harnessctl.run.session import RolloutSession
from harnessctl.sandbox import Limits
from harnessctl.suite import load_suite
from harnessctl.workspace import load_workspace
from tests.helpers import ROOT
from tests.helpers.openai_stub import OpenAIStub, Reply

COUNTER_HARNESS = """
import re
from harnessctl_runtime import Action, Harness

class CounterHarness(Harness):
    def parse_action(self, reply, state):
        m = re.search(r"Action:\\s*(.+)", reply)
        if not m:
            return Action(kind="invalid", error="no Action: line")
        return Action(kind="tool", tool="act", argument=m.group(1).strip())

    def recover(self, failure, state):
        from harnessctl_runtime import Recovery
        return Recovery("continue")
"""


class CounterEpisode(envs.Episode):
    """Host state of one counter game; ``opened`` lets tests see every episode closed."""

    opened: list[CounterEpisode] = []

    def __init__(self, task: Task, crash_at: int | None, truncate_at: int | None = None) -> None:
        self.target = int(task.record["target"])
        self.value, self.steps, self.closed = 0, 0, False
        self.crash_at, self.truncate_at = crash_at, truncate_at
        CounterEpisode.opened.append(self)

    def reset(self) -> StepResult:
        self.value = 0
        return StepResult("The counter shows 0.", info={"commands": ["inc", "dec"]})

    def step(self, tool: str, argument: str, arguments: dict[str, Any] | None) -> StepResult:
        self.steps += 1
        if self.crash_at is not None and self.steps >= self.crash_at:
            raise RuntimeError("simulator died")
        if argument not in ("inc", "dec"):
            result = StepResult("Nothing happens.", info={"error": f"unknown command {argument!r}"})
        else:
            self.value += 1 if argument == "inc" else -1
            done = self.value == self.target
            result = StepResult(f"The counter shows {self.value}.", done=done)
        if self.truncate_at is not None and self.steps >= self.truncate_at and not result.done:
            result.done, result.info["truncated"] = True, True  # cut at its own step limit
        return result

    def close(self) -> None:
        self.closed = True


class CounterEnvironment(envs.Environment):
    """A host-served toy: reach ``target`` from 0 (gold: the target, never shown)."""

    kind = "counter"
    surface = "host"
    tools = ("act",)
    max_steps = 6
    version = "1"
    crash_at: int | None = None
    truncate_at: int | None = None

    def load_tasks(self, path: Path) -> TaskSet:
        tasks, problems = [], []
        for i, line in enumerate(Path(path).read_text().splitlines()):
            record = json.loads(line)
            if not isinstance(record.get("target"), int):
                problems.append(TaskProblem(str(path), i + 1, "target: must be an integer"))
                continue
            tasks.append(
                Task(f"{Path(path).stem}-{i:03d}", self.kind, "up", record, str(i), f"{path}:{i}")
            )
        return TaskSet(tasks, problems)

    def prepare(self, task: Task, workdir: Path) -> None:
        public = {"task_id": task.id, "instruction": "Bring the counter to the secret target."}
        (Path(workdir) / "task.json").write_text(json.dumps(public))

    def open_episode(self, task: Task, seed: int) -> CounterEpisode:
        return CounterEpisode(task, self.crash_at, self.truncate_at)

    def score(self, task, workdir, answer, episode=None) -> Score:
        return Score(success=episode is not None and episode.value == episode.target)

    def oracle(self, task: Task) -> dict[str, Any]:
        return {"target": task.record["target"]}

    def replay(self, task: Task) -> list[dict[str, Any]]:
        return [{"text": "Action: inc"}] * int(task.record["target"])


@pytest.fixture
def counter(tmp_path, monkeypatch):
    """The counter environment registered in-process, a suite and its harness on disk."""
    envs.register_environment("counter", CounterEnvironment)
    CounterEnvironment.crash_at = CounterEnvironment.truncate_at = None
    CounterEpisode.opened = []
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "suite.yaml").write_text("name: counter\nenv: counter\ntasks: [games.jsonl]\n")
    (suite / "games.jsonl").write_text('{"target": 2}\n{"target": 3}\n{"target": 9}\n')
    harness = tmp_path / "counter-base"
    harness.mkdir()
    (harness / "harness.yaml").write_text(
        "name: counter-base\nenv: counter\nentry: harness.py:CounterHarness\n"
        "settings: {max_rounds: 12}\n"
    )
    (harness / "harness.py").write_text(COUNTER_HARNESS)
    yield load_suite(suite), load_harness(harness)
    envs.ENVIRONMENTS.unregister("counter")


def run(session_env, harness, task, policy, **kw) -> Any:
    with RolloutSession(session_env, limits=Limits(timeout_s=30), **kw) as session:
        return session.run(harness, task, 0, policy)


def test_replay_plays_a_host_served_episode_through_the_gateway(counter):
    suite, harness = counter
    task = suite.tasks("dev").by_id()["games-000"]
    rec = run(suite.environment, harness, task, Policy("replay/counter"))
    assert rec.outcome == "success"
    steps = rec.trajectory.steps
    assert [s.kind for s in steps] == ["reset", "step", "step"]
    assert [s.observation for s in steps] == [
        "The counter shows 0.",
        "The counter shows 1.",
        "The counter shows 2.",
    ]
    assert steps[-1].done is True and steps[1].argument == "inc"
    assert rec.trajectory.result is not None and rec.trajectory.result.status == "done"
    assert all(e.closed for e in CounterEpisode.opened)


def test_the_step_budget_ends_the_episode_as_step_limit(counter):
    suite, harness = counter
    task = suite.tasks("dev").by_id()["games-002"]  # target 9 > max_steps 6
    rec = run(suite.environment, harness, task, Policy("replay/counter"))
    assert rec.outcome == "step_limit"
    statuses = [s.status for s in rec.trajectory.steps]
    assert statuses.count("ok") == 1 + 6  # the reset and six steps
    assert statuses[-1] == "step_budget_exceeded"


@pytest.mark.slow
def test_an_episode_cut_at_its_own_step_limit_is_step_limit_not_wrong_answer(counter):
    """``done`` with ``info["truncated"]`` (ALFWorld's 50th step without a win) ends the
    rollout as ``step_limit``, with no refused step after it; that last step counts in the
    tool-error streak, so three failed commands at the end are ``tool_error``."""
    suite, harness = counter
    CounterEnvironment.truncate_at = 6
    task = suite.tasks("dev").by_id()["games-002"]  # target 9: not reached in 6 steps
    rec = run(suite.environment, harness, task, Policy("replay/counter"))
    assert rec.outcome == "step_limit" and rec.trajectory.result.status == "step_limit"
    steps = rec.trajectory.steps
    assert [s.status for s in steps] == ["ok"] * 7 and steps[-1].done
    for tail, outcome in ((["inc", "inc", "jump"], "step_limit"), (["jump"] * 3, "tool_error")):
        script = [f"Action: {c}" for c in ["inc", "inc", "inc", *tail, "inc"]]
        with OpenAIStub() as stub:
            stub.push(*(Reply(text) for text in script))
            policy = Policy("openai/stub", {"api_base": stub.url, "api_key": "dummy"})
            rec = run(suite.environment, harness, task, policy)
            assert len(stub.chat_requests) == 6  # no model call after the cut
        assert rec.outcome == outcome, (tail, rec.outcome)


def test_an_episode_that_raises_is_an_infra_error_and_is_retried(counter, workspace):
    suite, harness = counter
    CounterEnvironment.crash_at = 1
    store = load_workspace(workspace).open_store()
    request = EvalRequest(harness, suite, "dev", Policy("replay/counter"), rollouts=1, workers=1)
    request.task_ids, request.retries = ["games-000"], 1
    result = evaluate(request, store)
    assert result.rows == [] and len(result.infra_failed) == 1
    attempts = store.attempts()
    assert len(attempts) == 2 and {a.outcome for a in attempts} == {"infra_error"}
    assert all("simulator died" in a.error for a in attempts)
    assert all(e.closed for e in CounterEpisode.opened)


def test_a_rejected_command_is_a_tool_error_the_harness_sees(counter):
    suite, harness = counter
    task = suite.tasks("dev").by_id()["games-000"]
    script = ["Action: jump", "Action: inc", "Action: inc"]
    with OpenAIStub() as stub:
        stub.push(*(Reply(text) for text in script))
        policy = Policy("openai/stub", {"api_base": stub.url, "api_key": "dummy"})
        rec = run(suite.environment, harness, task, policy)
        second_call = stub.chat_requests[1].body["messages"]
    assert rec.outcome == "success"
    assert rec.trajectory.steps[1].status == "rejected"
    assert second_call[-1] == {"role": "user", "content": "Nothing happens."}
    # the first observation reached the harness as part of the task, the target did not
    assert "The counter shows 0." in second_call[0]["content"]
    assert all("9" not in m["content"] and 'target": 2' not in m["content"] for m in second_call)


def test_gold_reaches_the_oracle_channel_only_for_offline_policies(counter, monkeypatch):
    suite, harness = counter
    task = suite.tasks("dev").by_id()["games-000"]
    env = suite.environment
    seen: list[str] = []
    registered = oracle.register

    def spy(rollout_id, view):
        seen.append(rollout_id)
        registered(rollout_id, view)

    monkeypatch.setattr(oracle, "register", spy)
    oracle_calls = []
    monkeypatch.setattr(env, "oracle", lambda t: oracle_calls.append(t) or {})
    with OpenAIStub() as stub:
        stub.push(Reply("Action: inc"), Reply("Action: inc"))
        policy = Policy("openai/stub", {"api_base": stub.url, "api_key": "dummy"})
        assert run(env, harness, task, policy).outcome == "success"
    assert seen == [] and oracle_calls == []  # a real model: nothing gold computed or kept
    rec = run(env, harness, task, Policy("replay/counter"))
    assert seen == [rec.rollout_id]
    assert oracle.lookup(rec.rollout_id) is None  # gone once the rollout ended


@pytest.mark.slow
def test_replay_dbbench_solves_every_dev_task_through_the_rollout_path(workspace):
    store = load_workspace(workspace).open_store()
    request = EvalRequest(
        load_harness(workspace / "harnesses" / "dbbench-base"),
        load_suite(workspace / "examples" / "dbbench"),
        "dev",
        Policy("replay/dbbench"),
        rollouts=1,
        workers=2,
    )
    result = evaluate(request, store)
    assert len(result.rows) == 60
    assert {r.outcome for r in result.rows} == {"success"}


def test_cache_keys_hold_each_environments_own_code_only(tmp_path, counter):
    suite, _ = counter
    dbbench = envs.get_environment("dbbench")
    counter_env = suite.environment
    base = runtime_version()
    assert runtime_version(dbbench).startswith(base + "+dbbench:2+agentbench-fc:")
    # kind, version salt, then its package's content hash (the test module's package here)
    assert (
        runtime_version(counter_env)
        == base + f"+counter:1:{envs.package_identity(CounterEnvironment)}"
    )
    # editing DBBench's sandbox code changes DBBench's key, not the counter's
    copy = tmp_path / "hxenv_dbbench"
    copy.mkdir()
    for f in dbbench.sandbox_code.path.glob("*.py"):
        (copy / f.name).write_text(f.read_text())
    (copy / "sqlcompat.py").write_text((copy / "sqlcompat.py").read_text() + "\n# edit\n")
    edited = SandboxCode("hxenv_dbbench", copy)
    assert edited.version != dbbench.sandbox_code.version
    # the generic runtime holds no environment's code
    runtime_dir = Path(envs.__file__).parent.parent / "runtime"
    assert not any("sql" in p.name for p in runtime_dir.iterdir())


def test_in_sandbox_code_is_staged_read_only(tmp_path):
    from harnessctl.sandbox import stage_packages

    code = envs.get_environment("dbbench").sandbox_code
    root = tmp_path / "sb"
    root.mkdir()
    lock = threading.Lock()
    rel = stage_packages(root, (code,), lock)
    assert stage_packages(root, (code,), lock) == rel  # once per version
    staged = root / rel[0] / "hxenv_dbbench"
    assert (staged / "sqlcompat.py").read_text() == (code.path / "sqlcompat.py").read_text()
    assert not os.stat(staged / "sqlcompat.py").st_mode & (stat.S_IWUSR | stat.S_IWOTH)


def test_a_host_served_kind_without_open_episode_is_refused():
    class Broken(CounterEnvironment):
        open_episode = envs.Environment.open_episode  # back to the base's: no episodes

    envs.register_environment("broken-host", Broken)
    try:
        with pytest.raises(Exception, match="'broken-host' is host-served but has no open_epi"):
            envs.get_environment("broken-host")
    finally:
        envs.ENVIRONMENTS.unregister("broken-host")


def test_an_object_that_is_not_an_environment_is_refused_naming_the_kind():
    """A plugin that does not subclass the typed base (the old duck-typed shape) is refused
    with the kind's name, before anything reads a member of it."""

    class DuckTyped:
        kind = "duck"

        def load_tasks(self, path):
            return TaskSet([])

    class NoKind(CounterEnvironment):
        kind = ""

    class BadBudget(CounterEnvironment):
        max_calls = 0

    cases = [
        (DuckTyped, "'ducktyped' is a DuckTyped, not a harnessctl.envs.Environment"),
        (NoKind, "'nokind' does not set its kind"),
        (BadBudget, "'badbudget': max_calls must be a positive integer"),
    ]
    for factory, message in cases:
        name = factory.__name__.lower()
        envs.register_environment(name, factory)
        try:
            with pytest.raises(ConfigError, match=message):
                envs.get_environment(name)
        finally:
            envs.ENVIRONMENTS.unregister(name)


def test_budgets_resolve_from_the_environment_unless_given():
    """One rule for every caller: a given budget wins, else the environment's own."""
    from harnessctl.run.budget import resolve_budgets

    alfworld = envs.get_environment("alfworld")
    own = resolve_budgets(alfworld)
    assert (own.max_calls, own.max_tokens, own.max_steps) == (60, 400_000, 50)
    assert resolve_budgets(alfworld, max_calls=7).max_calls == 7
    dbbench = envs.get_environment("dbbench")
    assert (resolve_budgets(dbbench).max_calls, resolve_budgets(dbbench).max_tokens) == (
        40,
        60_000,
    )
    session = RolloutSession(alfworld, max_tokens=1234)
    assert (session.budgets.max_calls, session.budgets.max_tokens) == (60, 1234)
    with pytest.raises(ConfigError, match="--max-calls"):
        resolve_budgets(dbbench, max_calls=-1)


def test_a_harness_runs_only_in_its_own_environment(counter, workspace):
    from harnessctl.errors import ConfigError

    _, counter_harness = counter
    dbbench_suite = load_suite(workspace / "examples" / "dbbench")
    store = load_workspace(workspace).open_store()
    request = EvalRequest(counter_harness, dbbench_suite, "dev", Policy("replay/dbbench"))
    with pytest.raises(ConfigError, match="speaks 'counter', the tasks are 'dbbench'"):
        evaluate(request, store)
    assert store.rollouts() == []


def test_an_offline_policys_code_is_in_the_cache_key(monkeypatch):
    from harnessctl.envs.dbbench.sim import SimDBBench
    from harnessctl.harness import rollout_version

    env = envs.get_environment("dbbench")
    real = rollout_version(env, "openai/gpt-4o-mini")
    sim = rollout_version(env, "sim/dbbench")
    assert real == runtime_version(env)  # a real model: nothing of any simulator
    assert sim.startswith(real + "+sim/dbbench:")
    monkeypatch.setattr(SimDBBench, "version", "edited", raising=False)
    assert rollout_version(env, "sim/dbbench") == real + "+sim/dbbench:edited"


def test_an_environment_without_a_simulated_policy_needs_an_explicit_policy(counter):
    from harnessctl.errors import ConfigError
    from harnessctl.policies import default_policy

    assert default_policy("dbbench") == "sim/dbbench"
    with pytest.raises(ConfigError, match="has no offline simulated policy .sim/counter."):
        default_policy("counter")


def test_the_pool_api_builds_tasks_from_records_through_the_environment():
    from harnessctl.errors import ConfigError
    from harnessctl.pool.api import task_from_record

    dev = ROOT / "examples" / "dbbench" / "dev.jsonl"
    record = json.loads(dev.read_text().splitlines()[4])
    task = task_from_record(record, env="dbbench")
    loaded = load_suite(ROOT / "examples" / "dbbench").tasks("dev").by_id()
    assert task.category == loaded["dev-004"].category
    assert task.content_hash == loaded["dev-004"].content_hash
    with pytest.raises(ConfigError, match="record"):
        task_from_record({"description": "no table"}, env="dbbench")


def test_a_simulators_cache_identity_covers_every_module_it_uses(tmp_path, monkeypatch):
    """The version of a simulated policy without its own ``version`` hashes the sources of
    every module of its package (and the generic sim helpers) it imports, lazily too; editing
    a helper changes it, without importing anything to find out."""
    import sys

    from harnessctl.policies import OFFLINE_POLICIES, offline_version, source_closure

    pkg = tmp_path / "hxsimpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("RATE = 0.1\n")
    (pkg / "sim.py").write_text(
        "import json\n"
        "from harnessctl.policies.sim_signals import text_of\n\n"
        "class Sim:\n"
        "    description = 'TEST DOUBLE'\n"
        "    def view(self, env, task):\n        return {}\n"
        "    def reply(self, view, messages, seed, params, tools):\n"
        "        from .helpers import RATE  # lazy: still part of the identity\n"
        "        return text_of(str(RATE))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    OFFLINE_POLICIES.register("sim/closure", lambda: __import__("hxsimpkg.sim").sim.Sim())
    try:
        names = [name for name, _ in source_closure("hxsimpkg.sim")]
        assert names == ["harnessctl.policies.sim_signals", "hxsimpkg.helpers", "hxsimpkg.sim"]
        assert "hxsimpkg.helpers" not in sys.modules  # located on disk, not imported
        before = offline_version("sim/closure")
        (pkg / "helpers.py").write_text("RATE = 0.2\n")
        assert offline_version("sim/closure") != before
    finally:
        OFFLINE_POLICIES.unregister("sim/closure")
    # the built-in simulators: their environment-specific and generic helpers are covered
    dbbench = [name for name, _ in source_closure("harnessctl.envs.dbbench.sim")]
    assert {"harnessctl.envs.dbbench.sim_signals", "harnessctl.envs.dbbench.sim_sql"} <= set(
        dbbench
    ) and "harnessctl.policies.sim_signals" in dbbench
    alfworld = [name for name, _ in source_closure("harnessctl.envs.alfworld.sim")]
    assert "harnessctl.policies.sim_signals" in alfworld


def test_one_step_shape_from_the_episode_to_the_record():
    """The episode's answer, the gateway's wire body and the runtime's parse are one class
    (``runtime.wire.StepResult``, which ``envs.StepResult`` is), and the host's recorded step
    holds its fields under the same names and types."""
    import dataclasses

    from harnessctl.records import EnvStep
    from harnessctl.runtime import env as runtime_env
    from harnessctl.runtime import wire

    assert envs.StepResult is wire.StepResult is runtime_env.StepResult
    step = wire.StepResult("You see a desk.", True, {"admissible_commands": ["look"]})
    assert wire.StepResult.from_wire(json.loads(json.dumps(step.to_wire()))) == step
    assert wire.StepResult.from_wire({"observation": None, "info": [1]}) == wire.StepResult("")
    fields = {f.name for f in dataclasses.fields(wire.StepResult)}
    assert fields <= set(EnvStep.model_fields)
    record = EnvStep(index=0, kind="step", **step.to_wire())
    assert {name: getattr(record, name) for name in fields} == step.to_wire()
