"""The hosted-model recipe (issue #56, item 5; README, "Hosted models: a recipe"): the
commands of ``examples/hosted/local-recipe.sh`` run as written against two loopback
OpenAI-compatible servers (the agent's and the editor's, through real litellm calls),
and the cost estimate of eval, evolve and profile around them: printed before the first
rollout, refused without a terminal above the threshold (exit 2, nothing ran), run with
``--yes``, and what the run recorded within the estimate's bound."""

from __future__ import annotations

import os
import re
import shlex

import pytest

from harnessctl.vcs import ensure_repo
from harnessctl.workspace import load_workspace
from tests.helpers import ROOT
from tests.helpers.cli import invoke
from tests.helpers.openai_stub import OpenAIStub

SCRIPT = ROOT / "examples" / "hosted" / "local-recipe.sh"
AGENT_PRICE = (3e-6, 1.5e-5)  # the script's -p input/output_cost_per_token
EDITOR_PRICE = (1e-6, 5e-6)  # its --editor-param ones
SHELL = {"<", ">", "||", "&&", ";", "|"}


def recipe_commands(env: dict[str, str]) -> list[list[str]]:
    """The script's ``harnessctl`` commands, as the shell would pass their arguments (its
    variables from ``env``, its redirections and ``||`` tails cut off)."""
    text = SCRIPT.read_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        if not line.strip().startswith("harnessctl "):
            continue
        for name, value in env.items():
            line = line.replace(f'"${name}"', shlex.quote(value))
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        cut = next((i for i, w in enumerate(words) if w in SHELL), len(words))
        commands.append(words[1:cut])
    return commands


def dollars(text: str, after: str) -> float:
    """The first ``$X`` amount after ``after`` in ``text``."""
    found = re.search(re.escape(after) + r".*?\$([0-9,]+\.[0-9]+)", text)
    assert found, (after, text)
    return float(found.group(1).replace(",", ""))


def priced(prompt: int, completion: int, price: tuple[float, float]) -> float:
    return prompt * price[0] + completion * price[1]


@pytest.fixture
def committed(workspace):
    """The example workspace in git, as evolve needs it."""
    (workspace / ".gitignore").write_text(".harnessctl/\n")
    ensure_repo(workspace, message="workspace")
    return workspace


def test_the_recipe_refuses_then_runs_within_its_bound(committed):
    store = load_workspace(committed).open_store()
    with OpenAIStub() as agent, OpenAIStub() as editor:
        agent.models, editor.models = ["local-agent"], ["local-editor"]
        editor.reply("no patch here", prompt_tokens=5000, completion_tokens=300)
        env = {"AGENT_BASE": agent.url, "EDITOR_BASE": editor.url}
        refused_cmd, confirmed_cmd, runs_cmd = recipe_commands(env)
        assert "--yes" not in refused_cmd and confirmed_cmd == [*refused_cmd, "--yes"]
        refused = invoke(*refused_cmd)
        assert (agent.chat_requests, editor.chat_requests) == ([], [])
        assert store.rollouts() == [] and store.attempts() == []  # nothing ran
        confirmed = invoke(*confirmed_cmd)
        editor_asked = len(editor.chat_requests)
    assert refused.exit_code == 2, refused.output
    assert "above the confirmation threshold $1" in refused.stderr and "--yes" in refused.stderr
    for said in (refused.stderr, confirmed.stderr):
        assert "estimate: agent: up to " in said and "of openai/local-agent" in said
        assert "estimate: editor: up to 1 call(s) of openai/local-editor" in said
        assert "$3.00/$15.00 per 1M input/output tokens, your price" in said
        assert "capped by --max-editor-cost $0.5" in said and "estimate: in all at most $" in said
    assert confirmed.exit_code == 0, confirmed.output
    # printed before the first rollout: ahead of the base evaluation's progress
    assert confirmed.stderr.index("estimate: ") < confirmed.stderr.index("evolve-eval")
    rows = store.rollouts()
    calls = store.calls(purpose="editor")
    assert len(rows) == 20 and all(r.model_calls >= 1 for r in rows)  # the test split, once
    assert len(calls) == editor_asked == 1
    agent_bound = dollars(confirmed.stderr, "estimate: agent:")
    editor_bound = dollars(confirmed.stderr, "estimate: editor:")
    bound = dollars(confirmed.stderr, "estimate: in all at most")
    assert bound == pytest.approx(agent_bound + editor_bound, abs=0.011)
    # what was recorded, and the same tokens at the recipe's prices, stay within the bound
    spent_agent = sum(priced(r.prompt_tokens, r.completion_tokens, AGENT_PRICE) for r in rows)
    spent_editor = sum(priced(c.prompt_tokens, c.completion_tokens, EDITOR_PRICE) for c in calls)
    assert 0 < spent_agent <= agent_bound and 0 < spent_editor <= editor_bound
    assert sum(r.cost_usd for r in rows) + sum(c.cost_usd for c in calls) <= bound
    listed = invoke(*runs_cmd)
    assert listed.exit_code == 0 and "evolve" in listed.stdout


