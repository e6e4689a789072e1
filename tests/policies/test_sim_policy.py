"""The ``sim/dbbench`` test double, driven through real ``litellm.completion`` calls by a small
DBBench v0.2 harness written here (real SQLite tables built from the dev split), with switchable
features: each failure mode must sink the plain harness and be rescued by its own feature only.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
from dataclasses import dataclass, replace
from typing import Any

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
import litellm  # noqa: E402

from harnessctl.envs.dbbench.sim import (  # noqa: E402
    MODES,
    Task,
    effective_rates,
    next_reply,
    plan_episode,
)
from harnessctl.envs.dbbench.sim_signals import (  # noqa: E402
    asks_for_list,
    reply_kind,
    restates_format,
)
from harnessctl.policies import OFFLINE_PROVIDERS, oracle, register_providers  # noqa: E402
from harnessctl.policies.sim_signals import commit_signal  # noqa: E402
from harnessctl.policy import Policy  # noqa: E402
from tests.helpers import ROOT

DEV = ROOT / "examples" / "dbbench" / "dev.jsonl"
SYSTEM = (
    "You operate a SQLite database to solve the user's task. Each turn, think, then either run "
    "one SQL statement:\nAction: Operation\n```sql\nSELECT * FROM t;\n```\nor, when done, "
    'reply\nAction: Answer\nFinal Answer: ["answer1", "answer2"]\n(use [] after a change).'
)
FORMAT_HINT = (
    "Invalid reply. Use `Action: Operation` with one ```sql block, or `Action: Answer` and "
    "`Final Answer: [...]`."
)
LIST_HINT = 'Your Final Answer is not a list. Write it as a list, e.g. Final Answer: ["x"].'
LAST_HINT = "This is your last round: answer now."


@dataclass(frozen=True)
class Harness:
    """A DBBench v0.2 harness; each flag is one kind of harness change."""

    reprompt_format: bool = False  # rescues "format"
    schema_feedback: bool = False  # rescues "identifier"
    sample_rows: bool = False  # rescues "value"
    answer_check: bool = False  # rescues "bare"
    last_round_warning: bool = False  # rescues "stall"
    obs_limit: int = 800  # 400 rescues "lose_track"
    rounds: int = 15


PLAIN = Harness()
RESCUE = {
    "format": replace(PLAIN, reprompt_format=True),
    "identifier": replace(PLAIN, schema_feedback=True),
    "value": replace(PLAIN, sample_rows=True),
    "bare": replace(PLAIN, answer_check=True),
    "stall": replace(PLAIN, last_round_warning=True),
    "lose_track": replace(PLAIN, obs_limit=400),
}
ALL = Harness(True, True, True, True, True, 400)
ALL_BUT = {
    "format": replace(ALL, reprompt_format=False),
    "identifier": replace(ALL, schema_feedback=False),
    "value": replace(ALL, sample_rows=False),
    "bare": replace(ALL, answer_check=False),
    "stall": replace(ALL, last_round_warning=False),
    "lose_track": replace(ALL, obs_limit=800),
}


@pytest.fixture(scope="module", autouse=True)
def _providers() -> None:
    register_providers(litellm)


def _records() -> list[dict[str, Any]]:
    if not DEV.exists():
        pytest.skip(f"{DEV} missing (the DBBench example suite ships it)")
    return [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines() if line]


def make_oracle(index: int, record: dict[str, Any]) -> dict[str, Any]:
    kind = "mutation" if record["type"][0] in ("INSERT", "UPDATE") else "query"
    info = record["table"]["table_info"]
    return {
        "task_id": f"dev-{index:03d}",
        "type": record["type"][0],
        "kind": kind,
        "description": record["description"],
        "table_name": record["table"]["table_name"],
        "columns": [c["name"] for c in info["columns"]],
        "rows": [[str(v) for v in row] for row in info["rows"]],
        "label": list(record["label"]),
        "reference_sql": record["label"][0] if kind == "mutation" else None,
        "query_sql": (record.get("sql") or {}).get("query"),
    }


ORACLES = [make_oracle(i, r) for i, r in enumerate(_records())] if DEV.exists() else []


def _db(orc: dict[str, Any], collation: str = "NOCASE") -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    q = [f"`{c}` TEXT COLLATE {collation}" for c in orc["columns"]]
    db.execute(f"CREATE TABLE `{orc['table_name']}` ({', '.join(q)})")
    marks = ", ".join("?" * len(orc["columns"]))
    db.executemany(f"INSERT INTO `{orc['table_name']}` VALUES ({marks})", orc["rows"])
    return db


def _state(db: sqlite3.Connection, table: str) -> list[tuple[Any, ...]]:
    return sorted(db.execute(f"SELECT * FROM `{table}`").fetchall(), key=repr)


def _same(a: Any, b: Any) -> bool:
    def norm(v: Any) -> str:
        t = str(v).strip().strip("'\"").rstrip("%").replace(",", "")
        return "0" if t.lower() in ("", "none", "null", "nan") else t

    try:
        return abs(float(norm(a)) - float(norm(b))) <= 0.01
    except ValueError:
        return norm(a) == norm(b)


def _as_list(text: str) -> list[Any] | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, list) else None


def episode(
    orc: dict[str, Any], seed: int, h: Harness = PLAIN, collation: str = "NOCASE", **params: Any
) -> tuple[str, list[str]]:
    """Run one rollout; return (outcome, the sim's replies)."""
    rid = f"r-{orc['task_id']}-{seed}-{id(h)}"
    db = _db(orc, collation)
    task = f"{orc['description']}\nThe name of this table is {orc['table_name']}, and the "
    task += f"headers of this table are {','.join(orc['columns'])}."
    if h.sample_rows:
        task += "\nExample rows:\n" + "\n".join(" | ".join(r) for r in orc["rows"][:3])
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task},
    ]
    replies: list[str] = []
    outcome = "step_limit"
    with oracle.registered(rid, orc):
        for rnd in range(h.rounds):
            if h.last_round_warning and rnd == h.rounds - 1:
                msgs.append({"role": "user", "content": LAST_HINT})
            meta = {"harnessctl": {"rollout_id": rid, "call_index": rnd, "seed": seed}}
            resp = litellm.completion(model="sim/dbbench", messages=msgs, metadata=meta, **params)
            reply = resp.choices[0].message.content
            replies.append(reply)
            msgs.append({"role": "assistant", "content": reply})
            if "Final Answer:" in reply:
                answer = _as_list(reply.split("Final Answer:", 1)[1].strip())
                if answer is None and h.answer_check:
                    msgs.append({"role": "user", "content": LIST_HINT})
                    continue
                if orc["kind"] == "query":
                    label = orc["label"]
                    ok = answer is not None and (
                        _same(answer[0], label[0])
                        if len(answer) == len(label) == 1
                        else {str(a) for a in answer} == {str(b) for b in label}
                    )
                    outcome = (
                        "success"
                        if ok
                        else ("invalid_format" if answer is None else "wrong_answer")
                    )
                else:
                    outcome = "answered"
                break
            if "Action: Operation" not in reply or "```sql" not in reply:
                if h.reprompt_format:
                    msgs.append({"role": "user", "content": FORMAT_HINT})
                    continue
                outcome = "invalid_format"
                break
            sql = reply.split("```sql", 1)[1].split("```", 1)[0].strip()
            try:
                obs = str(db.execute(sql).fetchall())
                db.commit()
            except sqlite3.Error as exc:
                obs = str(exc)
                if h.schema_feedback:
                    obs += f"\nTable `{orc['table_name']}` has columns: {', '.join(orc['columns'])}"
            if len(obs) > h.obs_limit:
                obs = obs[: h.obs_limit] + "[TRUNCATED]"
            msgs.append({"role": "user", "content": obs})
    if orc["kind"] == "mutation":
        gold = _db(orc, collation)
        gold.execute(orc["reference_sql"])
        right = _state(db, orc["table_name"]) == _state(gold, orc["table_name"])
        outcome = "success" if right else ("wrong_answer" if outcome == "answered" else outcome)
    return outcome, replies


