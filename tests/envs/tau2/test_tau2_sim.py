"""``sim/tau2``'s failure modes as pure functions of (oracle, messages, seed, rates, tools):
each fails the way docs/tau2.md says and recovers exactly when the harness says the words.
The ``hasty``, ``forget`` and ``stop`` modes also run in process through the real
``tau2-base`` (harnessctl's agent loop, tau2's episode with the scripted user, tau2's
evaluator) and through ``tau2-base`` with their direction's repair applied: a failure by
tau2's verdict, then a success (~10 s; tau2's import and airline/retail databases)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

import harnessctl.runtime as rt
from harnessctl.envs.tau2.sim import (
    BARE_CLOSING,
    FORGET_AFTER,
    GIVE_UP,
    GOODBYE,
    MODES,
    WRITE_TOOLS,
    Plan,
    SimTau2,
    confirmation,
    next_reply,
    plan_episode,
    slipped,
)
from harnessctl.evolve.patch import apply_blocks, parse_patch, write_files
from harnessctl.runtime.client import ModelReply, ToolCall
from harnessctl.runtime.env import HostTool
from tests.helpers import ROOT

sys.modules.setdefault("harnessctl_runtime", rt)  # the name harness code imports it by

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_user_details",
            "parameters": {
                "type": "object",
                "properties": {"user_id": {"type": "string"}},
                "required": ["user_id"],
            },
        },
    }
]
CALL = {"name": "get_user_details", "arguments": {"user_id": "mia_1"}}
ORACLE = {
    "task_id": "airline-x",
    "script": [{"text": "I will look you up.", "tool_call": CALL}, {"text": "Everything is done."}],
}
ONLY = {"arguments": 0.0, "giveup": 0.0, "empty": 0.0}


def _call_message(arguments: dict) -> dict:
    function = {"name": "get_user_details", "arguments": json.dumps(arguments)}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": function}]}


def _start() -> list[dict]:
    return [{"role": "system", "content": "policy"}, {"role": "user", "content": "hi"}]


def _reply(messages, mode: str, seed: int = 0):
    return next_reply(ORACLE, messages, seed, {**ONLY, mode: 1.0}, TOOLS)


def test_without_a_mode_it_plays_the_gold():
    messages = _start()
    assert next_reply(ORACLE, messages, 0, ONLY, TOOLS) == {"content": None, "tool_calls": [CALL]}
    messages += [_call_message(CALL["arguments"]), {"role": "tool", "content": '{"name": "Mia"}'}]
    assert next_reply(ORACLE, messages, 0, ONLY, TOOLS) == "Everything is done."


def test_arguments_repeats_the_incomplete_call_until_the_schema_is_cited():
    messages = _start()
    first = _reply(messages, "arguments")
    assert first == {"content": None, "tool_calls": [{"name": "get_user_details", "arguments": {}}]}
    messages += [_call_message({}), {"role": "tool", "content": "Error: missing 1 argument"}]
    assert _reply(messages, "arguments") == first
    messages += [
        _call_message({}),
        {"role": "tool", "content": "user_id is required by the schema"},
    ]
    assert _reply(messages, "arguments") == {"content": None, "tool_calls": [CALL]}


def test_giveup_mistypes_the_id_then_gives_up_unless_told_to_try_again():
    messages = _start()
    wrong = {"user_id": "mia_1X"}
    assert _reply(messages, "giveup") == {
        "content": None,
        "tool_calls": [{"name": "get_user_details", "arguments": wrong}],
    }
    failed = [_call_message(wrong), {"role": "tool", "content": "Error: User not found"}]
    assert _reply(messages + failed, "giveup") == GIVE_UP
    advised = [_call_message(wrong), {"role": "tool", "content": "Error: no. Try again."}]
    assert _reply(messages + advised, "giveup") == {"content": None, "tool_calls": [CALL]}


def test_empty_replies_until_reprompted_and_the_draw_is_per_seed_and_task():
    seed = next(s for s in range(50) if plan_episode(ORACLE, s, {"empty": 1.0}, TOOLS).step == 0)
    messages = _start()
    assert _reply(messages, "empty", seed) == ""
    messages += [{"role": "assistant", "content": ""}, {"role": "user", "content": "Hello?"}]
    assert _reply(messages, "empty", seed) == ""
    messages += [
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "Your reply was empty: call a tool or write to the user."},
    ]
    assert _reply(messages, "empty", seed) == {"content": None, "tool_calls": [CALL]}
    steps = {plan_episode(ORACLE, s, {"empty": 1.0}, TOOLS).step for s in range(50)}
    assert steps == {0, 1}


def test_full_skill_switches_every_mode_off():
    policy = SimTau2()
    reply = policy.reply(ORACLE, _start(), 3, {"skill": 1.0}, TOOLS)
    assert reply == {"content": None, "tool_calls": [CALL]}


# --- hasty and stop: the sim's logic ----------------------------------------------------------

WRITE = {
    "type": "function",
    "function": {
        "name": "modify_user_address",
        "parameters": {
            "type": "object",
            "properties": {
                "user_id": {"type": "string"},
                "zip": {"type": "string"},
                "reason": {"type": "string", "enum": ["no longer needed", "ordered by mistake"]},
            },
            "required": ["user_id", "zip"],
        },
    },
}
MOVE = {"name": "modify_user_address", "arguments": {"user_id": "mia_1", "zip": "10228"}}
TRANSFER = {"name": "transfer_to_human_agents", "arguments": {"summary": "cannot fix"}}
TRANSFER_TOOL = {"type": "function", "function": {"name": "transfer_to_human_agents"}}
NONE = {mode: 0.0 for mode in MODES}


def _said(text: str, answer: str) -> list[dict]:
    return [{"role": "assistant", "content": text}, {"role": "user", "content": answer}]


def _called(call: dict, result: str) -> list[dict]:
    function = {"name": call["name"], "arguments": json.dumps(call["arguments"])}
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "function": function}],
    }
    return [message, {"role": "tool", "content": result}]


def _as_reply(call: dict) -> dict:
    return {"content": None, "tool_calls": [call]}


def test_slipped_values_are_other_valid_values_and_ids_are_left_alone():
    schema = WRITE["function"]["parameters"]["properties"]
    assert slipped("no longer needed", schema["reason"]) == "ordered by mistake"
    assert slipped("ordered by mistake", schema["reason"]) == "no longer needed"
    assert slipped(2, {}) == 3 and slipped(2.0, {}) == 3.0 and slipped(True, {}) is None
    assert slipped("144 Lakeview Drive", {}) == "145 Lakeview Drive"
    assert slipped("10229", {}) == "10220"
    assert slipped("New York", {}) is None
    oracle = {"task_id": "retail-x", "category": "retail:communicate+db", "script": [
        {"text": "", "tool_call": MOVE}, {"text": "Everything is done."}]}  # fmt: skip
    plans = {plan_episode(oracle, s, {"hasty": 1.0}, [WRITE]) for s in range(10)}
    assert {(p.mode, p.step, p.key) for p in plans} == {("hasty", 0, "zip")}  # never user_id
    # only where tau2 checks the database (telecom's env assertions do not)
    telecom = {**oracle, "category": "telecom:env_assertion"}
    assert plan_episode(telecom, 0, {"hasty": 1.0}, [WRITE]).mode is None


def test_hasty_slips_a_detail_of_a_write_unless_told_to_confirm_before_write_actions():
    oracle = {"task_id": "retail-x", "category": "retail:communicate+db", "script": [
        {"text": "", "tool_call": MOVE}, {"text": "Everything is done."}]}  # fmt: skip
    rates = {**NONE, "hasty": 1.0}
    slip = {"name": "modify_user_address", "arguments": {"user_id": "mia_1", "zip": "10229"}}
    messages = _start()
    assert next_reply(oracle, messages, 0, rates, [WRITE]) == {
        "content": None,
        "tool_calls": [slip],
    }
    # the wrong write went through: for the agent the step is done
    messages += _called(slip, '{"zip": "10229"}')
    assert next_reply(oracle, messages, 0, rates, [WRITE]) == "Everything is done."
    # a harness that says to confirm before any write action: it asks, then writes it right
    told = [{"role": "system", "content": "Before any write action, ask the user."}, _start()[1]]
    question = next_reply(oracle, told, 0, rates, [WRITE])
    assert question == confirmation(MOVE) and "?" in question and "10228" in question
    told += _said(question, "Yes, please go ahead.")
    assert next_reply(oracle, told, 0, rates, [WRITE]) == {"content": None, "tool_calls": [MOVE]}
    told += _called(MOVE, '{"zip": "10228"}')
    assert next_reply(oracle, told, 0, rates, [WRITE]) == "Everything is done."
    # with no mode drawn it still confirms every write when told to
    assert next_reply(oracle, told[:2], 0, NONE, [WRITE]) == question


def test_stop_says_goodbye_instead_of_the_transfer_until_the_closing_is_checked():
    oracle = {"task_id": "telecom-x", "category": "telecom:action+env_assertion", "script": [
        {"text": "", "tool_call": TRANSFER},
        {"text": "Everything is done. You are being transferred to a human agent."}]}  # fmt: skip
    rates = {**NONE, "stop": 1.0}
    assert plan_episode(oracle, 0, rates, [TRANSFER_TOOL]).step == 0
    messages = _start()
    assert next_reply(oracle, messages, 0, rates, [TRANSFER_TOOL]) == GOODBYE
    messages += _said(GOODBYE, "Your message was not sent. Check what is due.")
    assert next_reply(oracle, messages, 0, rates, [TRANSFER_TOOL]) == GOODBYE
    checked = _start() + _said(GOODBYE, "Not sent: check before ending the conversation.")
    assert next_reply(oracle, checked, 0, rates, [TRANSFER_TOOL]) == {
        "content": None,
        "tool_calls": [TRANSFER],
    }
    # without a transfer it strikes at a closing that tells the user something, never at a
    # bare closing
    told = {"task_id": "retail-x", "script": [{"text": "For your records: 242.92."}]}
    assert plan_episode(told, 0, rates, []).step == 0
    bare = {"task_id": "retail-x", "script": [{"text": BARE_CLOSING}]}
    assert plan_episode(bare, 0, rates, []).mode is None


# --- under tau2's own evaluator: tau2-base and its repairs, in process ---------------------

try:
    import tau2  # noqa: F401  (the `tau2` extra; .ci/run installs it)

    HAS_TAU2 = True
except ImportError:  # CI must run these: it fails there instead of skipping
    if os.environ.get("CI"):
        raise
    HAS_TAU2 = False
needs_tau2 = pytest.mark.skipif(not HAS_TAU2, reason="pip install -e '.[tau2]' to run these")

BASE = ROOT / "harnesses" / "tau2-base"
REPAIRS = ROOT / "harnessctl" / "envs" / "tau2" / "directions" / "repairs"


class _EpisodeClient:
    """The host's side of a host tool, in process: every action goes to one tau2 episode."""

    def __init__(self, episode) -> None:
        self.episode = episode

    def step(self, tool: str, argument: str = "", arguments: dict | None = None):
        return self.episode.step(tool, argument, arguments)


