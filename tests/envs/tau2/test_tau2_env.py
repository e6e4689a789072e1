"""The ``tau2`` environment in process: task list files, the public material, the scripted
user, and the gold replayed through an episode scored exactly as tau2's own evaluator scores
the gold conversation (and the empty one)."""

from __future__ import annotations

import json
import os

import pytest

try:
    import tau2  # noqa: F401  (the `tau2` extra; .ci/run installs it)
except ImportError:  # CI must run these: it fails there instead of skipping
    if os.environ.get("CI"):
        raise
    pytest.skip("pip install -e '.[tau2]' to run these", allow_module_level=True)

from harnessctl.envs import ModelAccess, ModelReply, get_environment
from harnessctl.envs.tau2 import AGENT_TOOLS, RESPOND, Tau2Environment, tau2_task
from harnessctl.envs.tau2.episode import evaluate
from harnessctl.envs.tau2.gold import reference_simulation
from harnessctl.envs.tau2.package import domain_tasks, new_environment
from harnessctl.envs.tau2.tasks import make_task
from tests.helpers import ROOT
from tests.helpers.tau2 import NOWHERE
from tests.helpers.tau2 import replay as _replay

TASKS = ROOT / "examples" / "tau2" / "tasks"
#: Scoring a host-served episode reads the episode, not the task directory.


@pytest.fixture(scope="module")
def env() -> Tau2Environment:
    return Tau2Environment()


def test_task_files_select_tasks_by_domain_and_split(env):
    loaded = env.load_tasks(TASKS)
    assert loaded.problems == []
    assert len(loaded.tasks) == 18
    by_domain = {d: [t for t in loaded.tasks if t.record["domain"] == d] for d in ("airline",)}
    assert [t.id for t in by_domain["airline"]] == [
        f"airline-{i}" for i in (16, 24, 26, 32, 35, 44)
    ]
    categories = {t.category for t in loaded.tasks}
    assert "airline:communicate+db" in categories and "telecom:env_assertion" in categories
    telecom = [t for t in loaded.tasks if t.record["domain"] == "telecom"]
    assert all(t.id.startswith("telecom-") and "|" not in t.id for t in telecom)
    assert len({t.id for t in loaded.tasks}) == 18
    # tau2's own split: every selected task is in tau2's test split
    test_ids = {str(t.id) for t in domain_tasks("retail", "test")}
    assert {t.record["tau2_id"] for t in loaded.tasks if t.record["domain"] == "retail"} <= test_ids


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("domain: bank\n", "domain: must be one of airline, retail, telecom, got 'bank'"),
        ("domain: airline\nsplit: dev\n", "split: airline has the splits base, test, train"),
        ("domain: airline\nids: ['0', 'nope']\n", "ids[1]: airline split base has no task 'nope'"),
        ("domain: airline\nlimit: 3\n", "limit: unknown field"),
        ("[1, 2\n", "(file): not readable YAML"),
    ],
)
def test_a_broken_task_file_is_a_problem_naming_file_and_field(env, tmp_path, text, message):
    (tmp_path / "a.yaml").write_text("domain: airline\nsplit: test\nids: ['16']\n")
    (tmp_path / "b.yaml").write_text(text)
    loaded = env.load_tasks(tmp_path)
    assert [t.id for t in loaded.tasks] == ["airline-16"]
    (problem,) = loaded.problems
    assert problem.file == str(tmp_path / "b.yaml")
    assert message in problem.message


def test_the_tools_are_tau2s_and_the_kind_resolves_by_entry_point():
    names = {n for d in ("airline", "retail", "telecom") for n in _tool_names(d)}
    assert set(AGENT_TOOLS) == names and len(AGENT_TOOLS) == len(names)
    resolved = get_environment("tau2")
    assert isinstance(resolved, Tau2Environment)
    assert resolved.tools[0] == RESPOND
    assert get_environment("tau2", user="openai/gpt-4o").user == "openai/gpt-4o"
    with pytest.raises(ValueError, match="user must be 'scripted' or a litellm model"):
        get_environment("tau2", user="")
    with pytest.raises(ValueError, match="model-backed user only"):
        get_environment("tau2", user="scripted", user_params={"temperature": 1})


def _tool_names(domain: str) -> list[str]:
    return [t.name for t in new_environment(domain).get_tools()]


def test_prepare_writes_the_policy_and_tool_schemas_and_no_gold(env, tmp_path):
    task = next(t for t in env.load_tasks(TASKS).tasks if t.id == "retail-42")
    env.prepare(task, tmp_path)
    written = json.loads((tmp_path / "task.json").read_text())
    assert set(written) == {"task_id", "env", "domain", "instruction", "policy", "tools"}
    assert written["policy"] == new_environment("retail").get_policy()
    assert [s["function"]["name"] for s in written["tools"]] == _tool_names("retail")
    text = (tmp_path / "task.json").read_text()
    scenario = task.record["task"]["user_scenario"]["instructions"]
    criteria = task.record["task"]["evaluation_criteria"]
    for secret in (scenario["reason_for_call"], scenario["known_info"]):
        assert secret not in text
    for action in criteria["actions"]:
        assert json.dumps(action["arguments"]) not in text
    assert "evaluation_criteria" not in text and "user_scenario" not in text