@pytest.fixture(scope="module")
def plain_runs() -> dict[tuple[int, int], str]:
    return {(i, s): episode(o, s)[0] for s in (0, 1, 2) for i, o in enumerate(ORACLES)}


def only(mode: str) -> dict[str, float]:
    """Call params that switch ``mode`` on for every episode and all other modes off."""
    return {f"rate_{m}": 1.0 if m == mode else 0.0 for m in MODES}


def _plan(orc: dict[str, Any], seed: int, skill: float = 0.5, **params: float) -> Any:
    overrides = {k.removeprefix("rate_"): v for k, v in params.items()}
    return plan_episode(Task.from_oracle(orc), seed, effective_rates(skill, overrides))


@pytest.mark.slow
def test_calibration_plain_harness(plain_runs: dict[tuple[int, int], str]) -> None:
    rate = sum(o == "success" for o in plain_runs.values()) / len(plain_runs)
    assert 0.35 <= rate <= 0.55, rate
    assert {"wrong_answer", "invalid_format", "step_limit"} <= set(plain_runs.values())
    # Every mode sinks some episode that succeeds, same draws otherwise, with the mode off.
    for mode in MODES:
        caused = (
            (i, s)
            for (i, s), out in plain_runs.items()
            if out != "success"
            and mode in _plan(ORACLES[i], s).active
            and episode(ORACLES[i], s, **{f"rate_{mode}": 0.0})[0] == "success"
        )
        assert next(caused, None), mode