class _SimModel:
    """``sim/tau2`` called the way the offline provider calls it."""

    def __init__(self, oracle: dict, seed: int, params: dict) -> None:
        self.oracle, self.seed, self.params = oracle, seed, params

    def chat(self, messages, **params):
        reply = SimTau2().reply(self.oracle, messages, self.seed, self.params, params.get("tools"))
        if isinstance(reply, str):
            return ModelReply(content=reply, usage={}, raw={})
        calls = [
            ToolCall(f"call_{len(messages)}_{i}", c["name"], json.dumps(c["arguments"]))
            for i, c in enumerate(reply["tool_calls"])
        ]
        return ModelReply(content="", usage={}, raw={}, tool_calls=calls)


def _harness(tmp_path: Path, repair: str | None) -> Path:
    """tau2-base, or a copy with one of the rule-based editor's repairs applied."""
    if repair is None:
        return BASE
    target = tmp_path / f"tau2-{repair}"
    shutil.copytree(BASE, target)
    patch = yaml.safe_load((REPAIRS / f"{repair}.yaml").read_text())["patch"]
    write_files(target, apply_blocks(target, parse_patch(patch)))
    return target


def _episode(harness_dir: Path, task_id: str, seed: int, params: dict, workdir: Path):
    """One conversation of the harness with sim/tau2 on tau2's episode: (score, turns)."""
    from harnessctl.envs.tau2 import Tau2Environment
    from harnessctl.harness import load_harness as load_spec
    from harnessctl.runtime.boot import load_harness
    from harnessctl.runtime.loop import EventLog, run_episode

    env = Tau2Environment()
    task = env.load_tasks(ROOT / "examples" / "tau2" / "tasks").by_id()[task_id]
    env.prepare(task, workdir)
    harness = load_harness(harness_dir, workdir, load_spec(harness_dir).manifest.model_dump())
    episode = env.open_episode(task, seed)
    client = _EpisodeClient(episode)
    harness.tools = {name: HostTool(name, client, rt.Observation) for name in env.tools}
    public = json.loads((workdir / "task.json").read_text(encoding="utf-8"))
    public["observation"] = episode.reset().observation
    state = rt.State(task=public, max_rounds=harness.max_rounds)
    log = EventLog(workdir / "events.jsonl")
    try:
        run_episode(harness, state, _SimModel(env.oracle(task), seed, params), log)
    finally:
        log.close()
    return env.score(task, workdir, state.answer, episode), state.turns