@pytest.mark.slow
def test_the_scripted_user_follows_its_rules(env):
    task = next(t for t in env.load_tasks(TASKS).tasks if t.id == "airline-16")
    episode = env.open_episode(task, 0)
    first = episode.reset()
    scenario = task.record["task"]["user_scenario"]["instructions"]
    assert first.observation.startswith(scenario["reason_for_call"].strip()[:40])
    assert not first.done and first.info["from"] == "user"
    asked = episode.step(RESPOND, "Shall I look up your reservation?", None)
    assert asked.observation == "Yes, please go ahead." and not asked.done
    tool = episode.step("get_user_details", "", {"user_id": "nobody_0"})
    assert tool.info == {"from": "tool", "error": tool.observation} and not tool.done
    bye = episode.step(RESPOND, "That is all I can do for you.", None)
    assert bye.done and bye.info["termination"] == "user_stop"
    assert "###STOP###" in bye.observation
    assert env.score(task, NOWHERE, None, episode).success is False


def _stop_at_once(env, task):
    episode = env.open_episode(task, 0)
    episode.reset()
    episode.step(RESPOND, "###STOP###", None)
    return env.score(task, NOWHERE, None, episode)


# telecom's databases load in milliseconds: all 114 tasks of its base split; airline's and
# retail's take ~0.8 s per load (ten loads per task here), so the first two of the example
# suite's each (tests/envs/tau2/test_tau2_e2e.py replays their test split through the
# rollout path; the whole splits' counts are in docs/tau2.md, from this check run over every task:
# HARNESSCTL_TEST_TAU2_ALL=1)
@pytest.mark.slow
@pytest.mark.parametrize("domain", ["airline", "retail", "telecom"])
def test_the_gold_replayed_scores_as_tau2_scores_the_gold_and_the_empty_run(env, domain):
    if domain == "telecom" or os.environ.get("HARNESSCTL_TEST_TAU2_ALL"):
        chosen = [t.model_dump(mode="json") for t in domain_tasks(domain, "base")]
    else:
        tasks = env.load_tasks(TASKS / f"{domain}.yaml").tasks[:2]
        chosen = [t.record["task"] for t in tasks]
    counts = {"gold": 0, "replay": 0, "empty_zero": 0}
    for record in chosen:
        task = make_task(domain, "base", record, "test")
        t2 = tau2_task(task)
        gold = evaluate(domain, t2, reference_simulation(domain, t2, True))
        empty = evaluate(domain, t2, reference_simulation(domain, t2, False))
        replayed, stopped = _replay(env, task), _stop_at_once(env, task)
        if gold["reward"] == 1.0:
            counts["gold"] += 1
            assert replayed.success, (task.id, replayed.detail)
            counts["replay"] += 1
        assert stopped.detail["reward"] == empty["reward"], task.id
        assert stopped.success is (empty["reward"] == 1.0)
        counts["empty_zero"] += empty["reward"] == 0.0
    assert counts["gold"] == counts["replay"] == len(chosen)
    assert counts["empty_zero"] >= 1


def test_task_from_record_checks_the_record(env):
    from harnessctl.errors import ConfigError

    record = domain_tasks("airline", "test")[0].model_dump(mode="json")
    task = env.task_from_record({"domain": "airline", "task": record}, task_id="x")
    assert task.id == "x" and task.category == "airline:communicate+db"
    with pytest.raises(ConfigError, match="domain"):
        env.task_from_record({"domain": "bank", "task": record})
    with pytest.raises(ConfigError, match="task"):
        env.task_from_record({"domain": "airline", "task": {"id": "1", "user_scenario": 3}})