def test_same_seed_same_episode_and_seeds_differ() -> None:
    sample = ORACLES[::6]
    first = [episode(o, 1) for o in sample]
    assert first == [episode(o, 1) for o in sample]
    assert first != [episode(o, 2) for o in sample]


def _sample(mode: str) -> list[dict[str, Any]]:
    kind = {"bare": "query", "lose_track": "query", "value": "mutation"}.get(mode)
    pool = [o for o in ORACLES if kind in (None, o["kind"])]
    pool = [o for o in pool if mode in _plan(o, 0, **only(mode)).active]
    return pool[:: max(1, len(pool) // 6)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_each_mode_fails_and_only_its_feature_rescues(mode: str) -> None:
    rates = only(mode)
    tasks = _sample(mode)
    assert len(tasks) >= 5
    for orc in tasks:
        # A format slip after a finished mutation costs nothing: the table is already right.
        harmless = (
            mode == "format"
            and orc["kind"] == "mutation"
            and _plan(orc, 0, **rates).format_turn == 1
        )
        assert episode(orc, 0, RESCUE[mode], **rates)[0] == "success", (mode, orc["task_id"])
        assert episode(orc, 0, ALL, **rates)[0] == "success"
        if not harmless:
            assert episode(orc, 0, PLAIN, **rates)[0] != "success", (mode, orc["task_id"])
            assert episode(orc, 0, ALL_BUT[mode], **rates)[0] != "success", orc["task_id"]


def test_identifier_guesses_wrong_names_until_schema_feedback() -> None:
    orc = next(o for o in ORACLES if o["kind"] == "query")
    rates = only("identifier")
    outcome, replies = episode(orc, 0, **rates)
    assert outcome == "step_limit" and len(replies) == 15
    assert all(orc["table_name"] not in r for r in replies)  # only ever wrong guesses
    outcome, replies = episode(orc, 0, RESCUE["identifier"], **rates)
    assert outcome == "success" and f"`{orc['table_name']}`" in replies[1]


def test_value_mistake_fails_under_either_collation() -> None:
    rates = only("value")
    for orc in _sample("value"):
        for collation in ("BINARY", "NOCASE"):
            assert episode(orc, 0, PLAIN, collation, **rates)[0] == "wrong_answer"
            assert episode(orc, 0, RESCUE["value"], collation, **rates)[0] == "success"


def test_higher_skill_fails_less(plain_runs: dict[tuple[int, int], str]) -> None:
    for orc in ORACLES:
        for seed in (0, 1, 2):
            low, mid, high = (_plan(orc, seed, k).active for k in (0.1, 0.5, 0.9))
            assert high <= mid <= low  # raising skill only ever switches modes off
    subset = range(0, len(ORACLES), 3)
    mid = sum(plain_runs[(i, 0)] == "success" for i in subset)
    high = sum(episode(ORACLES[i], 0, skill=0.9)[0] == "success" for i in subset)
    low = sum(episode(ORACLES[i], 0, skill=0.1)[0] == "success" for i in subset)
    assert low < mid < high
    assert all(episode(ORACLES[i], 0, skill=1.0)[0] == "success" for i in subset)


def _call(
    messages: Any, rid: str = "r-api", orc: dict[str, Any] | None = None, **kwargs: Any
) -> Any:
    meta = {"harnessctl": {"rollout_id": rid, "call_index": 3, "seed": 0}}
    with oracle.registered(rid, orc or ORACLES[0]):
        return litellm.completion(model="sim/dbbench", messages=messages, metadata=meta, **kwargs)


def test_package_import_is_light_and_registration_idempotent() -> None:
    code = "import sys, harnessctl.policies; print('litellm' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "False", out.stderr
    register_providers(litellm)
    assert [p["provider"] for p in litellm.custom_provider_map].count("sim") == 1
    assert "test double" in OFFLINE_PROVIDERS["sim/dbbench"].lower()


def test_policy_id_is_stable() -> None:
    a = Policy("sim/dbbench", {"skill": 0.7, "rate_format": 1.0}).id
    assert a == Policy("sim/dbbench", {"rate_format": 1.0, "skill": 0.7}).id
    assert a != Policy("sim/dbbench", {"skill": 0.8}).id


def test_oracle_registry_copies_and_is_thread_safe() -> None:
    orc = {"task_id": "t", "label": ["1"]}
    oracle.register("r-copy", orc)
    orc["label"].append("2")
    assert oracle.lookup("r-copy") == {"task_id": "t", "label": ["1"]}
    oracle.unregister("r-copy")
    oracle.unregister("r-copy")  # unknown ids are fine
    assert oracle.lookup("r-copy") is None

    def churn(n: int) -> None:
        for k in range(200):
            oracle.register(f"r-{n}-{k}", {"task_id": str(k)})
            assert oracle.lookup(f"r-{n}-{k}") == {"task_id": str(k)}
            oracle.unregister(f"r-{n}-{k}")

    threads = [threading.Thread(target=churn, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not any(oracle.lookup(f"r-{n}-199") for n in range(8))


def test_missing_oracle_or_bad_params_are_400() -> None:
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(litellm.BadRequestError, match="no task view for rollout r-none"):
        litellm.completion(
            model="sim/dbbench", messages=msgs, metadata={"harnessctl": {"rollout_id": "r-none"}}
        )
    with pytest.raises(litellm.BadRequestError, match="no task view"):
        litellm.completion(model="sim/dbbench", messages=msgs)
    with pytest.raises(litellm.BadRequestError, match="unknown param rate_typo"):
        _call(msgs, rate_typo=1.0)
    with pytest.raises(litellm.BadRequestError, match="between 0 and 1"):
        _call(msgs, skill=1.5)
    with pytest.raises(litellm.BadRequestError, match="unknown offline policy 'sim/nope'"):
        litellm.completion(model="sim/nope", messages=msgs)


def test_response_usage_id_and_zero_cost() -> None:
    msgs = [{"role": "system", "content": "x" * 10}, {"role": "user", "content": "y" * 7}]
    resp = _call(msgs)
    text = resp.choices[0].message.content
    assert "Action: Operation" in text and resp.choices[0].finish_reason == "stop"
    assert resp.usage.prompt_tokens == (3 + 4) + (2 + 4)
    assert resp.usage.completion_tokens == -(-len(text) // 4) + 4
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    assert resp.id == _call(msgs).id != _call(msgs, rid="r-other").id
    assert resp.model == "sim/dbbench"
    assert litellm.completion_cost(resp) == 0.0


def test_params_arrive_via_kwargs_or_extra_body_and_async() -> None:
    msgs = [{"role": "user", "content": "task"}]
    assert "Action: Operation" in _call(msgs).choices[0].message.content
    for kwargs in ({"rate_format": 1.0}, {"extra_body": {"rate_format": 1.0}}):
        assert "```sql" not in _call(msgs, **kwargs).choices[0].message.content
    reply = _call(msgs, extra_body={"skill": 1.0}, rate_format=0.0).choices[0].message.content
    assert "```sql" in reply

    async def go() -> str:
        meta = {"harnessctl": {"rollout_id": "r-async", "seed": 0}}
        resp = await litellm.acompletion(model="sim/dbbench", messages=msgs, metadata=meta)
        return resp.choices[0].message.content

    with oracle.registered("r-async", ORACLES[0]):
        assert "SELECT * FROM" in asyncio.run(go())
    with oracle.registered("r-async", ORACLES[0]):  # a stream runs when it is consumed
        stream = litellm.completion(
            model="sim/dbbench",
            messages=msgs,
            metadata={"harnessctl": {"rollout_id": "r-async", "seed": 0}},
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == _call(msgs).choices[0].message.content
    assert chunks[-1].usage.completion_tokens == -(-len(streamed) // 4) + 4


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": ""}],
        [{"role": "user", "content": [{"type": "text", "text": "parts"}]}],
        [{"role": "assistant", "content": "garbage"}, {"role": "user", "content": "???"}] * 7,
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": None},
            {"role": "tool", "content": "", "tool_call_id": "1"},
        ],
    ],
)
def test_odd_messages_still_get_a_well_formed_reply(messages: list[dict[str, Any]]) -> None:
    for orc in (ORACLES[0], ORACLES[20], {"task_id": "bare-minimum"}):
        for skill in (0.0, 0.5):
            text = _call(messages, orc=orc, skill=skill).choices[0].message.content
            assert text.strip()
            assert "Final Answer:" in text or "```sql" in text or skill == 0.0


def test_odd_message_objects_never_crash_the_policy() -> None:
    rates = effective_rates(0.0)
    for messages in (
        None,
        [],
        ["just text", 7, None],
        [{"role": None, "content": {"x": 1}}],
        [{"content": "no role"}, {"role": "assistant"}, {"role": "user"}],
    ):
        text = next_reply(ORACLES[5], messages, 3, rates)
        assert text.strip() and reply_kind(text) in ("sql", "answer", "bare", "prose")


@pytest.mark.parametrize(
    ("text", "rule", "expected"),
    [
        ("Reply with Action: Operation and a ```sql block, or Final Answer: [..]", "format", True),
        ("action: operation ... final answer", "format", True),
        ("Please use the right format.", "format", False),
        ("Call execute_sql with one statement, or commit_final_answer.", "format", True),
        ("Call execute_sql again.", "format", False),
        ("Your Final Answer must be a list.", "list", True),
        ('Write Final Answer: ["x"]', "list", True),
        ("Please answer properly.", "list", False),
        ("This is your LAST ROUND.", "commit", True),
        ("Final turn: commit your answer.", "commit", True),
        ("You have 1 round left.", "commit", True),
        ("No more rounds left!", "commit", True),
        ("You must now answer.", "commit", True),
        ("Give your Final Answer when ready; 5 rounds left.", "commit", False),
    ],
)
def test_detection_rules(text: str, rule: str, expected: bool) -> None:
    check = {"format": restates_format, "list": asks_for_list, "commit": commit_signal}[rule]
    assert check(text) is expected


def test_wrong_table_names_never_resolve() -> None:
    for orc in ORACLES:
        names = _plan(orc, 0, **only("identifier")).wrong_tables
        assert len(names) >= 3
        db = _db(orc)
        for name in names:
            assert orc["table_name"].casefold() not in name.casefold()
            with pytest.raises(sqlite3.OperationalError, match="no such table"):
                db.execute(f"SELECT * FROM {name}")


def test_function_calls_are_read_as_the_text_actions_they_stand_for() -> None:
    """With ``execute_sql``/``commit_final_answer`` offered the sim answers with calls, and it
    reads earlier calls as the text replies they stand for: the same decisions either way."""
    from harnessctl.envs.dbbench.sim import SimDBBench
    from harnessctl.envs.dbbench.sim_signals import calls_as_text
    from harnessctl.policies.sim_signals import offered_functions

    def call(name: str, arguments: Any) -> dict[str, Any]:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return {"id": "c1", "type": "function", "function": {"name": name, "arguments": text}}

    tools = [
        {"type": "function", "function": {"name": n}}
        for n in ("execute_sql", "commit_final_answer")
    ]
    assert offered_functions([*tools, {"type": "x"}, None]) == {
        "execute_sql",
        "commit_final_answer",
    }
    fc = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "Look.",
            "tool_calls": [call("execute_sql", {"query": "SELECT 1"})],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "[(1,)]"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("commit_final_answer", {"answers": "a, b"})],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("commit_final_answer", {"answers": ["a"]})],
        },
        {"role": "assistant", "content": None, "tool_calls": [call("execute_sql", "{not json")]},
    ]
    text = calls_as_text(fc)
    assert text[1]["content"] == "Look.\nAction: Operation\n```sql\nSELECT 1\n```"
    assert text[2] is fc[2]  # tool results stay as they are
    assert [reply_kind(m["content"]) for m in text[3:]] == ["bare", "answer", "prose"]
    rates = effective_rates(0.0)  # every mode likely on: prose, bare answers, wrong names
    for orc in ORACLES[::4]:
        for seed in (0, 1):
            said = next_reply(orc, [], seed, rates)
            made = SimDBBench().reply(orc, [], seed, {"skill": 0.0}, tools)
            if isinstance(made, str):  # prose: no call, the same text
                assert made == said and reply_kind(said) == "prose"
                continue
            (first,) = made["tool_calls"]
            message = {"role": "assistant", "content": made["content"]}
            message["tool_calls"] = [call(first["name"], first["arguments"])]
            assert calls_as_text([message])[0]["content"] == said


def test_value_mistakes_change_the_table_under_the_environments_collation(tmp_path) -> None:
    """The applicability check uses BINARY and NOCASE; the environment compares under MySQL's
    accent-insensitive collation. On the dev split every drawn mistake still changes the
    table the environment scores (so `value` sinks the episode there too)."""
    from harnessctl.envs import get_environment
    from harnessctl.envs.dbbench.database import build_database
    from harnessctl.envs.dbbench.sandbox.hxenv_dbbench import sqlcompat
    from harnessctl.envs.dbbench.sim import _value_mistake

    env = get_environment("dbbench")
    checked = 0
    for task in env.load_tasks(DEV).tasks:
        variant = _value_mistake(Task.from_oracle(env.oracle(task)))
        if variant is None:
            continue
        hashes = []
        for sql in (task.record["label"][0], variant):
            build_database(task.record, tmp_path / "db.sqlite")
            conn = sqlcompat.connect(str(tmp_path / "db.sqlite"))
            assert sqlcompat.execute(conn, sql)[0]
            hashes.append(sqlcompat.table_hash(conn, task.record["table"]["table_name"]))
            conn.close()
        assert hashes[0] != hashes[1], task.id
        checked += 1
    assert checked == 20
