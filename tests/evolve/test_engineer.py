"""The harness engineer's data and reward (issue #16): ``export-edits`` writes no empty file
and says why, exports rejected attempts and the retry turns an LLM editor saw, gives every
GRPO record the reward its own recipe realises, and makes records self-contained without a
credential in any file; ``score_patch`` scores them from a bare directory, caches, times out
to a defined score and scores a batch in parallel as it does one by one; the TRL reward
function answers GRPOTrainer's call.

One evolve round serves the module: a scripted LLM editor (the local OpenAI stub) first
answers without a patch (rejected: ``no_blocks``), then, told why, with the catalogue's
execution-recovery repair; the policy is the offline sim with an ``api_key``."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from harnessctl.evolve.dataset import (
    GRPORecord,
    SFTPromptCompletionRecord,
    SFTRecord,
    export_edits,
)
from harnessctl.evolve.directions import catalogue
from harnessctl.evolve.editors import LLMEditor, load_repairs
from harnessctl.evolve.engine import Engine, EvolveRequest
from harnessctl.evolve.engineer import (
    PatchScorer,
    ScoreCache,
    make_trl_reward,
    score_patch,
    score_patches,
)
from harnessctl.policy import Policy
from harnessctl.store import Store
from harnessctl.workspace import Workspace
from tests.helpers.evolve import committed_workspace_eval, example_workspace, isolate
from tests.helpers.openai_stub import OpenAIStub, Reply

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")

SECRET = "sk-secret-123"
EDITOR_SECRET = "sk-editor-secret-456"
NO_PATCH = "I would rather not edit anything."
BROKEN = "harness.py\n<<<<<<< SEARCH\nno such line\n=======\nx = 1\n>>>>>>> REPLACE\n"


@dataclass
class Evolved:
    ws: Workspace
    store: Store
    edits: list
    suite: Path


@pytest.fixture(scope="module")
def evolved(tmp_path_factory):
    root = tmp_path_factory.mktemp("engineer")
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, root / "home")
        ws, base, evaluation = committed_workspace_eval(
            example_workspace(root / "ws"), split="train", timeout_s=30
        )
        policy = Policy("sim/dbbench", {"api_key": SECRET, "skill": 0.5})
        [repair] = [r for r in load_repairs("dbbench") if r.id == "recovery-schema-on-error"]
        store = ws.open_store()
        with OpenAIStub() as stub:
            stub.push(Reply(NO_PATCH), Reply(repair.patch))
            editor = LLMEditor(
                "openai/editor-model", {"api_base": stub.url, "api_key": EDITOR_SECRET}
            )
            request = EvolveRequest(
                base=base,
                eval=replace(evaluation, policy=policy),
                directions=[catalogue("dbbench")["execution-recovery"]],
                editor=editor,
                rounds=1,
                batch_size=6,
                control_size=6,
                alpha=0.5,  # 2 rescues, 0 regressions: p = 0.25
            )
            Engine(request, ws, store).run()
        edits = store.edits()
        assert (edits[0].attempt, edits[0].status, edits[0].reason) == (0, "rejected", "no_blocks")
        assert edits[1].status == "accepted" and edits[1].rescues > 0, edits[1].reason
        yield Evolved(ws, store, edits, ws.root / "examples" / "dbbench")
        store.close()


def grpo(out: Path) -> list[GRPORecord]:
    return [
        GRPORecord.model_validate_json(line)
        for side in ("train", "test")
        if (out / "grpo" / f"{side}.jsonl").is_file()
        for line in (out / "grpo" / f"{side}.jsonl").read_text().splitlines()
    ]


@pytest.fixture(scope="module")
def exported(evolved, tmp_path_factory):
    """test_fraction 0: every record on train, no pair dropped; 0.5: pairs dropped."""
    outs = {}
    for fraction in (0.0, 0.5):
        out = tmp_path_factory.mktemp(f"edits{fraction}")
        export_edits(
            evolved.edits,
            out,
            test_fraction=fraction,
            store=evolved.store,
            workspace=evolved.ws,
        )
        outs[fraction] = out
    return outs


def test_cli_writes_no_empty_split_and_says_why(evolved, tmp_path):
    from harnessctl.cli import app

    out = tmp_path / "edits"
    (out / "grpo").mkdir(parents=True)
    (out / "grpo" / "test.jsonl").write_text("stale\n")  # an earlier export's
    env = {"HARNESSCTL_WORKSPACE": str(evolved.ws.root)}
    args = ["export-edits", "--out", str(out), "--test-fraction", "0"]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.jsonl"))
    assert written == [
        "grpo/train.jsonl",
        "sft/train.jsonl",
        "sft_prompt_completion/train.jsonl",
    ]
    assert all((out / name).read_text().strip() for name in written)
    manifest = json.loads((out / "manifest.json").read_text())
    why = "--test-fraction is 0: every task is on the train side"
    assert manifest["not_written"] == {
        "sft/test": why,
        "sft_prompt_completion/test": why,
        "grpo/test": why,
    }
    assert manifest["files"] == {name.removesuffix(".jsonl"): name for name in written}
    assert manifest["counts"]["grpo/train"] == 2 and manifest["counts"]["grpo/test"] == 0
    assert f"{out}/grpo/test.jsonl: not written (no record)" in result.stdout
    stderr = result.stderr.replace("\n", "")
    assert "grpo/test.jsonl has no record, so it was not written: --test-fraction is 0" in stderr
    card = (out / "README.md").read_text()  # datasets.load_dataset(out, "grpo") reads it
    grpo_config = "- config_name: grpo\n  data_files:\n  - split: train\n    path: grpo/train.jsonl"
    assert grpo_config in card
    assert "test.jsonl" not in card


def test_rejected_attempts_and_retry_turns_are_exported(evolved, exported):
    records = grpo(exported[0.0])
    rejected, accepted = sorted(records, key=lambda r: r.metadata.attempt)
    meta = rejected.metadata
    assert (meta.status, meta.accepted, meta.reason) == ("rejected", False, "no_blocks")
    assert meta.detail == "no SEARCH/REPLACE block found" and meta.retry_turns == 0
    assert rejected.reference_response == NO_PATCH
    assert rejected.reference_reward == rejected.reward.invalid_reward
    assert [m.role for m in rejected.prompt] == ["system", "user"]

    retry = accepted.prompt[2:]
    assert [(m.role, m.content) for m in retry] == [
        ("assistant", NO_PATCH),
        (
            "user",
            "Your patch was rejected: no_blocks: no SEARCH/REPLACE block found\n"
            "Send a corrected patch.",
        ),
    ]
    assert accepted.prompt[:2] == rejected.prompt
    assert (accepted.metadata.status, accepted.metadata.retry_turns) == ("accepted", 1)

    out = exported[0.0]
    [sft] = [SFTRecord.model_validate_json(x) for x in (out / "sft/train.jsonl").open()]
    [pc] = [
        SFTPromptCompletionRecord.model_validate_json(x)
        for x in (out / "sft_prompt_completion/train.jsonl").open()
    ]
    assert [(m.role, m.weight) for m in sft.messages] == [
        ("system", 0),
        ("user", 0),
        ("assistant", 0),  # the rejected patch: shown, never learnt
        ("user", 0),
        ("assistant", 1),
    ]
    assert sft.messages[-1].content == accepted.reference_response
    assert "<<<<<<< SEARCH" in sft.messages[-1].content
    assert pc.prompt == accepted.prompt
    assert [m.model_dump() for m in pc.completion] == [
        {"role": "assistant", "content": accepted.reference_response}
    ]


def test_reference_reward_is_what_the_records_own_recipe_gives(evolved, exported):
    """For every record, from its own pairs; rescored through the workspace's store (its
    rollouts are cached there), the recipe gives it back."""
    dropped = grpo(exported[0.5])
    assert any(r.reward.dropped_pairs for r in dropped)
    differs = [r for r in dropped if r.reference_reward != r.metadata.judged_reward]
    assert differs  # the judgement's reward was over pairs this record no longer has
    for record in grpo(exported[0.0]) + dropped:
        assert record.metadata.judged_pairs == (
            len(record.reward.batch) + len(record.reward.control) + record.reward.dropped_pairs
        )
        rescored = score_patch(record, record.reference_response, workspace=evolved.ws, cache=None)
        assert rescored == record.reference_reward, record.metadata


def test_reference_reward_from_the_stores_rollouts_when_the_edit_lacks_them(
    evolved, exported, tmp_path
):
    """An edit recorded without its per-pair results: the child's rollouts in the store give
    them; without the store the record is left out, and the manifest says so."""
    bare = []
    for edit in evolved.edits:
        metrics = json.loads(edit.metrics_json)
        metrics.pop("rescued", None)
        metrics.pop("pairs", None)  # as an edit recorded before the engine kept them
        bare.append(SimpleNamespace(**{**edit.model_dump(), "metrics_json": json.dumps(metrics)}))
    with_store = export_edits(bare, tmp_path / "a", test_fraction=0.5, store=evolved.store)
    assert with_store.skipped == {} and with_store.without_parent_tree == 2
    expected = {r.metadata.edit_id: r.reference_reward for r in grpo(exported[0.5])}
    assert {r.metadata.edit_id: r.reference_reward for r in grpo(tmp_path / "a")} == expected
    without = export_edits(bare, tmp_path / "b", test_fraction=0.5)
    assert without.skipped == {"reference_reward_unknown": 1}
    assert without.counts["grpo/train"] + without.counts["grpo/test"] == 1


def test_no_credential_in_any_exported_file(exported):
    for out in exported.values():
        files = [p for p in out.rglob("*") if p.is_file()]
        assert len(files) >= 4
        for path in files:
            text = path.read_text(encoding="utf-8")
            assert SECRET not in text and EDITOR_SECRET not in text, path
        for record in grpo(out):
            assert record.reward.policy_params == {"skill": 0.5}
            assert record.reward.policy_model == "sim/dbbench"


def test_a_record_scores_from_a_bare_directory_with_only_the_suite(
    evolved, exported, tmp_path, monkeypatch
):
    """No workspace, no store: the parent harness comes out of the record, the tasks from
    a copy of the suite, rollouts run in the scorer's own temporary store."""
    bare = tmp_path / "bare"
    bare.mkdir()
    suite = shutil.copytree(evolved.suite, bare / "suite")
    monkeypatch.chdir(bare)
    record = next(r for r in grpo(exported[0.5]) if r.metadata.status == "accepted")
    line = record.model_dump_json()
    (bare / "record.json").write_text(line)
    record_dict = json.loads((bare / "record.json").read_text())
    with PatchScorer(suite=suite) as scorer:
        score = scorer.assess(record_dict, record.reference_response)
        assert (score.status, score.cached) == ("evaluated", False)
        assert score.reward == record.reference_reward
        assert score.verdict.child_hash == record.metadata.child_hash  # the same child
        ran = scorer.store.rollouts()
        tasks = len(record.reward.batch) + len(record.reward.control)
        # the smoke pair, then parent and child on every task at the recipe's fresh seeds
        assert len(ran) == 1 + 2 * tasks * len(record.reward.seeds or [])
        assert scorer.assess(line, NO_PATCH).reward == record.reward.invalid_reward
    assert sorted(p.name for p in bare.iterdir()) == ["record.json", "suite"]  # nothing left