def test_the_model_user_is_taus_user_simulator_calling_through_the_given_access(env):
    """The episode's side of the model-access hook: tau2's UserSimulator prompt and tools, its
    one model call made through ``complete`` (here a scripted stand-in for the model)."""
    from harnessctl.envs.tau2.episode import Tau2Episode
    from harnessctl.envs.tau2.user import ModelUser

    replies = [
        {"content": "My phone shows no service."},
        {
            "content": None,
            "tool_calls": [{"id": "u1", "name": "check_status_bar", "arguments": {}}],
        },
        {"content": "It shows airplane mode. ###STOP###"},
    ]
    seen: list[tuple[list[dict], list[dict] | None]] = []

    def complete(messages, tools):
        seen.append((messages, tools))
        return replies[len(seen) - 1]

    task = next(t for t in env.load_tasks(TASKS).tasks if t.record["domain"] == "telecom")
    episode = Tau2Episode("telecom", tau2_task(task), lambda t, e: ModelUser(t, e, complete))
    assert episode.reset().observation == "My phone shows no service."
    last = episode.step(RESPOND, "Please look at your status bar.", None)
    assert last.done and last.info["termination"] == "user_stop"
    assert last.observation == "It shows airplane mode. ###STOP###"
    system = seen[0][0][0]
    assert system["role"] == "system" and "<scenario>" in system["content"]
    reason = task.record["task"]["user_scenario"]["instructions"]["reason_for_call"]
    assert reason.strip()[:30] in system["content"]
    assert "check_status_bar" in {t["function"]["name"] for t in seen[0][1] or []}
    tool_results = [m for m in seen[2][0] if m["role"] == "tool"]
    assert len(tool_results) == 1 and "Airplane Mode" in tool_results[0]["content"]
    assert env.score(task, NOWHERE, None, episode).detail["termination"] == "user_stop"


class _Access(ModelAccess):
    """A scripted stand-in for the rollout's model access (the gateway's is
    tests/envs/test_env_models.py; the whole path tests/envs/tau2/test_tau2_user_model.py)."""

    def __init__(self, replies: list[ModelReply]) -> None:
        self.replies, self.seen = replies, []

    def complete(self, messages, *, purpose, model, tools=None, **params):
        self.seen.append((messages, purpose, model, tools, params))
        return self.replies[len(self.seen) - 1]


def test_env_options_user_binds_taus_user_to_the_episodes_model_access(tmp_path):
    """``user: <model>``: the episode's user is tau2's, its calls made through
    ``episode.models`` as ``purpose="user"`` with the model and ``user_params``; the
    provider's OpenAI-shaped tool calls become the user's tool calls."""
    env = get_environment("tau2", user="openai/u", user_params={"api_base": "http://x"})
    task = next(t for t in env.load_tasks(TASKS).tasks if t.record["domain"] == "telecom")
    call = {
        "id": "u1",
        "type": "function",
        "function": {"name": "check_status_bar", "arguments": "{}"},
    }
    access = _Access(
        [
            ModelReply("My phone shows no service."),
            ModelReply("", tool_calls=[call], cost_usd=0.01),
            ModelReply("It shows airplane mode. ###STOP###"),
        ]
    )
    episode = env.open_episode(task, 7)
    with pytest.raises(RuntimeError, match="model access"):
        episode.reset()  # no session gave it one
    episode.models = access
    assert episode.reset().observation == "My phone shows no service."
    last = episode.step(RESPOND, "Please look at your status bar.", None)
    assert last.done and last.observation == "It shows airplane mode. ###STOP###"
    _, purpose, model, tools, params = access.seen[0]
    assert (purpose, model) == ("user", "openai/u")
    assert params == {"seed": 7, "temperature": 0.0, "api_base": "http://x"}
    assert "check_status_bar" in {t["function"]["name"] for t in tools or []}
    results = [m for m in access.seen[2][0] if m["role"] == "tool"]
    assert len(results) == 1 and "Airplane Mode" in results[0]["content"]
    assert env.score(task, NOWHERE, None, episode).detail["termination"] == "user_stop"


def test_a_calculate_bomb_is_a_tool_error_at_once_and_other_answers_are_taus(env):
    """tau2's ``calculate`` evals its expression in the host process: ``9**9**9`` would hold
    the interpreter for minutes. Through an episode it is a tool error within a second, and
    the conversation goes on; ordinary expressions get tau2's own answers, and the tool's
    schema is tau2's."""
    import time

    from harnessctl.envs.tau2.package import tau2 as tau2_package

    raw = tau2_package().registry.get_env_constructor("airline")()
    guarded = new_environment("airline")
    for expression in ("2+2", "12.5 * 3 - 1", "(100 - 15) / 3", "2**-3", "9**99", "7 // 2"):
        assert guarded.use_tool("calculate", expression=expression) == raw.use_tool(
            "calculate", expression=expression
        )
    schemas = {t.name: t.openai_schema for t in raw.get_tools()}
    assert {t.name: t.openai_schema for t in guarded.get_tools()} == schemas

    task = next(t for t in env.load_tasks(TASKS).tasks if t.record["domain"] == "airline")
    episode = env.open_episode(task, 0)
    episode.reset()
    for bomb in ("9**9**9", "(10**5000)*(10**5000)*(10**5000)", "2**(2**40)"):
        start = time.monotonic()
        out = episode.step("calculate", "", {"expression": bomb})
        assert time.monotonic() - start < 1.0, bomb
        assert "too large" in out.observation and not episode.done, out
    assert "4.0" in episode.step("calculate", "", {"expression": "2+2"}).observation
