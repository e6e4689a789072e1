"""``harnesses/dbbench-fc``: AgentBench's function-calling DBBench protocol (``execute_sql``,
``commit_final_answer``), beside the text protocol of ``dbbench-base``.

Through the whole rollout path with ``replay/dbbench``; in-process with ``sim/dbbench`` (which
answers with function calls when the request offers them) against the text harness; and each
rule-based repair for it rescuing the failure mode it targets.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

import harnessctl.runtime as rt
from harnessctl.envs import get_environment
from harnessctl.envs.dbbench.sim import MODES, SimDBBench
from harnessctl.evolve.patch import apply_blocks, parse_patch, write_files
from harnessctl.harness import load_harness as load_spec
from harnessctl.runtime.boot import load_harness
from harnessctl.runtime.client import ModelReply, ToolCall
from harnessctl.runtime.loop import EventLog, run_episode
from tests.helpers import BASE_HARNESS, EXAMPLE_SUITE, ROOT

sys.modules.setdefault("harnessctl_runtime", rt)  # the name harness code imports it by

FC_HARNESS = ROOT / "harnesses" / "dbbench-fc"
REPAIRS = ROOT / "harnessctl" / "envs" / "dbbench" / "directions" / "repairs"
ENV = get_environment("dbbench")
TASKS = ENV.load_tasks(EXAMPLE_SUITE / "dev.jsonl").tasks
SIM = SimDBBench()


def test_it_speaks_agentbench_function_calling_protocol(tmp_path, dbbench_runtime):
    spec = load_spec(FC_HARNESS)
    assert (spec.name, spec.manifest.env) == ("dbbench-fc", "dbbench")
    harness = load_harness(FC_HARNESS, tmp_path, spec.manifest.model_dump())
    functions = {s["function"]["name"]: s["function"] for s in harness.tool_specs}
    assert set(functions) == {"execute_sql", "commit_final_answer"}
    query = functions["execute_sql"]["parameters"]
    assert query["required"] == ["query"] and query["properties"]["query"]["type"] == "string"
    answers = functions["commit_final_answer"]["parameters"]
    assert answers["required"] == ["answers"]
    assert answers["properties"]["answers"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "The list of final answers to commit.",
    }
    assert harness.answer_tool == "commit_final_answer"
    state = rt.State(task={"instruction": "How many?", "context": "Table t."}, max_rounds=15)
    assert harness.task_message(state) == (
        "Additional table information about the question: Table t.\nQuestion: How many?"
    )


@pytest.mark.slow
def test_replay_solves_every_dev_task_with_function_calls(workspace):
    """Every dev task through the gateway, the sandboxed SQL tool and the scorer; the text
    harness's scores of the same query answers are identical (one scorer for both)."""
    from harnessctl.policy import Policy
    from harnessctl.run.evaluate import EvalRequest, evaluate
    from harnessctl.suite import load_suite
    from harnessctl.workspace import load_workspace

    store = load_workspace(workspace).open_store()
    suite = load_suite(workspace / "examples" / "dbbench")

    def run(harness: Path, ids: list[str] | None = None):
        policy = Policy("replay/dbbench")
        request = EvalRequest(load_spec(harness), suite, "dev", policy, rollouts=1, task_ids=ids)
        return {r.task_id: r for r in evaluate(request, store).rows}

    rows = run(FC_HARNESS)
    assert len(rows) == 60 and {r.outcome for r in rows.values()} == {"success"}
    for row in rows.values():
        trajectory = store.trajectory(row)
        assert all(call.tools for call in trajectory.calls)  # the two functions, every call
        last = trajectory.calls[-1].tool_calls[0]["function"]
        assert last["name"] == "commit_final_answer"
    queries = ["dev-000", "dev-004", "dev-010"]
    text = run(BASE_HARNESS, queries)
    for task_id in queries:
        fc_score = store.trajectory(rows[task_id]).score
        text_score = store.trajectory(text[task_id]).score
        assert fc_score is not None and text_score is not None
        assert fc_score.detail == text_score.detail  # same answer text, same scorer
        assert fc_score.detail["rules"] == "agentbench-fc"


# --- in-process episodes with sim/dbbench ------------------------------------------------------


class SimModel:
    """``sim/dbbench`` called the way the offline provider calls it, replies as the gateway
    client returns them (text, or function calls)."""

    def __init__(self, oracle: dict, seed: int, params: dict | None = None) -> None:
        self.oracle, self.seed, self.params = oracle, seed, params or {}

    def chat(self, messages, **params):
        reply = SIM.reply(self.oracle, messages, self.seed, self.params, params.get("tools"))
        if isinstance(reply, str):
            return ModelReply(content=reply, usage={}, raw={})
        calls = [
            ToolCall(f"call_{len(messages)}_{i}", c["name"], json.dumps(c["arguments"]))
            for i, c in enumerate(reply["tool_calls"])
        ]
        return ModelReply(content=reply["content"] or "", usage={}, raw={}, tool_calls=calls)