@needs_tau2
def test_write_tools_are_the_tools_tau2_marks_write():
    from tau2.environment.toolkit import ToolType

    from harnessctl.envs.tau2.package import new_environment

    marked = set()
    for domain in ("airline", "retail", "telecom"):
        toolkit = new_environment(domain).tools
        marked |= {n for n in toolkit.tools if toolkit.tool_type(n) == ToolType.WRITE}
    assert marked == WRITE_TOOLS


@pytest.mark.slow
@needs_tau2
def test_hasty_fails_taus_database_check_and_confirm_writes_fixes_it(tmp_path):
    params = {**{f"rate_{m}": 0.0 for m in MODES}, "rate_hasty": 1.0}
    score, turns = _episode(BASE, "retail-71", 0, params, tmp_path / "base")
    assert not score.success and score.detail["db_match"] is False, score.detail
    assert score.detail["breakdown"] == {"DB": 0.0, "COMMUNICATE": 1.0}
    repaired = _harness(tmp_path, "confirm-writes")
    score, turns = _episode(repaired, "retail-71", 0, params, tmp_path / "confirm")
    assert score.success, score.detail
    asked = [t.reply for t in turns if t.reply.startswith("Before I go ahead")]
    assert len(asked) == 2  # both of the task's writes (an address, then items) confirmed