def test_score_patch_caches_by_record_and_completion(evolved, exported, tmp_path):
    record = next(r for r in grpo(exported[0.0]) if r.metadata.status == "accepted")
    cache = ScoreCache()
    first = score_patch(record, record.reference_response, workspace=evolved.ws, cache=cache)
    assert first == record.reference_reward and len(cache) == 1
    fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}", tmp_path / "trajectories")
    as_trl = [{"role": "assistant", "content": record.reference_response}]
    again = score_patch(
        record.model_dump(mode="json"), as_trl, suite=evolved.suite, store=fresh, cache=cache
    )
    assert again == first
    assert fresh.rollouts() == []  # served from the cache: nothing ran
    uncached = score_patch(record, as_trl, suite=evolved.suite, store=fresh, cache=None)
    assert uncached == first and fresh.rollouts()  # the same work, done
    fresh.close()


def test_a_timeout_gives_the_defined_score_and_stops_the_scoring(evolved, exported, tmp_path):
    record = next(r for r in grpo(exported[0.0]) if r.metadata.status == "accepted")
    pairs = len(record.reward.batch) + len(record.reward.control)
    fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}", tmp_path / "trajectories")
    with PatchScorer(suite=evolved.suite, store=fresh, timeout_s=0.01, workers=1) as scorer:
        score = scorer.assess(record, record.reference_response)
        assert (score.status, score.reward) == ("timeout", record.reward.invalid_reward)
        assert len(scorer.cache) == 0  # a timeout is not kept: a later call may finish
        scorer.close(wait_s=120)
    assert len(fresh.rollouts()) < 1 + pairs  # cancelled: not every pair ran
    with PatchScorer(suite=evolved.suite, store=fresh, timeout_s=0.01, timeout_reward=-1.0) as s:
        assert s.score(record, record.reference_response) == -1.0
        s.close(wait_s=120)
    fresh.close()