def local_eval(url: str, *more: str) -> list[str]:
    return [
        "eval", "dbbench-base", "--task", "dev-000", "--workers", "1",
        "--policy", "openai/local-agent", "-p", f"api_base={url}",
        "-p", "api_key=sk-local-secret-0123456789", "-p", "input_cost_per_token=0.000003",
        "-p", "output_cost_per_token=0.000015", "--max-calls", "3", "--max-tokens", "3000", *more,
    ]  # fmt: skip


def test_eval_prices_a_local_model_and_says_its_measured_mean(workspace):
    with OpenAIStub() as stub:
        first = invoke(*local_eval(stub.url, "--rollouts", "1"))
        again = invoke(*local_eval(stub.url, "--rollouts", "3"))
    assert first.exit_code in (0, 1) and again.exit_code in (0, 1), again.output
    each = 3000 * AGENT_PRICE[1]
    assert (
        f"estimate: 1 rollout(s) of openai/local-agent x up to 3 calls and 3,000 tokens each: "
        f"at most ${each:,.2f} ($3.00/$15.00 per 1M input/output tokens, your price)"
    ) in first.stderr
    assert "earlier rollout" not in first.stderr  # nothing measured yet
    row = load_workspace(workspace).open_store().rollouts()[0]
    low = 2 * priced(row.prompt_tokens, row.completion_tokens, AGENT_PRICE)
    assert (
        f"estimate: 2 rollout(s) of openai/local-agent x up to 3 calls and 3,000 tokens each: "
        f"at most ${2 * each:,.2f}"
    ) in again.stderr
    assert (
        f"; about ${low:,.2f} for them at the mean of 1 earlier rollout(s) "
        f"({row.prompt_tokens:,} prompt + {row.completion_tokens:,} completion tokens)"
    ) in again.stderr
    for said in (first.output, again.output):
        assert "sk-local-secret" not in said  # a key is never printed


def test_the_flag_threshold_wins_and_is_checked(workspace):
    with OpenAIStub() as stub:
        refused = invoke(*local_eval(stub.url, "--confirm-above", "0.001"))
        assert stub.chat_requests == []
        bad = invoke(*local_eval(stub.url, "--confirm-above", "-1"))
    assert refused.exit_code == 2 and "threshold $0.001" in refused.stderr
    assert bad.exit_code == 2 and "--confirm-above" in bad.output
    assert load_workspace(workspace).open_store().rollouts() == []


def test_profile_says_its_cost_and_refuses_above_the_threshold(workspace):
    with OpenAIStub() as stub:
        policy = local_eval(stub.url)[6:16]  # the same policy; profile has no budget flags
        assert policy[0] == "--policy" and policy[-1].startswith("output_cost")
        result = invoke(
            "profile", "dbbench-base", *policy, "--split", "test", "--confirm-above", "0.01"
        )
        assert stub.chat_requests == []
    assert result.exit_code == 2, result.output
    # 20 tasks x 2 seeds, at the environment's own budgets
    assert (
        "estimate: 40 rollout(s) of openai/local-agent x up to 40 calls and 60,000" in result.stderr
    )
    assert "--yes" in result.stderr
    assert load_workspace(workspace).open_store().rollouts() == []


def test_an_editor_without_a_price_is_said_and_never_blocks(committed):
    """The sim agent is free (no share); the editor's price is unknown: said, not blocking
    even at a threshold of 0."""
    with OpenAIStub() as editor:
        editor.models = ["local-editor"]
        editor.reply("no patch here")
        result = invoke(
            "evolve", "dbbench-base", "--split", "test", "--rollouts", "1",
            "--editor", "openai/local-editor", "--editor-param", f"api_base={editor.url}",
            "--editor-param", "api_key=none", "--directions", "format-validation",
            "--rounds", "1", "--editor-retries", "0", "--max-looks", "2", "--allow-weak-gate",
            "--confirm-above", "0",
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "estimate: up to 1 call(s) of openai/local-editor" in result.stderr
    assert "price unknown to litellm" in result.stderr and "cost unknown" in result.stderr
    assert "agent" not in result.stderr.split("estimate:")[1].split("\n")[0]


def test_the_recipe_script_keeps_keys_out_of_its_commands():
    """Keys come from the environment: the recipe's commands carry none (``api_key=none``
    is what a local server is given)."""
    commands = recipe_commands({"AGENT_BASE": "http://a/v1", "EDITOR_BASE": "http://e/v1"})
    words = [w for c in commands for w in c]
    assert [w for w in words if "api_key=" in w] == ["api_key=none"] * 4
    assert not any(re.search(r"sk-[A-Za-z0-9]", w) for w in words)
    assert os.access(SCRIPT, os.R_OK)
