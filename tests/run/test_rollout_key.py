"""The rollout cache key (harnessctl.run.key): one function, and every input changes it."""

from __future__ import annotations

import dataclasses
import shutil

from harnessctl.harness import load_harness, rollout_version
from harnessctl.policy import Policy
from harnessctl.run.evaluate import EvalRequest, request_inputs
from harnessctl.run.key import RolloutInputs
from harnessctl.sandbox import Limits
from harnessctl.suite import load_suite
from tests.helpers import BASE_HARNESS, EXAMPLE_SUITE

BASE = RolloutInputs(
    harness_hash="h" * 64,
    task_hash="t" * 64,
    policy_id="sim/dbbench",
    seed=0,
    runtime="1+abc+dbbench:3:def",
    env_options={},
    limits=Limits(),
    max_calls=40,
    max_tokens=60_000,
    max_steps=30,
    max_resets=8,
)

# one change per input; a field added to RolloutInputs or Limits without one fails the test
CHANGES = {
    "harness_hash": "g" * 64,
    "task_hash": "u" * 64,
    "policy_id": "sim/dbbench#0a1b2c3d4e",
    "seed": 1,
    "runtime": "1+abc+dbbench:4:def",
    "env_options": {"memo": False},
    "max_calls": 41,
    "max_tokens": 60_001,
    "max_steps": 31,
    "max_resets": 9,
}
LIMIT_CHANGES = {
    "timeout_s": 61.0,
    "max_wait_s": 1801.0,
    "memory_mb": 1025,
    "cpu_s": 61,
    "nproc": 65,
    "fsize_mb": 65,
    "nofile": 257,
}


def test_every_input_changes_the_key():
    fields = {f.name for f in dataclasses.fields(RolloutInputs)}
    assert set(CHANGES) | {"limits"} == fields, "a key input without a change in this test"
    assert set(LIMIT_CHANGES) == {f.name for f in dataclasses.fields(Limits)}
    keys = {BASE.key()}
    for name, value in CHANGES.items():
        keys.add(dataclasses.replace(BASE, **{name: value}).key())
    for name, value in LIMIT_CHANGES.items():
        limits = dataclasses.replace(Limits(), **{name: value})
        keys.add(dataclasses.replace(BASE, limits=limits).key())
    assert len(keys) == 1 + len(CHANGES) + len(LIMIT_CHANGES)  # all distinct


def test_the_key_is_stable_and_canonical():
    same = dataclasses.replace(BASE, env_options={"b": 1, "a": 2})
    assert same.key() == dataclasses.replace(BASE, env_options={"a": 2, "b": 1}).key()
    assert BASE.key() == RolloutInputs(**vars(BASE)).key()
    assert len(BASE.key()) == 64 and int(BASE.key(), 16) >= 0


def _request(suite_path=EXAMPLE_SUITE, **kw) -> EvalRequest:
    defaults = dict(
        harness=load_harness(BASE_HARNESS),
        suite=load_suite(suite_path),
        split="dev",
        policy=Policy("sim/dbbench"),
    )
    return EvalRequest(**{**defaults, **kw})


def test_a_request_passes_each_input_to_the_key(tmp_path, monkeypatch):
    """What evaluate() keys on comes from the request: its budgets, limits, policy params,
    the suite's env_options and the environment's own step budget."""
    request = _request()
    runtime = rollout_version(request.suite.environment, request.policy.model)
    task = request.suite.tasks("dev").tasks[0]
    base = request_inputs(request, runtime=runtime, task=task, seed=0)
    assert base.harness_hash == request.harness.hash and base.task_hash == task.content_hash
    assert base.max_steps == request.suite.environment.max_steps and base.max_resets >= 1

    def key_of(req: EvalRequest, **kw) -> str:
        return request_inputs(req, runtime=runtime, task=task, **kw).key()

    changed = {
        "seed": key_of(request, seed=1),
        "limits": key_of(_request(limits=Limits(timeout_s=30))),
        "max_calls": key_of(_request(max_calls=7)),
        "max_tokens": key_of(_request(max_tokens=999)),
        "policy params": key_of(_request(policy=Policy("sim/dbbench", {"skill": 0.9}))),
    }
    # the suite's env_options: a copy of the suite scored with an option set
    suite = tmp_path / "suite"
    shutil.copytree(EXAMPLE_SUITE, suite)
    config = (suite / "suite.yaml").read_text()
    (suite / "suite.yaml").write_text(config + "env_options: {}\n")
    assert key_of(_request(suite)) == base.key()  # an empty mapping is no option
    (suite / "suite.yaml").write_text(config + "env_options: {rules: v0.2}\n")
    with_rules = request_inputs(_request(suite), runtime=runtime, task=task)
    assert with_rules.env_options == {"rules": "v0.2"}
    changed["env_options"] = with_rules.key()
    # the environment's step budget (a class setting, not an option)
    env_cls = type(request.suite.environment)
    monkeypatch.setattr(env_cls, "max_steps", env_cls.max_steps + 1)
    changed["max_steps"] = key_of(_request())
    monkeypatch.undo()
    assert key_of(_request()) == base.key()
    for what, key in changed.items():
        assert key != base.key(), what


