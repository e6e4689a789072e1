"""Bad runs refused in seconds (issue #28): the preflight of a real model (missing key,
a local server down or up), the cost line and its confirmation, nonsense options, and a
broken harness said plainly. Real CLI, real sandbox and gateway; the model server is the
loopback OpenAI stub (no network here)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from harnessctl.cli import app
from harnessctl.workspace import load_workspace
from tests.helpers.openai_stub import Fail, OpenAIStub

runner = CliRunner()


def invoke(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_a_missing_key_exits_2_in_seconds_naming_the_variable(workspace):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    cmd = [sys.executable, "-m", "harnessctl.cli", "eval", "dbbench-base", "--rollouts", "1"]
    cmd += ["--policy", "openai/gpt-4o-mini", "--task", "dev-000"]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=workspace, env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert "OPENAI_API_KEY" in done.stderr and "--policy" in done.stderr
    assert took < 30
    store = load_workspace(workspace).open_store()
    assert store.rollouts() == [] and store.attempts() == []  # nothing ran, nothing retried


def test_a_local_server_that_is_down_exits_2_naming_it(workspace):
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    result = invoke(
        "eval", "dbbench-base", "--rollouts", "1", "--task", "dev-000",
        "--policy", "openai/my-model", "-p", f"api_base={base}", "-p", "api_key=k",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "cannot reach the model's server" in result.output and base in result.output
    assert load_workspace(workspace).open_store().attempts() == []


def test_a_local_server_that_is_up_lets_the_run_proceed(workspace):
    with OpenAIStub() as stub:
        result = invoke(
            "eval", "dbbench-base", "--rollouts", "1", "--task", "dev-000", "--workers", "1",
            "--policy", "openai/stub-model", "-p", f"api_base={stub.url}", "-p", "api_key=k",
            "--json",
        )  # fmt: skip
        listed = [r for r in stub.requests if r.path.endswith("/models")]
        asked = len(stub.chat_requests)
    assert result.exit_code in (0, 1), result.output
    assert asked >= 1  # the rollout called the model
    assert not listed  # the model list is a GET: the stub records POSTs only
    rows = load_workspace(workspace).open_store().rollouts()
    assert len(rows) == 1 and rows[0].model_calls >= 1
    # price unknown for a local model: the line says so, and nothing asks
    assert "price unknown" in result.stderr


def test_a_server_that_refuses_the_key_exits_2_naming_it(workspace):
    with OpenAIStub() as stub:
        stub.models_status = 401
        result = invoke(
            "eval", "dbbench-base", "--rollouts", "1", "--task", "dev-000",
            "--policy", "openai/stub-model", "-p", f"api_base={stub.url}", "-p", "api_key=bad",
        )  # fmt: skip
        asked = len(stub.chat_requests)
    assert result.exit_code == 2, result.output
    assert "--policy" in result.output and "refused the credentials (HTTP 401)" in result.output
    assert asked == 0  # refused by the model list: no generation was asked for
    assert "bad" not in result.output.replace("--", "")  # the key itself is never echoed
    assert load_workspace(workspace).open_store().attempts() == []


def test_an_unknown_model_exits_2_with_the_servers_answer(workspace):
    # a server without a model list: the one-token call decides, and the server says 404
    unknown = Fail(404, "The model `no-such-model` does not exist", type="invalid_request_error")
    with OpenAIStub(default=unknown) as stub:
        stub.models_status = 404
        result = invoke(
            "eval", "dbbench-base", "--rollouts", "1", "--task", "dev-000",
            "--policy", "openai/no-such-model", "-p", f"api_base={stub.url}", "-p", "api_key=k",
        )  # fmt: skip
        asked = [r.body.get("max_tokens") for r in stub.chat_requests]
    assert result.exit_code == 2, result.output
    assert "--policy" in result.output and "refused" in result.output
    assert "no-such-model" in result.output and "does not exist" in result.output
    assert asked == [1]  # exactly the preflight's one-token call, no rollout behind it
    store = load_workspace(workspace).open_store()
    assert store.rollouts() == [] and store.attempts() == []


def test_offline_and_cached_runs_make_no_preflight(workspace, monkeypatch):
    from harnessctl.gateway import preflight

    calls = []
    monkeypatch.setattr(preflight, "_listed", lambda *a: calls.append(a) or True)
    monkeypatch.setattr(preflight, "missing_credentials", lambda *a: calls.append(a) or [])
    assert invoke("eval", "dbbench-base", "--rollouts", "1", "--task", "dev-000").exit_code == 0
    assert calls == []


def test_a_paid_run_above_the_threshold_needs_yes(workspace):
    with OpenAIStub() as stub:
        args = [
            "eval", "dbbench-base", "--rollouts", "2", "--task", "dev-000", "--workers", "1",
            "--policy", "openai/gpt-4o-mini", "-p", f"api_base={stub.url}", "-p", "api_key=k",
        ]  # fmt: skip
        refused = invoke(*args, env={"HARNESSCTL_CONFIRM_USD": "0.01"})
        assert stub.chat_requests == []
        below = invoke(*args, "--max-tokens", "2000", env={"HARNESSCTL_CONFIRM_USD": "0.01"})
        assert len(stub.chat_requests) >= 1, below.output
    assert refused.exit_code == 2, refused.output
    assert "--yes" in refused.output and "confirmation threshold" in refused.output
    # gpt-4o-mini's price is litellm's: 2 rollouts x the token budget at the output price
    assert "2 rollout(s) of openai/gpt-4o-mini" in refused.output and "at most $" in refused.output
    assert below.exit_code in (0, 1), below.output
    assert "2,000 tokens each: at most $0.00" in below.output  # 2 x 2,000 x $0.60/1M


def test_yes_runs_a_paid_run_above_the_threshold(workspace):
    with OpenAIStub() as stub:
        result = invoke(
            "eval", "dbbench-base", "--rollouts", "1", "--task", "dev-000", "--workers", "1",
            "--policy", "openai/gpt-4o-mini", "-p", f"api_base={stub.url}", "-p", "api_key=k",
            "--yes", env={"HARNESSCTL_CONFIRM_USD": "0"},
        )  # fmt: skip
        assert len(stub.chat_requests) >= 1
    assert result.exit_code in (0, 1), result.output


def test_the_threshold_setting_is_checked(workspace):
    with OpenAIStub() as stub:
        bad = invoke(
            "eval", "dbbench-base", "--rollouts", "1", "--task", "dev-000",
            "--policy", "openai/gpt-4o-mini", "-p", f"api_base={stub.url}", "-p", "api_key=k",
            env={"HARNESSCTL_CONFIRM_USD": "lots"},
        )  # fmt: skip
        assert stub.chat_requests == []
    assert bad.exit_code == 2 and "HARNESSCTL_CONFIRM_USD" in bad.output
    (workspace / "harnessctl.yaml").write_text("suite: examples/dbbench\nconfirm_above_usd: -1\n")
    result = invoke("eval", "dbbench-base", "--rollouts", "1", "--task", "dev-000")
    assert result.exit_code == 2 and "confirm_above_usd" in result.output


def test_unknown_task_ids_exit_2_naming_the_option(workspace):
    result = invoke("eval", "dbbench-base", "--rollouts", "1", "--task", "dev-999")
    assert result.exit_code == 2
    assert "--task" in result.output and "dev-999" in result.output
    assert load_workspace(workspace).open_store().rollouts() == []


def test_a_policy_of_another_environment_exits_2(workspace):
    result = invoke("eval", "dbbench-base", "--task", "dev-000", "--policy", "sim/alfworld")
    assert result.exit_code == 2
    assert "--policy" in result.output and "alfworld" in result.output
    result = invoke("eval", "dbbench-base", "--task", "dev-000", "--policy", "replay/alfworld")
    assert result.exit_code == 2 and "replay/dbbench" in result.output


def test_nan_inf_and_over_the_limit_values_exit_2(workspace):
    for value, says in [("nan", "finite"), ("inf", "finite"), ("1e12", "1800"), ("0", "above 0")]:
        result = invoke("eval", "dbbench-base", "--task", "dev-000", "--timeout", value)
        assert result.exit_code == 2, (value, result.output)
        assert "--timeout" in result.output and says in result.output
    result = invoke("test", "dbbench-base", "--min-drop", "nan")
    assert result.exit_code == 2 and "--min-drop" in result.output


def test_a_bad_param_of_a_simulated_policy_exits_2_before_any_rollout(workspace):
    for param, says in [
        ("skill=2", "must be between 0 and 1"),
        ("rate_bogus=0.1", "takes no parameter rate_bogus"),
        ("resample=-1", "resample=-1"),
        ("skil=0.8", "takes no parameter skil"),  # a misspelt name is refused, not ignored
    ]:
        result = invoke("eval", "dbbench-base", "--task", "dev-000", "--param", param)
        assert result.exit_code == 2, (param, result.output)
        assert "--param" in result.output and says in result.output
    result = invoke("eval", "dbbench-base", "--task", "dev-000", "--param", "skil=0.8")
    assert "rate_lose_track" in result.output and "skill" in result.output  # the known names
    replay = ["--policy", "replay/dbbench", "--param", "skill=0.8"]
    result = invoke("eval", "dbbench-base", "--task", "dev-000", *replay)
    assert result.exit_code == 2 and "takes no parameter skill" in result.output
    ok = ["--param", "skill=0.8", "--param", "temperature=0.5", "--param", "resample=1"]
    result = invoke("eval", "dbbench-base", "--task", "dev-000", "--rollouts", "1", *ok)
    assert result.exit_code == 0, result.output
    rows = load_workspace(workspace).open_store().rollouts()
    assert len(rows) == 1  # only the accepted run made a rollout


def test_a_bad_param_of_a_real_model_exits_2_offline_before_any_call(workspace):
    """Issue #41: a real model's --param values and near-miss names are refused before the
    preflight call (no server listens on the api_base: nothing was called)."""
    model = ["--policy", "hosted_vllm/m", "--param", "api_base=http://127.0.0.1:9/v1"]
    for param, says in [
        ("temperature=3", "temperature=3 is not a number in [0, 2]"),
        ("top_p=hot", "is not a number in [0, 1]"),
        ("max_tokens=0", "max_tokens=0 is not an integer >= 1"),
        ("temprature=0.5", "did you mean 'temperature'"),
        ("max_token=64", "did you mean 'max_tokens'"),
    ]:
        result = invoke("eval", "dbbench-base", "--task", "dev-000", *model, "--param", param)
        assert result.exit_code == 2, (param, result.output)
        assert "--param" in result.output and says in result.output, (param, result.output)
    assert load_workspace(workspace).open_store().rollouts() == []
    # a name the check does not know passes on to the provider (vLLM's own, say)
    from harnessctl.run.checks import check_model_params

    check_model_params("hosted_vllm/m", {"top_k": 20, "return_token_ids": True, "seed": 3})
    check_model_params("sim/dbbench", {"temperature": 9})  # a test double's own to judge


def test_an_unknown_outcome_exits_2(workspace):
    result = invoke("rollouts", "--outcome", "bogus")
    assert result.exit_code == 2
    assert "--outcome" in result.output and "harness_error" in result.output


def test_export_pool_without_suite_among_several_environments_names_suite(workspace):
    from tests.helpers import ROOT

    shutil.copytree(ROOT / "harnesses" / "alfworld-base", workspace / "harnesses" / "alfworld-base")
    result = invoke("export-pool")
    assert result.exit_code == 2
    assert "--suite is missing" in result.output and "--base" not in result.output


def test_a_harness_that_does_not_import_is_said_plainly_with_exit_1(workspace):
    dst = workspace / "harnesses" / "broken"
    shutil.copytree(workspace / "harnesses" / "dbbench-base", dst)
    (dst / "harness.yaml").write_text((dst / "harness.yaml").read_text().replace(
        "dbbench-base", "broken"))  # fmt: skip
    # it compiles (a file that does not is refused before any rollout: exit 2, file and
    # line); importing it, which happens in the sandbox, fails
    (dst / "harness.py").write_text("import no_such_module_hx\n" + (dst / "harness.py").read_text())
    result = invoke("eval", "broken", "--rollouts", "1", "--task", "dev-000", "--task", "dev-004")
    assert result.exit_code == 1, result.output
    assert "every rollout (2) ended in harness_error" in result.output
    assert "no_such_module_hx" in result.output


def test_a_missing_key_of_a_known_provider_is_found_without_litellm():
    """The providers whose key variables harnessctl knows: no litellm import (seconds under
    load), and the same variables litellm itself asks for."""
    code = (
        "import os, sys\n"
        "for k in [k for k in os.environ if k.endswith('_API_KEY')]: del os.environ[k]\n"
        "from harnessctl.gateway.preflight import missing_credentials\n"
        "print(missing_credentials('openai/gpt-4o-mini', {}), 'litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("]")[1].strip() == "False", out.stdout
    assert "OPENAI_API_KEY" in out.stdout


@pytest.mark.slow
def test_the_known_providers_keys_are_litellms(monkeypatch):
    from harnessctl.gateway import preflight
    from harnessctl.gateway.llm import get_litellm

    litellm = get_litellm()
    for provider, names in preflight.PROVIDER_KEYS.items():
        for name in names:
            monkeypatch.delenv(name, raising=False)
        model = f"{provider}/some-model"
        theirs = set(litellm.validate_environment(model=model).get("missing_keys") or [])
        assert set(preflight.missing_credentials(model, {})) == theirs, provider
        monkeypatch.setenv(names[-1], "x")
        assert preflight.missing_credentials(model, {}) == []


def test_an_llm_editor_without_its_key_stops_evolve_before_round_one(workspace):
    result = invoke("evolve", "dbbench-base", "--editor", "openai/gpt-4o-mini", "--rounds", "1")
    assert result.exit_code == 2, result.output
    assert "--editor" in result.output and "OPENAI_API_KEY" in result.output
    assert load_workspace(workspace).open_store().rollouts() == []  # nothing ran


def test_a_voter_whose_server_is_down_is_named(workspace):
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    result = invoke(
        "route", "--task", "dev-000", "--failures", "abc", "--voter", "openai/v",
        "--voter-param", f"api_base={base}",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--voter" in result.output and "cannot reach" in result.output