def test_parallel_scoring_equals_sequential_scoring(evolved, exported):
    records = grpo(exported[0.0])
    batch, completions = [], []
    for record in records:
        for text in (record.reference_response, NO_PATCH, BROKEN, record.reference_response):
            batch.append(record)
            completions.append(text)
    one_by_one = [
        score_patch(r, c, workspace=evolved.ws, cache=None)
        for r, c in zip(batch, completions, strict=True)
    ]
    parallel = score_patches(batch, completions, workspace=evolved.ws, max_workers=4, cache=None)
    assert parallel == one_by_one
    references = [r.reference_reward for r in records]
    assert one_by_one[0::4] == references == one_by_one[3::4]
    assert set(one_by_one[1::4]) == set(one_by_one[2::4]) == {records[0].reward.invalid_reward}


def test_trl_reward_function_answers_grpo_trainers_call(evolved, exported):
    """The call TRL makes, after trl 1.16.0 ``trl/trainer/grpo_trainer.py``
    (``GRPOTrainer.__init__``: the name from ``get_callable_name``, i.e. ``__name__``;
    ``_calculate_rewards``: every dataset column but prompt/completion/completion_ids,
    repeated per generation, as keyword lists, plus ``trainer_state``, ``log_extra`` and
    ``log_metric``; ``_generate``: conversational completions are
    ``[{"role": "assistant", "content": text}]``). None becomes NaN there: never returned."""
    rows = [
        json.loads(line)  # a dataset row: the JSON line's columns
        for line in (exported[0.0] / "grpo" / "train.jsonl").read_text().splitlines()
    ]
    num_generations = 2
    inputs = [row for row in rows for _ in range(num_generations)]
    prompts = [x["prompt"] for x in inputs]
    texts = [
        x["reference_response"] if i % num_generations == 0 else BROKEN
        for i, x in enumerate(inputs)
    ]
    completions = [[{"role": "assistant", "content": text}] for text in texts]
    keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
    reward_kwargs = {key: [example[key] for example in inputs] for key in keys}
    extra, metrics = {}, {}
    reward_kwargs["trainer_state"] = None
    reward_kwargs["log_extra"] = lambda column, values: extra.setdefault(column, values)
    reward_kwargs["log_metric"] = lambda name, value: metrics.setdefault(name, value)

    reward_func = make_trl_reward(workspace=evolved.ws, max_workers=2)
    try:
        name = getattr(reward_func, "__name__", type(reward_func).__name__)
        assert name == "harness_engineer_reward"
        output = reward_func(
            prompts=prompts,
            completions=completions,
            completion_ids=[[1, 2, 3] for _ in completions],
            **reward_kwargs,
        )
    finally:
        reward_func.close()
    assert len(output) == len(prompts) and None not in output
    assert output[0::2] == [row["reference_reward"] for row in rows]
    assert output[1::2] == [row["reward"]["invalid_reward"] for row in rows]
    assert len(extra["harness_verdict"]) == len(output)
    assert extra["harness_verdict"][1].startswith("rejected: does_not_apply")
    assert 0.0 <= metrics["harness_engineer_reward/valid_fraction"] <= 1.0


