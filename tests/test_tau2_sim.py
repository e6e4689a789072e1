"""``sim/tau2``'s failure modes as pure functions of (oracle, messages, seed, rates, tools):
each fails the way docs/tau2.md says and recovers exactly when the harness says the words."""

from __future__ import annotations

import json

from harnessctl.envs.tau2.sim import GIVE_UP, SimTau2, next_reply, plan_episode

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