# --- the environment's part: what decides its outcomes -------------------------------------

KEY_ENV = '''
import json
from pathlib import Path
from harnessctl import envs


class KeyEnv(envs.Environment):
    """An in-sandbox kind with no tools: the harness answers; the score compares."""

    kind = "keyenv"
    version = "1"

    def load_tasks(self, path):
        rows = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
        return envs.TaskSet(
            [envs.Task(f"t{i}", self.kind, "t", r, str(i), "t") for i, r in enumerate(rows)]
        )

    def prepare(self, task, workdir):
        (Path(workdir) / "task.json").write_text(json.dumps({"task_id": task.id}))

    def score(self, task, workdir, answer, episode=None):
        return envs.Score(success=answer == task.record["gold"])  # THE VERDICT RULE

    def oracle(self, task):
        return dict(task.record)

    def replay(self, task):
        return [{"text": "Answer: " + task.record["gold"]}]
'''
KEY_HARNESS = """
import re
from harnessctl_runtime import Action, Harness

class KeyHarness(Harness):
    def parse_action(self, reply, state):
        return Action(kind="answer", argument=re.sub(r"^Answer:\\s*", "", reply.strip()))
"""


def _key_env(tmp_path, name: str, rule: str | None = None) -> type:
    """A copy of the KeyEnv package as ``name`` (with its verdict rule replaced)."""
    import importlib
    import sys

    pkg = tmp_path / "plugins" / name
    pkg.mkdir(parents=True)
    source = KEY_ENV if rule is None else KEY_ENV.replace('answer == task.record["gold"]', rule)
    (pkg / "__init__.py").write_text(source)
    if str(pkg.parent) not in sys.path:
        sys.path.insert(0, str(pkg.parent))
    return importlib.import_module(name).KeyEnv


def test_a_changed_verdict_rule_changes_the_key_and_misses_the_store(tmp_path, monkeypatch):
    """The environment's package is part of its cache identity: an identical copy of a plugin
    package is served from the store, a copy with one scoring line changed misses it and
    runs again (and scores otherwise), though its declared ``version`` is the same."""
    import sys

    from harnessctl import envs
    from harnessctl.run.evaluate import evaluate
    from harnessctl.store import Store

    original = _key_env(tmp_path, "hx_keyenv_a")
    same = _key_env(tmp_path, "hx_keyenv_b")
    edited = _key_env(tmp_path, "hx_keyenv_c", rule='answer != task.record["gold"]')
    assert envs.package_identity(original) == envs.package_identity(same)
    assert envs.package_identity(original) != envs.package_identity(edited)
    assert original.version == edited.version
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "suite.yaml").write_text("name: keys\nenv: keyenv\ntasks: [t.jsonl]\n")
    (suite / "t.jsonl").write_text('{"gold": "42"}\n')
    harness = tmp_path / "key-base"
    harness.mkdir()
    (harness / "harness.yaml").write_text(
        "name: key-base\nenv: keyenv\nentry: harness.py:KeyHarness\n"
    )
    (harness / "harness.py").write_text(KEY_HARNESS)
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "trajectories")

    def run(env_cls: type):
        envs.register_environment("keyenv", env_cls)
        request = EvalRequest(
            load_harness(harness), load_suite(suite), "dev", Policy("replay/keyenv"), rollouts=1
        )
        runtime = rollout_version(request.suite.environment, request.policy.model)
        task = request.suite.tasks("dev").tasks[0]
        key = request_inputs(request, runtime=runtime, task=task).key()
        return key, evaluate(request, store)

    try:
        key_a, first = run(original)
        key_b, again = run(same)
        key_c, changed = run(edited)
    finally:
        envs.ENVIRONMENTS.unregister("keyenv")
        for name in ("hx_keyenv_a", "hx_keyenv_b", "hx_keyenv_c"):
            sys.modules.pop(name, None)
    assert key_a == key_b != key_c
    assert (first.executed, again.executed, changed.executed) == (1, 0, 1)
    assert [r.outcome for r in first.rows] == ["success"]
    assert [r.outcome for r in changed.rows] == ["wrong_answer"]  # the new rule's verdict