def test_one_real_grpo_trainer_step_on_the_exported_records_calls_the_reward(
    exported, evolved, tmp_path
):
    """TRL's own GRPOTrainer (trl 1.16.0) takes one step on CPU over the exported GRPO
    records (loaded as the export's docs say), with a tiny randomly initialised model and a
    tokenizer trained here on those records' prompts: nothing comes from a model hub. The
    reward is make_trl_reward's: TRL calls it once per generation batch with each row's
    recipe, and every completion gets the score its recipe realises (the random model's
    text is no patch: the recipe's invalid_reward), which is what TRL logs as the reward."""
    try:
        import datasets
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as exc:
        from tests.helpers.ci import unavailable

        unavailable("TRL's GRPOTrainer", f"trl does not import here: {exc}")
    from tests.helpers.tiny_model import make_model_dir

    data = datasets.load_dataset(str(exported[0.0]), "grpo", split="train")
    rows = list(data)
    corpus = [m["content"] for row in rows for m in row["prompt"]]
    model_dir = make_model_dir(
        tmp_path / "model", weights=True, corpus=corpus, vocab_size=2000, max_positions=32768
    )
    calls = []
    reward_func = make_trl_reward(workspace=evolved.ws, max_workers=2)

    def recorded(**kwargs):
        out = reward_func(**kwargs)
        calls.append((kwargs, out))
        return out

    recorded.__name__ = reward_func.__name__
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        max_steps=1,
        learning_rate=1e-3,
        use_cpu=True,
        bf16=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        seed=0,
    )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(str(model_dir)),
        processing_class=AutoTokenizer.from_pretrained(str(model_dir)),
        reward_funcs=[recorded],
        args=config,
        train_dataset=data,
    )
    try:
        trainer.train()
    finally:
        reward_func.close()
    assert trainer.state.global_step == 1
    assert len(calls) == 1
    kwargs, out = calls[0]
    assert len(kwargs["completions"]) == len(out) == 2
    by_recipe = {json.dumps(row["reward"], sort_keys=True): row for row in rows}
    for recipe, completion, value in zip(kwargs["reward"], kwargs["completions"], out, strict=True):
        row = by_recipe[json.dumps(recipe, sort_keys=True)]  # one of the exported records
        assert completion[0]["role"] == "assistant"
        assert value == score_patch(recipe, completion, workspace=evolved.ws)
        assert value == row["reward"]["invalid_reward"]  # random text is not a patch
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert logged and logged[0]["reward"] == pytest.approx(sum(out) / len(out))
    # both completions scored alike: a group without signal, which GRPO's loss says (0)
    assert logged[0]["frac_reward_zero_std"] == 1.0 and logged[0]["loss"] == 0.0
    assert logged[0]["harness_engineer_reward/valid_fraction"] == 0.0
