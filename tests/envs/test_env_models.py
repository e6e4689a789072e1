"""The environment contract's model access (``harnessctl.envs.ModelAccess``), as the gateway
implements it for a rollout (``Gateway.model_access``): an episode's own calls are recorded
apart from the agent's (``env_calls``, caller ``env:<purpose>``), never counted in the agent's
budget, their credentials redacted; a failing call raises after it is recorded. The whole
rollout path (a host-served episode calling a model through its ``models``) is
tests/envs/tau2/test_tau2_user_model.py. In process, with a stand-in completer: ~1 s."""

from __future__ import annotations

import pytest

from harnessctl.envs import ModelAccess, ModelReply
from harnessctl.gateway import Budget, Gateway, llm
from harnessctl.runtime.client import BudgetExceeded, GatewayClient
from tests.helpers.gateway import ASK, fake_completer

KEY = "sk-env-secret-7788"


def test_env_calls_are_recorded_apart_and_outside_the_budget():
    completer = fake_completer("env says hi", tokens=(100, 20))
    with Gateway(completer=completer) as gw:
        token = gw.open_rollout(
            "r1", model="sim/agent", params={}, budget=Budget(max_calls=1, max_tokens=200)
        )
        models = gw.model_access(token)
        assert isinstance(models, ModelAccess)
        tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
        for _ in range(3):  # 360 tokens, 3 calls: over the agent's budget, were they counted
            reply = models.complete(
                ASK, purpose="judge", model="openai/judge", tools=tools, api_key=KEY, seed=3
            )
        assert reply == ModelReply("env says hi", [], 100, 20, 0.0, "openai/judge")
        sent = completer.seen[0]  # type: ignore[attr-defined]
        assert sent["model"] == "openai/judge" and sent["params"]["tools"] == tools
        assert sent["params"]["api_key"] == KEY  # the provider gets the key
        assert sent["meta"]["harnessctl"]["caller"] == "env:judge"
        client = GatewayClient(gw.address, token)
        assert client.chat(ASK).content == "env says hi"  # the agent's one call still goes
        with pytest.raises(BudgetExceeded):  # and its budget is its own: one call
            client.chat(ASK)
        ledger = gw.close_rollout(token)
    assert [c.caller for c in ledger.calls] == ["agent", "agent"]
    assert [c.status for c in ledger.calls] == ["ok", "budget_exceeded"]
    assert ledger.total_tokens == 120 and len(completer.seen) == 4  # type: ignore[attr-defined]
    assert [(c.index, c.caller) for c in ledger.env_calls] == [(i, "env:judge") for i in range(3)]
    call = ledger.env_calls[0]
    assert (call.model, call.reply, call.prompt_tokens, call.tools) == (
        "openai/judge",
        "env says hi",
        100,
        tools,
    )
    assert call.params == {"api_key": "***", "seed": 3}


def test_a_failing_env_call_is_recorded_then_raises_without_the_key():
    def refuse(model, messages, params, *, metadata, timeout_s, retries, backoff_s):
        raise llm.ModelRequestError(f"bad key {params['api_key']}", attempts=1, status_code=401)

    with Gateway(completer=refuse) as gw:
        token = gw.open_rollout("r2", model="sim/agent", params={}, budget=Budget())
        models = gw.model_access(token)
        with pytest.raises(llm.ModelRequestError):
            models.complete(ASK, purpose="user", model="openai/user", api_key=KEY)
        with pytest.raises(ValueError, match="purpose"):
            models.complete(ASK, purpose="User Sim", model="openai/user")
        ledger = gw.close_rollout(token)
    [call] = ledger.env_calls
    assert (call.caller, call.status) == ("env:user", "bad_request")
    assert call.error is not None and KEY not in call.error and "***" in call.error
    assert ledger.calls == [] and ledger.infra_error is None