def sim_episode(harness_dir: Path, task, seed: int, workdir: Path, params=None):
    """(runtime status, scored success) of one episode of ``harness_dir`` on ``task``."""
    if workdir.exists():
        shutil.rmtree(workdir)
    ENV.prepare(task, workdir)
    manifest = load_spec(harness_dir).manifest.model_dump()
    harness = load_harness(harness_dir, workdir, manifest)
    public = json.loads((workdir / "task.json").read_text(encoding="utf-8"))
    state = rt.State(task=public, max_rounds=harness.max_rounds)
    log = EventLog(workdir / "events.jsonl")
    try:
        run_episode(harness, state, SimModel(ENV.oracle(task), seed, params), log)
    finally:
        log.close()
        for tool in harness.tools.values():
            tool.close()
    return state.status, ENV.score(task, workdir, state.answer).success


@pytest.mark.slow
def test_sim_answers_with_calls_and_fails_as_it_does_in_text(tmp_path, dbbench_runtime):
    """The sim decides the same under either protocol: per (task, seed), the function-calling
    harness ends and scores exactly as the text harness does."""
    outcomes = {}
    for task in TASKS:
        for seed in (0, 1):
            text = sim_episode(BASE_HARNESS, task, seed, tmp_path / "text")
            fc = sim_episode(FC_HARNESS, task, seed, tmp_path / "fc")
            assert fc == text, (task.id, seed)
            outcomes[text] = outcomes.get(text, 0) + 1
    assert 0.3 < outcomes.get(("answered", True), 0) / (2 * len(TASKS)) < 0.6
    assert ("invalid_format", False) in outcomes and ("step_limit", False) in outcomes


def test_the_sim_reads_function_calls_as_the_actions_they_stand_for():
    task = next(t for t in TASKS if t.id == "dev-004")
    oracle = ENV.oracle(task)
    tools = [{"type": "function", "function": {"name": n}} for n in ("execute_sql", "x")]
    assert isinstance(SIM.reply(oracle, [], 0, {}, tools), str)  # both functions, or text
    tools.append({"type": "function", "function": {"name": "commit_final_answer"}})
    first = SIM.reply(oracle, [{"role": "user", "content": "q"}], 1, {"rate_bare": 0}, tools)
    assert isinstance(first, dict) and first["tool_calls"][0]["name"] == "execute_sql"
    arguments = json.dumps(first["tool_calls"][0]["arguments"])
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "execute_sql", "arguments": arguments},
    }
    ran = {"role": "assistant", "content": first["content"], "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "[('1',)]"}
    params = {f"rate_{m}": 0.0 for m in MODES}
    second = SIM.reply(oracle, [{"role": "user", "content": "q"}, ran, result], 1, params, tools)
    assert second["tool_calls"] == [
        {"name": "commit_final_answer", "arguments": {"answers": list(oracle["label"])}}
    ]


# --- the rule-based repairs for dbbench-fc ---------------------------------------------------

RESCUES = {  # failure mode of the sim -> the repair for dbbench-fc that rescues it
    "format": "fc-format-reprompt-and-answers-check",
    "bare": "fc-format-reprompt-and-answers-check",
    "identifier": "fc-recovery-schema-on-error",
    "value": "fc-context-schema-and-rows",
    "stall": "fc-termination-last-rounds-warning",
    "lose_track": "fc-observation-compact-rows",
}


def repaired(repair_id: str, dest: Path) -> Path:
    import yaml

    spec = yaml.safe_load((REPAIRS / f"{repair_id}.yaml").read_text(encoding="utf-8"))
    shutil.copytree(FC_HARNESS, dest)
    write_files(dest, apply_blocks(dest, parse_patch(spec["patch"])))
    return dest


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(RESCUES))
def test_each_fc_repair_rescues_its_failure_mode(mode, tmp_path, dbbench_runtime):
    only = {f"rate_{m}": 1.0 if m == mode else 0.0 for m in MODES}
    fixed = repaired(RESCUES[mode], tmp_path / "repaired")
    failed = []
    for task in TASKS[::3]:
        if not sim_episode(FC_HARNESS, task, 0, tmp_path / "plain", only)[1]:
            failed.append(task)
    assert failed, f"{mode} sinks no plain episode"
    rescued = [t.id for t in failed if sim_episode(fixed, t, 0, tmp_path / "fixed", only)[1]]
    assert rescued == [t.id for t in failed]


def test_repairs_for_one_base_never_apply_to_the_other():
    from harnessctl.evolve.editors import _applies, load_repairs

    def files(root: Path) -> dict[str, str]:
        return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*.*")}

    text, fc = files(BASE_HARNESS), files(FC_HARNESS)
    for repair in load_repairs("dbbench"):
        own, other = (fc, text) if repair.id.startswith("fc-") else (text, fc)
        assert not _applies(repair, other), repair.id
        if not repair.requires:
            assert _applies(repair, own), repair.id
