"""Every LLM path of harnessctl against a real model: SmolLM2-135M-Instruct served by
llama.cpp on 127.0.0.1 (``harnessctl.localmodel``, the ``local-model`` extra), through litellm
and the gateway exactly as a provider's model; one rollout with Qwen2.5-Coder-0.5B from the
catalogue (fetched once, 491 MB). A small model fails the tasks; these tests assert behaviour
(outcomes recorded, ledgers complete, tokens real, rejections classified and fed back,
nothing crashing), never the model's quality. Bounded: few tasks, short replies, one editor
round."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from harnessctl.outcomes import FAILURE_OUTCOMES
from harnessctl.workspace import load_workspace
from tests.helpers import ROOT
from tests.helpers.ci import unavailable
from tests.helpers.cli import cli, cli_json
from tests.helpers.workspaces import isolated_workspace

try:
    import xllamacpp  # noqa: F401  (the `local-model` extra; .ci/run installs it)
except ImportError:  # CI must run these: it fails there instead of skipping
    if os.environ.get("CI"):
        raise
    pytest.skip("pip install -e '.[local-model]' to run these", allow_module_level=True)

from harnessctl.localmodel import LocalModel, model_dir

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")

MODEL_DIR = model_dir()  # read before the tests isolate HOME: the model is fetched once
DBBENCH = ["--suite", "examples/dbbench", "--split", "dev"]
TASKS = ["--task", "dev-000", "--task", "dev-021", "--task", "dev-045"]
#: The default wall-clock limit: it charges the harness only its own time, never the CPU
#: model's. Short replies and few calls keep each test bounded (outcomes then include
#: context_limit).
SLOW = ["--rollouts", 1, "--max-calls", 4, "--param", "max_tokens=96"]


@pytest.fixture(scope="module")
def model():
    with LocalModel(model_dir=MODEL_DIR) as served:
        yield served


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("realmodel") / "ws"
    with isolated_workspace(tmp_path_factory.mktemp("home"), root, workers=2):
        yield root


def real(model) -> list:
    return ["--policy", model.model, "--param", f"api_base={model.api_base}"]


def _check_rollouts(ws, model, store_url: str | None = None) -> list:
    db = load_workspace(ws).open_store(store_url)
    rows = [r for r in db.rollouts() if r.policy_id.startswith(f"{model.model}#")]
    assert rows
    for row in rows:
        assert row.outcome in (*FAILURE_OUTCOMES, "success"), row.outcome
        assert row.outcome != "harness_error", db.trajectory(row).result
        assert row.outcome != "timeout", row.id  # the model's time is not the harness's
        trajectory = db.trajectory(row)
        assert trajectory.calls, row.id  # the ledger holds every model call
        answered = [c for c in trajectory.calls if c.status == "ok"]
        assert answered and all(c.prompt_tokens > 0 for c in answered), trajectory.calls
        # the only refusal: the call budget (--max-calls), after the answered calls
        refused = trajectory.calls[len(answered) :]
        assert all(c.status == "budget_exceeded" for c in refused), refused
        assert sum(c.completion_tokens for c in trajectory.calls) > 0
        assert "api_base" in trajectory.policy.params  # recorded, no secret among them
    return rows


def _get(url: str) -> dict | list:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def test_the_server_serves_the_model_under_its_alias_and_caches_prompts(model):
    """The one name the server lists is the model string's (the ready line's); a second
    turn finds its conversation's prefix in the slot's cache."""
    assert model.model == "hosted_vllm/smollm2"
    assert [m["id"] for m in _get(f"{model.api_base}/models")["data"]] == ["smollm2"]
    turn = [{"role": "user", "content": "Name one SQL keyword."}]
    body = {"model": "smollm2", "messages": turn, "max_tokens": 8, "temperature": 0}
    first = _post(f"{model.api_base}/chat/completions", body)
    turn += [first["choices"][0]["message"], {"role": "user", "content": "Another one."}]
    second = _post(f"{model.api_base}/chat/completions", {**body, "messages": turn})
    assert second["timings"]["cache_n"] >= first["timings"]["prompt_n"] - 1
    assert second["model"] == "smollm2"


def test_a_catalogue_model_runs_a_dbbench_rollout(ws):
    """Qwen2.5-Coder-0.5B from the catalogue (fetched once, verified) on two slots: one
    DBBench rollout end to end, recorded with a valid outcome (success not asserted)."""
    with LocalModel(model="qwen2.5-coder-0.5b", model_dir=MODEL_DIR, parallel=2, ctx=4096) as qwen:
        assert qwen.model == "hosted_vllm/qwen2.5-coder-0.5b"
        models = _get(f"{qwen.api_base}/models")["data"]
        assert [m["id"] for m in models] == ["qwen2.5-coder-0.5b"]
        slots = _get(qwen.api_base.removesuffix("/v1") + "/slots")
        assert [s["n_ctx"] for s in slots] == [4096, 4096]  # ctx is per slot
        other = f"sqlite:///{ws.parent / 'qwen.db'}"
        args = ["eval", "dbbench-base", *DBBENCH, "--task", "dev-000", "--store", other]
        args += ["--rollouts", 1, "--max-calls", 6, "--param", "max_tokens=192"]
        data = cli_json(ws, *args, *real(qwen))
        assert data["executed"] == 1 and data["infra_failed"] == 0, data
        (row,) = _check_rollouts(ws, qwen, other)
    assert row.task_id == "dev-000" and isinstance(row.success, bool)


def test_eval_dbbench_with_the_real_model(ws, model):
    data = cli_json(ws, "eval", "dbbench-base", *DBBENCH, *TASKS, *SLOW, *real(model))
    assert data["executed"] == 3 and data["infra_failed"] == 0
    _check_rollouts(ws, model)


def test_replies_cut_at_the_token_limit_and_function_calling_with_the_real_model(ws, model):
    """Replies cut short are recorded as such and classified like any unusable reply; the
    function-calling protocol offers its tools to the real server (which accepts them)."""
    other = f"sqlite:///{ws.parent / 'cut.db'}"
    args = ["eval", "dbbench-base", *DBBENCH, "--task", "dev-000", "--store", other]
    data = cli_json(ws, *args, *SLOW, *real(model), "--param", "max_tokens=3")
    assert data["executed"] == 1 and data["infra_failed"] == 0
    (row,) = _check_rollouts(ws, model, other)
    calls = load_workspace(ws).open_store(other).trajectory(row).calls
    assert {c.finish_reason for c in calls} == {"length"} and calls[0].completion_tokens <= 3
    args = ["eval", "dbbench-fc", *DBBENCH, "--task", "dev-045", "--store", other]
    data = cli_json(ws, *args, *SLOW, *real(model))
    assert data["executed"] == 1 and data["infra_failed"] == 0
    rows = _check_rollouts(ws, model, other)
    fc = next(r for r in rows if r.task_id == "dev-045")
    calls = load_workspace(ws).open_store(other).trajectory(fc).calls
    assert calls[0].tools and calls[0].finish_reason in ("stop", "length", "tool_calls")


def test_eval_on_docker_with_the_real_model(ws, model):
    from harnessctl.errors import HarnessctlError
    from harnessctl.sandbox.docker import connect

    try:
        connect().close()
    except HarnessctlError as exc:
        unavailable("the real model on docker", f"no docker engine: {exc}")
    build = ROOT / "scripts" / "build-runtime-image.sh"
    done = subprocess.run([str(build)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        unavailable("the real model on docker", f"no runtime image: {done.stderr[-500:]}")
    other = f"sqlite:///{ws.parent / 'docker.db'}"
    args = ["eval", "dbbench-base", *DBBENCH, "--task", "dev-021", *SLOW, *real(model)]
    data = cli_json(ws, *args, "--sandbox", "docker", "--store", other)
    assert data["executed"] == 1 and data["infra_failed"] == 0
    rows = _check_rollouts(ws, model, other)
    assert {json.loads(r.isolation_json)["backend"] for r in rows} == {"docker"}


def test_eval_alfworld_with_the_real_model(ws, model):
    try:
        import alfworld  # noqa: F401
    except ImportError:
        unavailable(
            "the real model on ALFWorld",
            "the alfworld extra is not installed: pip install -e '.[alfworld]'",
        )
    games = ["--task", "look_at_obj_in_light-Bowl-None-DeskLamp-301.T20190909_150719_492274"]
    args = ["eval", "alfworld-base", "--suite", "examples/alfworld", "--split", "dev", *games]
    data = cli_json(ws, *args, *SLOW, *real(model))
    assert data["executed"] == 1 and data["infra_failed"] == 0
    rows = [r for r in _check_rollouts(ws, model) if r.task_id.startswith("look_at")]
    trajectory = load_workspace(ws).open_store().trajectory(rows[0])
    assert trajectory.steps[0].kind == "reset"  # the host-served game was played


def test_one_evolve_round_with_the_real_model_as_editor(ws, model):
    args = ["evolve", "dbbench-base", "--suite", "examples/dbbench"]
    args += ["--directions", "format-validation", "--rounds", 1, "--rollouts", 1]
    args += ["--batch", 2, "--control", 1, "--editor-retries", 1, "--policy", "sim/dbbench"]
    editor = ["--editor", model.model, "--editor-param", f"api_base={model.api_base}"]
    data = cli_json(ws, *args, *editor, "--editor-param", "max_tokens=256")
    edits = data["edits"]
    assert [e["attempt"] for e in edits] == [0, 1]  # the rejection was retried once
    db = load_workspace(ws).open_store()
    rows = {e.attempt: e for e in db.edits(evolve_id=data["evolve_id"])}
    for edit in rows.values():
        assert edit.status in ("rejected", "accepted"), edit.status
        if edit.status == "rejected":
            assert edit.reason, edit  # classified: no_blocks, search_not_found, ...
        assert edit.prompt_tokens > 0 and edit.completion_tokens > 0 and edit.response
    if rows[0].status == "rejected":  # the retry's prompt carries the rejection back
        assert rows[0].reason in rows[1].prompt, rows[1].prompt[-2000:]


@pytest.mark.timeout(900)  # an evolve, a profile, a vote and a rescue: 300 s ran out under load
def test_router_voting_and_the_pool_rescue_with_the_real_model(ws, model):
    from harnessctl.policy import Policy
    from harnessctl.pool import EndpointPolicy, Pool, rescue_group

    evolved = cli_json(
        ws, "evolve", "dbbench-base", *DBBENCH[:2], "--rounds", 1, "--rollouts", 1,
        "--directions", "format-validation,execution-recovery",
    )  # fmt: skip
    names = sorted(v["name"] for v in evolved["best"].values())
    assert names
    cli_json(ws, "profile", "dbbench-base", *names, *DBBENCH[:2], "--rollouts", 1)
    db = load_workspace(ws).open_store()
    failed = next(r for r in db.rollouts(policy_id="sim/dbbench") if not r.success)
    voter = ["--voter", model.model, "--voter-param", f"api_base={model.api_base}"]
    args = ["--task", failed.task_id, "--failures", failed.id, "--k", 2, "--voter-timeout", 120]
    ranked = cli_json(ws, "route", *args, *voter)
    (vote,) = ranked["voters"]
    assert vote["model"] == model.model and (vote["ok"] or vote["error"])
    assert ranked["top"]  # a voter that answers nonsense never breaks the ranking
    out = ws.parent / "pool"
    cli(ws, "export-pool", "--name", "rm", "--out", out, "--base", "dbbench-base", *DBBENCH[:2],
        "--include-unreproduced")  # fmt: skip
    from harnessctl.suite import load_suite

    task = load_suite(ws / "examples" / "dbbench").all_tasks.by_id()[failed.task_id]
    policy = Policy(model.model, {**model.params, "max_tokens": 96})
    # the trainer's view: token ids and logprobs as the server returned them
    endpoint = EndpointPolicy(model.api_base, model.model, {"max_tokens": 48}, tokens=True)
    with Pool.load(out) as pool:
        group = [pool.base.rollout(task, policy, seed=0)]
        result = rescue_group(pool, task, group, endpoint, k=2, seed=0, max_workers=2)
    assert result.routed and result.attempted  # fresh rollouts under the siblings
    for output in [*group, *result.attempted]:
        assert output.outcome != "infra_error" and output.usage, output
        assert all(u.get("prompt_tokens", 0) > 0 for u in output.usage)
    root = model.api_base.removesuffix("/v1")
    for output in result.attempted:
        for call in output.calls:  # every id the server reported, counted as it counted them
            assert len(call.prompt_ids) == call.prompt_tokens
            assert len(call.completion_ids) == len(call.logprobs) == call.completion_tokens
            assert all(lp <= 0 for lp in call.logprobs)
            text = _post(root + "/detokenize", {"tokens": call.completion_ids})["content"]
            # the ids include the end-of-turn token the server stopped on, when it did
            assert text.removesuffix("<|im_end|>").strip() == call.reply.strip()
        seq = output.tokens()
        assert seq.append_only or "rewrote its context" in seq.reason, seq.reason
        if seq.append_only:
            assert sum(seq.response_mask) == sum(c.completion_tokens for c in output.calls)
            assert len(seq.logprobs) == len(seq.response_ids) == len(seq.response_mask)


def _post(url: str, body: dict) -> dict:
    import urllib.request

    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_replies_a_real_server_can_give_are_recorded_and_classified(ws, model):
    """Provoked from the real server (its own sampling constraints, not a stub): an empty
    reply (the end-of-turn token forced first), unicode, a reply that runs to the server's
    reply limit, an unterminated SQL block. Each is recorded as the server gave it and
    classified as the harness's failure or answer; none crashes anything."""
    other = f"sqlite:///{ws.parent / 'provoked.db'}"
    eos = json.dumps({"2": 100})  # <|im_end|> first: the model says nothing
    unicode = 'root ::= "Action: Answer\\nFinal Answer: [\\"Привет 数据 🚀\\"]"'
    long = 'root ::= "x" root'  # never complete: only the reply limit ends it
    broken = 'root ::= "Action: Operation\\n```sql\\nSELECT (((" [a-z ]*'
    cases = {
        "dev-000": ["--param", f"logit_bias={eos}"],
        "dev-021": ["--param", f"grammar={unicode}", "--param", "max_tokens=96"],
        "dev-045": ["--param", f"grammar={long}", "--param", "max_tokens=400"],
        "dev-003": ["--param", f"grammar={broken}", "--param", "max_tokens=24"],
    }
    db = load_workspace(ws).open_store(other)
    for task, params in cases.items():
        args = ["eval", "dbbench-base", *DBBENCH, "--task", task, "--store", other]
        data = cli_json(ws, *args, "--rollouts", 1, "--max-calls", 2,
                        *real(model), *params)  # fmt: skip
        assert data["executed"] == 1 and data["infra_failed"] == 0, data
    rows = {r.task_id: r for r in db.rollouts()}
    calls = {t: db.trajectory(r).calls for t, r in rows.items()}
    empty = calls["dev-000"][0]
    assert (
        empty.status == "ok" and empty.reply == "" and rows["dev-000"].outcome == "invalid_format"
    )
    said = calls["dev-021"][0].reply
    assert "Привет 数据 🚀" in said and rows["dev-021"].outcome == "wrong_answer"
    shown = cli(ws, "show", rows["dev-021"].id, "--store", other).output
    assert "Привет 数据 🚀" in shown
    longest = calls["dev-045"][0]
    assert longest.finish_reason == "length" and longest.completion_tokens == 400
    assert longest.reply == "x" * len(longest.reply) and len(longest.reply) >= 400
    assert rows["dev-045"].outcome == "invalid_format"
    assert calls["dev-003"][0].reply.startswith("Action: Operation\n```sql\nSELECT (((")
    assert rows["dev-003"].outcome == "invalid_format"