@pytest.mark.slow
@needs_tau2
@pytest.mark.parametrize(
    ("task_id", "check"),
    [
        # tau2 expects the transfer (action check)
        ("telecom-service_issue_airplane_mode_on_lock_sim_-705f5367", "ACTION"),
        # tau2 expects a figure told to the user (communicate check)
        ("retail-60", "COMMUNICATE"),
    ],
)
def test_stop_fails_taus_check_and_closing_check_fixes_it(tmp_path, task_id, check):
    params = {**{f"rate_{m}": 0.0 for m in MODES}, "rate_stop": 1.0}
    score, turns = _episode(BASE, task_id, 0, params, tmp_path / "base")
    assert not score.success and score.detail["breakdown"][check] == 0.0, score.detail
    assert score.detail["termination"] == "agent_stop" and turns[-1].reply == GOODBYE
    repaired = _harness(tmp_path, "closing-check")
    score, turns = _episode(repaired, task_id, 0, params, tmp_path / "closing")
    assert score.success, score.detail
    assert [t.reply for t in turns].count(GOODBYE) == 1  # held back once, then the right end


@pytest.mark.slow
@needs_tau2
def test_forget_slips_a_fact_of_the_first_message_and_restate_facts_fixes_it(tmp_path):
    params = {**{f"rate_{m}": 0.0 for m in MODES}, "rate_forget": 1.0}
    score, turns = _episode(BASE, "retail-42", 0, params, tmp_path / "base")
    assert not score.success and score.detail["db_match"] is False, score.detail
    repaired = _harness(tmp_path, "restate-facts")
    score, turns = _episode(repaired, "retail-42", 0, params, tmp_path / "restate")
    assert score.success, score.detail
    # confirming writes does not help: the agent lists the detail as it remembers it
    confirming = _harness(tmp_path, "confirm-writes")
    score, turns = _episode(confirming, "retail-42", 0, params, tmp_path / "confirm")
    assert not score.success and score.detail["db_match"] is False, score.detail


def test_forget_slips_a_fact_from_the_first_message_late_unless_a_reminder_restates_it():
    lookups = [{"text": "", "tool_call": CALL}] * FORGET_AFTER
    oracle = {"task_id": "retail-x", "category": "retail:communicate+db",
              "script": [*lookups, {"text": "", "tool_call": MOVE}, {"text": "Done."}]}  # fmt: skip
    rates = {**NONE, "forget": 1.0}
    opening = "I moved: my new zip code is 10228."
    tools = [TOOLS[0], WRITE]
    assert plan_episode(oracle, 0, rates, tools, opening) == Plan("forget", FORGET_AFTER, "zip")
    assert plan_episode(oracle, 0, rates, tools, "I moved.").mode is None  # not the user's fact
    early = {**oracle, "script": [{"text": "", "tool_call": MOVE}, {"text": "Done."}]}
    assert plan_episode(early, 0, rates, tools, opening).mode is None  # too early to forget
    messages = [{"role": "system", "content": "policy"}, {"role": "user", "content": opening}]
    for _ in range(FORGET_AFTER):
        messages += _called(CALL, '{"name": "Mia"}')
    slip = {"name": "modify_user_address", "arguments": {"user_id": "mia_1", "zip": "10229"}}
    assert next_reply(oracle, messages, 0, rates, tools) == _as_reply(slip)
    assert next_reply(oracle, [*messages, *_called(slip, "{}")], 0, rates, tools) == "Done."
    # a reminder next to the latest message that restates what the user said at the start
    reminded = [*messages[:-1], {**messages[-1], "content": '{"name": "Mia"}\n(What the user '
                f"said at the start: {opening})"}]  # fmt: skip
    assert next_reply(oracle, reminded, 0, rates, tools) == _as_reply(MOVE)
    # the reminder is not an answer: words in it do not make the lookup it follows fail
    noisy = '{"name": "Mia"} (what the user said at the start: it was not sent, to 10228)'
    noisy_messages = [*messages[:-1], {**messages[-1], "content": noisy}]
    assert next_reply(oracle, noisy_messages, 0, rates, tools) == _as_reply(MOVE)
