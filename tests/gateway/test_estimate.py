"""The cost estimate's figures (issue #56): prices from the run's params or litellm's map,
each share's bound from the budgets, a spending cap, the measured low end, and the count of
rollouts the store does not hold yet. Pure arithmetic on real types; the store and the
requests are real (the offline sim runs the one rollout measured here)."""

from __future__ import annotations

import math

import pytest

from harnessctl.errors import ConfigError
from harnessctl.gateway.estimate import (
    CostEstimate,
    Part,
    Price,
    Usage,
    agent_part,
    measured_usage,
    price_of,
)
from tests.helpers.cli import invoke
from tests.helpers.stores import make_rollout

PRICES = {"input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5}


def test_a_price_given_as_params_is_the_runs_own():
    price = price_of("openai/local-agent", dict(PRICES))
    assert price == Price(3e-6, 1.5e-5, "params")
    assert price.per_million() == "$3.00/$15.00 per 1M input/output tokens"
    # given as strings (as a YAML file or a shell may give them) they parse the same
    assert price_of("openai/m", {k: str(v) for k, v in PRICES.items()}) == price


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"input_cost_per_token": 1e-6}, "without output_cost_per_token"),
        ({"output_cost_per_token": 1e-6}, "without input_cost_per_token"),
        ({**PRICES, "input_cost_per_token": -1}, "input_cost_per_token=-1"),
        ({**PRICES, "output_cost_per_token": "nan"}, "output_cost_per_token='nan'"),
        ({**PRICES, "output_cost_per_token": "cheap"}, "not a finite price"),
    ],
)
def test_a_bad_price_names_the_option(params, says):
    with pytest.raises(ConfigError) as caught:
        price_of("openai/m", params, option="--editor-param")
    assert caught.value.where == "--editor-param" and says in caught.value.message


def test_litellms_price_or_none_and_a_test_double_is_free():
    assert price_of("openai/gpt-4o-mini", {}) == Price(1.5e-7, 6e-7, "litellm")
    assert price_of("openai/no-such-local-model", {"api_base": "http://127.0.0.1:9/v1"}) is None
    assert price_of("sim/dbbench", {}) == Price(0.0, 0.0, "offline")


def rollouts(units=10, price=Price(1e-6, 2e-6, "params"), **kw) -> Part:
    return Part("agent", "openai/a", "rollout", units, price, max_tokens=1000, **kw)


def calls(units=3, price=Price(1e-6, 5e-6, "params"), **kw) -> Part:
    kw = {"max_input": 10_000, "max_output": 500, **kw}
    return Part("editor", "openai/e", "call", units, price, **kw)


def test_a_rollouts_bound_is_its_token_budget_at_the_higher_price():
    part = rollouts()
    assert part.unit_bound_usd == pytest.approx(1000 * 2e-6)
    assert part.bound_usd == pytest.approx(10 * 1000 * 2e-6)


def test_an_editor_calls_bound_is_its_window_and_reply_at_their_prices():
    part = calls()
    assert part.bound_usd == pytest.approx(3 * (10_000 * 1e-6 + 500 * 5e-6))
    assert calls(max_output=None).bound_usd is None  # no cap on its reply: no bound
    assert calls(price=None).bound_usd is None


def test_a_spending_cap_bounds_a_share_with_one_round_of_slack():
    each = 10_000 * 1e-6 + 500 * 5e-6
    capped = calls(units=100, cap_usd=0.05, cap_slack_units=2)
    assert capped.bound_usd == pytest.approx(0.05 + 2 * each)
    assert calls(units=1, cap_usd=5.0).bound_usd == pytest.approx(each)  # the calls are less


def test_the_sum_and_the_threshold_never_blocked_by_an_unknown_price():
    known, unknown = rollouts(), rollouts(price=None)
    both = CostEstimate((known, unknown))
    assert both.bound_usd == pytest.approx(known.bound_usd)
    assert both.unknown == [unknown]
    assert both.above(0.01) and not both.above(1.0)
    assert not CostEstimate((unknown,)).above(0.0)  # cost unknown: said, never blocks
    assert CostEstimate(()).bound_usd is None


def test_the_low_end_is_the_certain_rollouts_at_the_measured_mean():
    usage = Usage(prompt_tokens=400.0, completion_tokens=50.0, samples=7)
    part = rollouts(units=100, certain=4, usage=usage)
    assert part.low_usd == pytest.approx(4 * (400 * 1e-6 + 50 * 2e-6))
    assert rollouts(certain=4).low_usd is None  # nothing measured
    assert rollouts(usage=usage).low_usd is None  # nothing surely runs


class Rows:
    """A store's ``rollouts`` query over fixed rows (the filter is the store's own)."""

    def __init__(self, rows):
        self.rows = rows

    def rollouts(self, *, policy_id, suite):
        return [r for r in self.rows if r.policy_id == policy_id and r.suite == suite]


def test_measured_usage_is_the_mean_of_the_rollouts_that_called_the_model():
    rows = [
        make_rollout("a", policy_id="p", suite="s", model_calls=2, prompt_tokens=300,
                     completion_tokens=30),
        make_rollout("b", policy_id="p", suite="s", model_calls=1, prompt_tokens=100,
                     completion_tokens=10),
        make_rollout("c", policy_id="p", suite="s", model_calls=0),  # never reached the model
        make_rollout("d", policy_id="q", suite="s", model_calls=5, prompt_tokens=9999),
    ]  # fmt: skip
    usage = measured_usage(Rows(rows), "p", "s")
    assert usage == Usage(200.0, 20.0, 2)
    assert measured_usage(Rows(rows), "p", "other-suite") is None


def test_pending_rollouts_are_those_the_store_does_not_hold(workspace):
    from harnessctl.cli.options import eval_request, placement, policy_of
    from harnessctl.run.pending import pending_rollouts
    from harnessctl.workspace import load_workspace

    assert invoke("eval", "dbbench-base", "--task", "dev-000", "--rollouts", "1").exit_code == 0
    ws = load_workspace(workspace)
    spec = ws.load_harness("dbbench-base")
    policy = policy_of(ws, None, None, "dbbench")
    where = placement(ws, None, None, None, None)

    def pending(**fields):
        request = eval_request(ws, spec, None, policy, where, split="dev", **fields)
        return pending_rollouts(request, ws.open_store())

    assert pending(rollouts=1, task_ids=["dev-000"]) == 0  # served from the store
    assert pending(rollouts=3, task_ids=["dev-000", "dev-004"]) == 5
    assert pending(rollouts=1, max_calls=7, task_ids=["dev-000"]) == 1  # another budget
    assert pending(pairs=[("dev-000", 0), ("dev-000", 1), ("no-such", 0)]) == 1
    # offline: the sim is free, so it has no share
    request = eval_request(ws, spec, None, policy, where, split="dev")
    assert agent_part(request, 10) is None


def test_an_agents_share_reads_the_request():
    from harnessctl.policy import Policy

    class Request:  # the EvalRequest fields agent_part reads
        policy = Policy("openai/local-agent", {"api_base": "http://127.0.0.1:9/v1", **PRICES})
        max_tokens, max_calls = 2000, 5

        class suite:
            name = "s"

    part = agent_part(Request(), 6)
    assert (part.units, part.certain, part.max_tokens, part.max_calls) == (6, 6, 2000, 5)
    assert part.price == Price(3e-6, 1.5e-5, "params")
    assert math.isclose(part.bound_usd, 6 * 2000 * 1.5e-5)