def test_a_server_that_dies_mid_run_is_an_infra_error_and_the_rerun_completes(ws):
    """The server killed while a run is under way: rollouts already finished stay stored,
    the rest are infrastructure errors (retried, then exit 3, no task outcome stored); the
    same command against the server back on the same port finishes them."""
    import socket
    import sys
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    other = f"sqlite:///{ws.parent / 'midrun.db'}"
    tasks = ["--task", "dev-000", "--task", "dev-021"]
    fast = ["--rollouts", 1, "--max-calls", 2, "--param", "max_tokens=48"]
    args = ["eval", "dbbench-base", *DBBENCH, *tasks, *fast, "--workers", 1, "--store", other]
    args += ["--policy", "hosted_vllm/smollm2", "--param", f"api_base=http://127.0.0.1:{port}/v1"]
    db = load_workspace(ws).open_store(other)
    command = [sys.executable, "-m", "harnessctl.cli", *map(str, args)]
    with LocalModel(model_dir=MODEL_DIR, port=port):
        run = subprocess.Popen(
            command, cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and run.poll() is None and not db.rollouts():
            time.sleep(0.5)
    output, _ = run.communicate(timeout=300)
    finished = {r.id: r.outcome for r in db.rollouts()}
    assert len(finished) == 1, output[-2000:]  # finished before the kill: kept
    assert run.returncode == 3 and "failed on infrastructure" in output, output[-2000:]
    assert {a.outcome for a in db.attempts()} == {"infra_error"}
    with LocalModel(model_dir=MODEL_DIR, port=port):
        done = subprocess.run(command, cwd=ws, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = db.rollouts()
    assert len(rows) == 2 and {r.id: r.outcome for r in rows if r.id in finished} == finished


def test_a_model_server_down_before_the_run_is_refused_in_seconds(ws):
    """The server gone before the run (stopped here): the preflight finds nothing listening
    at api_base and the run stops with exit 2 naming it (issue #28), before any rollout or
    retry; nothing is stored. A server that dies mid-run is an infrastructure error (exit 3,
    the test above)."""
    import time

    with LocalModel(model_dir=MODEL_DIR) as doomed:
        api_base, name = doomed.api_base, doomed.model
    other = f"sqlite:///{ws.parent / 'dead.db'}"
    args = ["eval", "dbbench-base", *DBBENCH, "--task", "dev-000", *SLOW, "--store", other]
    started = time.monotonic()
    result = cli(ws, *args, "--policy", name, "--param", f"api_base={api_base}", code=2)
    assert time.monotonic() - started < 30
    assert "cannot reach the model's server" in result.output, result.output[-2000:]
    assert api_base in result.output
    db = load_workspace(ws).open_store(other)
    assert db.rollouts() == [] and db.attempts() == []
