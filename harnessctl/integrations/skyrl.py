"""SkyRL: a generator that rescues all-fail GRPO groups inside ``generate``.

Follows SkyRL's generator contract of ``skyrl`` 0.4.0 (``skyrl/train/generators/base.py``,
``skyrl/train/trainer.py``, ``skyrl/train/utils/trainer_utils.py``: ``validate_generator_output``)
and of the legacy ``skyrl-train`` 0.3.1 (``skyrl_train/generators/base.py``). Nothing of SkyRL
is imported (it requires Python >= 3.12); its tests run against skyrl 0.4.0's own types,
``validate_generator_output`` and GRPO advantage in an environment of its own. Install it by
overriding ``BasePPOExp.get_generator`` (``examples/trainers/skyrl_generator.py``).

SkyRL's trainer awaits ``generate`` with the inference engines awake and puts them to sleep
after it returns, so the rescue runs inside it: the inner generator's batch first; then each
group (rows sharing ``trajectory_ids[i].instance_id``) whose every reward (a float, or the sum
of a per-token list) is <= 0 is re-rolled under the pool's Top-k siblings against the same
endpoint, with token capture (``EndpointPolicy(tokens=True)``), at most ``max_concurrency``
rollouts at a time. ``mix`` says which rows of a rescued group get fresh rollouts
(:mod:`harnessctl.pool.sampler`): under ``keep-failures``, the default, the first
``n - n // 2`` rows do and the last ``n // 2`` keep their base failures, so the group's rewards
vary and GRPO's advantage on it is not zero; under ``replace`` every row does. Rows are
replaced only when a fresh rollout succeeded. A fresh rollout that fails outside the harness
(the endpoint down, a refused configuration) raises ``RolloutInfraError``: the step stops
rather than train on a rollout that never ran.

Every per-row field of a replaced row comes from the one sibling rollout that replaces it:
``prompt_token_ids`` (its first call's prompt), ``response_ids`` and ``loss_masks`` (its
stitched calls: 1 on the policy's tokens, 0 on what the harness added), ``rollout_logprobs``
(only when the batch has them; 0.0 under mask 0), ``rewards`` (in the batch's shape: a float,
or per token with the reward on the last token), ``stop_reasons`` (the last call's finish
reason), ``trajectory_generation_times`` and ``trajectory_time_splits`` (its model and
environment time), ``env_metrics`` (``{}``: the environment's metrics do not describe a pool
rollout) and ``is_last_step`` (True). ``trajectory_ids`` stay the group's.

A rescued group is kept as it was when one of its fresh rollouts cannot be one row: its
harness rewrote its context, so its calls are several sequences (counted
``harnessctl/rescue_not_append_only``), or the server returned no token ids or logprobs
(``harnessctl/rescue_no_tokens``, and a warning: serve with vLLM, which returns them).
Rescued rows obey the generator's own rules (``generator_cfg`` of the wrapped
``SkyRLGymGenerator``, as ``skyrl_gym_generator.py`` applies them to its rows): a fresh
rollout one of whose calls had a prompt longer than ``max_input_length`` is one SkyRL would
have stopped before that call, so it cannot be a row (counted
``harnessctl/rescue_over_max_input_length``, group kept); ``zero_reward_on_non_stop`` sets
the reward of a row whose stop reason is not ``stop`` to 0 and ``apply_overlong_filtering``
zeroes its loss mask (``generators/utils.py``: ``apply_overlong_filtering``); a group left
with no positive reward after those rules is kept (``harnessctl/rescue_no_reward_after_rules``).

A batch is left alone when it is an eval batch, a step-wise batch (rows are turns, not
trajectories) or carries per-row fields a pool rollout cannot fill (MoE routing, sampler
support, images, a key this module does not know): counted
``harnessctl/rescue_skipped_step_wise`` and ``harnessctl/rescue_skipped_fields``.

The counts go into ``rollout_metrics``, which SkyRL's trainer logs, with the batch's
:class:`~harnessctl.pool.RescueMetrics` computed from the rewards as spliced (after the rules
above): ``harnessctl/rescue_groups``, ``_all_fail``, ``_rescued``, ``_rescued_zero_variance``
(rescued groups whose rewards are all equal: GRPO trains nothing on them),
``_rescued_rows`` and ``_rescued_mean_abs_advantage``. ``last_metrics`` holds them too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import HarnessctlError
from ..pool import EndpointPolicy, NoTokenIds, RolloutOutput
from ..pool.advantage import RescueMetrics, rescue_metrics
from ..pool.rows import TASK_KEY, decode_task
from ..pool.sampler import DEFAULT_MIX, check_mix
from ..pool.trainer import BatchRescue, arescue_batch

_log = logging.getLogger(__name__)

#: GeneratorOutput's per-row fields this module fills for a replaced row
#: (``trajectory_time_splits``: a dict of per-row lists).
FILLED = (
    "prompt_token_ids",
    "response_ids",
    "loss_masks",
    "rewards",
    "rollout_logprobs",
    "stop_reasons",
    "trajectory_generation_times",
    "trajectory_time_splits",
    "env_metrics",
    "is_last_step",
)
#: Fields that are not per row, or that stay the group's.
KEPT = ("rollout_metrics", "trajectory_ids")
#: The batch's sampling parameters (vLLM's names) the rescue's calls reuse, unless ``params``.
SAMPLING = ("temperature", "top_p", "max_tokens")
PREFIX = "harnessctl/"


def task_from_extras(row: dict[str, Any], key: str = TASK_KEY) -> Any:
    """The default ``task_of``: the row's ``env_extras[key]`` decoded
    (:func:`harnessctl.pool.rows.decode_task`: the JSON string of the task, which a parquet
    column holds whatever the record's types, or a record dict in rows made in memory)."""
    extras = row.get("env_extras") or {}
    if key not in extras:
        raise HarnessctlError(
            f"row {row['index']} (instance {row['uid']!r}) has no env_extras[{key!r}]: put "
            "the task there (harnessctl.pool.rows.encode_task), or pass task_of"
        )
    return decode_task(extras[key])


class RescuingGenerator:
    """A SkyRL generator: ``inner``'s output with its all-fail groups rescued (module doc).

    ``endpoint`` is the inference server's OpenAI base URL (ending ``/v1``) or an object with
    ``get_endpoint_url()`` (SkyRL's inference engine client; ``/v1`` is added); by default
    ``inner.inference_engine_client``. ``model`` is the name it serves the policy under
    (``resolve_policy_model_name(cfg)``). ``task_of(row)`` gives a row's task (a harnessctl
    Task or raw record) from ``{"index", "uid", "prompt", "env_class", "env_extras",
    "reward"}``; by default ``env_extras["harnessctl_task"]``. ``params`` are the rescue's
    sampling parameters (default: the batch's temperature, top_p and max_tokens). Step ``s``
    (``batch_metadata.global_step``) seeds its groups from ``seed + 1_000_000 * s``.
    ``generator_cfg`` is SkyRL's generator config whose ``max_input_length``,
    ``zero_reward_on_non_stop`` and ``apply_overlong_filtering`` the rescued rows obey; by
    default ``inner.generator_cfg``. ``mix`` is ``"keep-failures"`` (the default) or
    ``"replace"`` (module doc).
    """

    def __init__(
        self,
        inner: Any,
        pool: Any,
        *,
        model: str,
        endpoint: str | Any | None = None,
        task_of: Callable[[dict[str, Any]], Any] = task_from_extras,
        params: dict[str, Any] | None = None,
        api_key: str = "EMPTY",
        k: int = 2,
        max_concurrency: int = 4,
        seed: int = 0,
        generator_cfg: Any = None,
        mix: str = DEFAULT_MIX,
    ) -> None:
        self.inner = inner
        self.mix = check_mix(mix)
        self.rules = Rules.of(
            generator_cfg if generator_cfg is not None else getattr(inner, "generator_cfg", None)
        )
        self.pool = pool
        self.model = model
        self.endpoint = endpoint
        self.task_of = task_of
        self.params = params
        self.api_key = api_key
        self.k = k
        self.max_concurrency = max_concurrency
        self.seed = seed
        self.calls = 0
        #: The last batch's rescue (its fresh rollouts, kept or not, are in ``results``).
        self.last_rescue: BatchRescue | None = None
        #: The last rescued batch's metrics, from its rows as spliced.
        self.last_metrics: RescueMetrics | None = None

    async def generate(self, input_batch: dict[str, Any], disable_tqdm: bool = False) -> dict:
        if disable_tqdm:  # the fully async trainer's; skyrl-train 0.3.1 has no such parameter
            output = await self.inner.generate(input_batch, disable_tqdm=True)
        else:
            output = await self.inner.generate(input_batch)
        self.calls += 1
        meta = input_batch.get("batch_metadata")
        if getattr(meta, "training_phase", "train") == "eval" or not output["response_ids"]:
            return output
        counts: dict[str, Any] = {"rescue_skipped_step_wise": 0, "rescue_skipped_fields": 0}
        rows = len(output["response_ids"])
        if rows != len(input_batch["prompts"]):
            counts["rescue_skipped_step_wise"] = 1
            return _with_metrics(output, counts)
        unknown = [
            key
            for key, value in output.items()
            if key not in FILLED + KEPT and isinstance(value, list) and len(value) == rows
        ]
        if unknown:
            _log.warning("no rescue: a pool rollout cannot fill the per-row fields %s", unknown)
            counts["rescue_skipped_fields"] = 1
            return _with_metrics(output, counts)
        step = getattr(meta, "global_step", None)
        started = time.monotonic()
        rescue = await arescue_batch(
            self.pool,
            self._samples(input_batch, output),
            self._policy(input_batch),
            task_of=self.task_of,
            convert=lambda out, sample: out,
            k=self.k,
            mix=self.mix,
            seed=self.seed + 1_000_000 * (self.calls - 1 if step is None else step),
            max_concurrency=self.max_concurrency,
        )
        self.last_rescue = rescue
        counts.update(_splice(output, input_batch, rescue, self.rules))
        self.last_metrics = _metrics(output, input_batch, rescue, counts.pop("spliced"))
        counts.update(self.last_metrics.as_dict(prefix="rescue_"))
        counts["rescue_seconds"] = round(time.monotonic() - started, 3)
        return _with_metrics(output, counts)

    def _samples(self, input_batch: dict[str, Any], output: dict) -> list[dict[str, Any]]:
        ids = input_batch.get("trajectory_ids")
        if ids is None:
            raise HarnessctlError(
                "the batch has no trajectory_ids: rows are grouped by their instance_id "
                "(SkyRL's prepare_generator_input sets them)"
            )
        extras = input_batch.get("env_extras") or [None] * len(ids)
        classes = input_batch.get("env_classes") or [None] * len(ids)
        return [
            {
                "index": i,
                # TrajectoryID is an unhashable dataclass: the group key is its instance_id
                "uid": tid.instance_id,
                "prompt": input_batch["prompts"][i],
                "env_class": classes[i],
                "env_extras": extras[i],
                "reward": _total(output["rewards"][i]),
            }
            for i, tid in enumerate(ids)
        ]

    def _policy(self, input_batch: dict[str, Any]) -> EndpointPolicy:
        params = self.params
        if params is None:
            sampling = input_batch.get("sampling_params") or {}
            params = {k: sampling[k] for k in SAMPLING if sampling.get(k) is not None}
        return EndpointPolicy(
            self._base_url(), self.model, dict(params), api_key=self.api_key, tokens=True
        )

    def _base_url(self) -> str:
        if isinstance(self.endpoint, str):
            return self.endpoint
        client = self.endpoint or getattr(self.inner, "inference_engine_client", None)
        if client is None:
            raise HarnessctlError(
                "no endpoint for the rescue: pass endpoint= (the server's OpenAI base URL, or "
                "the inference engine client)"
            )
        return client.get_endpoint_url().rstrip("/") + "/v1"


@dataclass(frozen=True)
class Rules:
    """The rules of SkyRL's generator config that its rows obey (see the module doc)."""

    max_input_length: int | None = None
    zero_reward_on_non_stop: bool = False
    apply_overlong_filtering: bool = False

    @classmethod
    def of(cls, cfg: Any) -> Rules:
        """Read from SkyRL's ``GeneratorConfig`` (a dataclass, an OmegaConf config or a dict)."""
        if cfg is None:
            return cls()

        def get(name: str, default: Any) -> Any:
            value = cfg.get(name, default) if hasattr(cfg, "get") else getattr(cfg, name, default)
            return default if value is None else value

        limit = get("max_input_length", None)
        return cls(
            max_input_length=int(limit) if limit is not None else None,
            zero_reward_on_non_stop=bool(get("zero_reward_on_non_stop", False)),
            apply_overlong_filtering=bool(get("apply_overlong_filtering", False)),
        )


def _total(reward: Any) -> float:
    return float(sum(reward)) if isinstance(reward, list) else float(reward)


def _splice(output: dict, input_batch: dict, rescue: BatchRescue, rules: Rules) -> dict[str, Any]:
    """Put each rescued group's fresh rows into ``output`` in place (module doc); the counts,
    and under ``spliced`` the positions in its group of the rows each spliced group got."""
    counts: dict[str, Any] = {
        "rescue_over_max_input_length": 0,
        "rescue_no_reward_after_rules": 0,
        "rescue_extra_rollouts": rescue.extra_rollouts,
        "rescue_not_append_only": 0,
        "rescue_no_tokens": 0,
    }
    spliced: dict[Any, list[int]] = {}
    per_token = isinstance(output["rewards"][0], list)
    with_logprobs = bool(output.get("rollout_logprobs"))
    ids = input_batch["trajectory_ids"]
    for uid in rescue.rescued_uids:
        where = [i for i, tid in enumerate(ids) if tid.instance_id == uid]
        result = rescue.results[uid]
        # only the rows the mix gave fresh rollouts; keep-failures leaves the rest as they were
        built = [_row(result.group[r], per_token, with_logprobs, rules) for r in result.rows]
        failed = [b for b in built if isinstance(b, str)]
        rows = [b for b in built if isinstance(b, dict)]
        if failed:
            counts[f"rescue_{failed[0]}"] += 1
            if failed[0] == "no_tokens":
                _log.warning(
                    "group %r rescued but kept: a fresh rollout has no token ids or logprobs "
                    "(the server must return them, as vLLM does)", uid
                )  # fmt: skip
            continue
        if not any(_total(row["rewards"]) > 0 for row in rows):
            counts["rescue_no_reward_after_rules"] += 1
            continue
        for r, row in zip(result.rows, rows, strict=True):
            i = where[r]
            for key, value in row.items():
                if key == "trajectory_time_splits":
                    for name, times in (output.get(key) or {}).items():
                        times[i] = value.get(name, 0.0)
                elif output.get(key) is not None:
                    output[key][i] = value
        spliced[uid] = list(result.rows)
    counts["spliced"] = spliced
    return counts


def _metrics(
    output: dict, input_batch: dict, rescue: BatchRescue, spliced: dict[Any, list[int]]
) -> RescueMetrics:
    """The batch's RescueMetrics from its rewards as spliced (the rules applied)."""
    groups: dict[Any, list[int]] = {}
    for i, tid in enumerate(input_batch["trajectory_ids"]):
        groups.setdefault(tid.instance_id, []).append(i)
    rewards = [_total(r) for r in output["rewards"]]
    rescued = [([rewards[i] for i in groups[uid]], rows) for uid, rows in spliced.items()]
    return rescue_metrics(len(groups), len(rescue.tried_uids), rescued)


def _row(
    out: RolloutOutput, per_token: bool, with_logprobs: bool, rules: Rules
) -> dict[str, Any] | str:
    """One GeneratorOutput row from one rollout, under SkyRL's rules, or why it cannot be one."""
    try:
        seq = out.tokens()
    except NoTokenIds:
        return "no_tokens"
    if not seq.append_only:
        return "not_append_only"
    if not seq.response_ids or (with_logprobs and seq.logprobs is None):
        return "no_tokens"
    longest = max(len(sample.prompt_ids) for sample in seq.samples)
    if rules.max_input_length is not None and longest > rules.max_input_length:
        return "over_max_input_length"
    n = len(seq.response_ids)
    stop = out.finish_reason or "stop"
    reward = float(out.reward)
    if rules.zero_reward_on_non_stop and stop != "stop":
        reward = 0.0
    mask = list(seq.response_mask)
    if rules.apply_overlong_filtering and stop != "stop":
        mask = [0] * n
    llm = sum(c.latency_s for c in out.calls)
    env = sum(s.latency_s for s in out.trajectory.steps) if out.trajectory else 0.0
    return {
        "prompt_token_ids": list(seq.prompt_ids),
        "response_ids": list(seq.response_ids),
        "loss_masks": mask,
        "rewards": [0.0] * (n - 1) + [reward] if per_token else reward,
        "rollout_logprobs": list(seq.logprobs or []),
        "stop_reasons": stop,
        "trajectory_generation_times": llm + env,
        "trajectory_time_splits": {"llm": llm, "env": env},
        "env_metrics": {},
        "is_last_step": True,
    }


def _with_metrics(output: dict, counts: dict[str, Any]) -> dict:
    metrics = dict(output.get("rollout_metrics") or {})
    metrics.update({PREFIX + key: value for key, value in counts.items()})
    output["rollout_metrics"] = metrics
    return output
