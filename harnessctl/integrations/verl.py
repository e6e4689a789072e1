"""verl (0.9): rescue all-fail GRPO groups while the rollout servers are awake.

Importing this module imports verl; it follows ``verl/experimental/agent_loop/agent_loop.py``,
``verl/workers/rollout/llm_server.py``, ``verl/workers/rollout/router.py`` and
``verl/protocol.py`` of verl 0.9.1, the version its tests run. Two pieces, wired by
configuration (examples/trainers/verl_agent_loop.py has the whole command)::

    trainer.use_v1=False                  # verl's DataProto trainer (see below)
    +actor_rollout_ref.rollout.agent.agent_loop_manager_class=harnessctl.integrations.verl.RescueAgentLoopManager
    actor_rollout_ref.rollout.agent.agent_loop_config_path=rescue.yaml   # registers the loop below
    # environment: HARNESSCTL_POOL=pools/dbbench-pool (the frozen pool, verified on load)

- :class:`RescueAgentLoopManager` runs verl's own ``generate_sequences`` first, then, still
  inside it (verl >= 0.8 puts the replicas to sleep only after it returns), finds every
  ``uid`` group whose rows all scored <= 0 (``rm_scores``: the reward loop must score inside
  the agent loop, verl's default when no colocated reward model is used), routes each to the
  pool's Top-k siblings, and sends rows of it back to its agent-loop workers with
  ``agent_name = "harnessctl_rescue"``: under the default ``keep-failures`` mix the first
  half of the group's rows (the rest keep their failed base attempts, so a rescued group's
  rewards vary and GRPO's advantage on it is not zero), under ``replace`` every row
  (``HARNESSCTL_RESCUE_MIX``; :mod:`harnessctl.pool.sampler` says why). Those rows are
  replaced, in place, only when at least one fresh rollout succeeded and every one gave a
  usable token sequence. REMAX's greedy baseline rows (``__do_sample__`` false, the group's
  ``uid``) are no attempt of the group: they are neither counted nor replaced. Each step's
  :class:`~harnessctl.pool.RescueMetrics` (groups, all-fail, rescued, rescued with zero
  reward variance, mean |GRPO advantage| of the rescued rows) land in ``last_rescue`` and in
  the output's ``meta_info["timing"]``, which verl's trainer logs as ``timing_s/...``.
  ``generate_sequences`` is wrapped in verl's ``auto_await``, as verl's own is: the trainer
  calls it without ``await``. verl 0.9's default trainer (``trainer.use_v1=True``) is the
  TransferQueue trainer, which hands the manager a ``TensorDict`` and reads the samples from
  the queue; this manager does not feed the queue, so it refuses that trainer when it is
  built and asks for ``trainer.use_v1=False``.
- :class:`HarnessRescueAgentLoop` (``harnessctl_rescue``) plays one such row: one rollout of
  the row's task under the sibling and seed the manager chose, against a replica's
  OpenAI-compatible endpoint with token capture, and returns verl's ``AgentLoopOutput``
  built from that one rollout: its prompt ids, response ids and mask (1 on the policy's
  tokens, 0 on what the harness added), its logprobs, its reward. verl then pads and batches
  it like any other row, so every tensor of a replaced row comes from the same sibling
  rollout. A rollout that cannot be such a row (no token ids, a rewritten context, no
  logprobs while the trainer asks for them, a first prompt longer than
  ``rollout.prompt_length``) comes back as a placeholder row shaped like a real one and
  marked unusable, and its group is kept as it was.

The replicas' HTTP servers bind a free port when they start, so the endpoints are found at
run time: the addresses the trainer's load balancer holds (the ``LLMServerManager``'s
``server_addresses``), asked of it through the manager's ``llm_client``; the rescue rows are
spread over them. ``HARNESSCTL_RESCUE_ENDPOINT`` (comma-separated base URLs) overrides that,
for a router or proxy in front of the replicas. The calls name the model as each server
serves it (``GET /v1/models``, once per endpoint: verl starts vLLM on the model's local copy
or under a served name, not on ``model.path``; :func:`served_model_name`).

The row's task is its ``extra_info["harnessctl_task"]`` unless ``task_key`` names another
``extra_info`` key: a JSON string (``examples/trainers/verl_agent_loop.py``'s ``to_verl_rows``
writes it; :mod:`harnessctl.pool.rows` says why a string), decoded here into the Task or the
raw record of the pool's environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopManager,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)
from verl.protocol import DataProto
from verl.utils.ray_utils import auto_await

from ..pool import EndpointPolicy, RolloutOutput, load_pool
from ..pool.advantage import rescue_metrics
from ..pool.rows import TASK_KEY, decode_task
from ..pool.sampler import DEFAULT_MIX, RescueResult, check_mix, plan_group
from ..pool.tokens import NoTokenIds, TokenSequence

AGENT_NAME = "harnessctl_rescue"
SLOT = "harnessctl_rescue"  # the non-tensor column a rescue row carries (JSON)
ENV_POOL = "HARNESSCTL_POOL"
ENV_ENDPOINT = "HARNESSCTL_RESCUE_ENDPOINT"
ENV_MIX = "HARNESSCTL_RESCUE_MIX"
DO_SAMPLE = "__do_sample__"  # verl's per-row flag; false on REMAX's greedy baseline rows
V1_REFUSED = (
    "harnessctl's RescueAgentLoopManager works with verl's DataProto trainer only: set "
    "trainer.use_v1=False (verl 0.9's default, the TransferQueue trainer, reads its samples "
    "from the queue, which this manager does not feed)"
)


def task_of(extra_info: Any, task_key: str = TASK_KEY) -> Any:
    """The row's task: ``extra_info[task_key]`` decoded (:func:`harnessctl.pool.rows.decode_task`:
    the JSON string ``to_verl_rows`` writes, or a record dict in rows made in memory)."""
    info = extra_info if isinstance(extra_info, dict) else {}
    if task_key not in info:
        raise KeyError(
            f"the row's extra_info has no {task_key!r}: put the task there (or set task_key) "
            "so that a harness of the pool can run it (examples/trainers/verl_agent_loop.py, "
            "to_verl_rows)"
        )
    return decode_task(info[task_key])


def _unusable(output: RolloutOutput, *, prompt_length: int, logprobs: bool) -> str | TokenSequence:
    """The rollout's token sequence, or why it cannot be one verl row."""
    try:
        seq = output.tokens()
    except NoTokenIds as exc:
        return str(exc)
    if not seq.append_only:
        return seq.reason
    if logprobs and seq.logprobs is None:
        return "the server returned no logprobs, and the trainer asks for them (logprobs)"
    if len(seq.prompt_ids) > prompt_length:
        # verl's own loops left-truncate a prompt before generating; this one was generated
        # from the whole prompt, so a truncated copy would not be what the policy saw
        return (
            f"its first prompt has {len(seq.prompt_ids)} tokens, more than "
            f"rollout.prompt_length={prompt_length}"
        )
    return seq


@register(AGENT_NAME)
class HarnessRescueAgentLoop(AgentLoopBase):
    """One rescue rollout of one row (see the module doc)."""

    def __init__(self, *args: Any, task_key: str = TASK_KEY, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task_key = task_key

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        slot = json.loads(kwargs[SLOT])
        pool = load_pool(slot["pool"])
        params = {k: sampling_params[k] for k in ("temperature", "top_p") if k in sampling_params}
        policy = EndpointPolicy(slot["endpoint"], slot["model"], params, tokens=True)
        task = task_of(kwargs.get("extra_info"), self.task_key)
        started = time.monotonic()
        output = await asyncio.to_thread(
            pool.harness(slot["harness"]).rollout, task, policy, seed=int(slot["seed"])
        )
        took = time.monotonic() - started
        logprobs = bool(sampling_params.get("logprobs"))
        return self.to_output(output, took, logprobs=logprobs, endpoint=slot["endpoint"])

    def to_output(
        self, output: RolloutOutput, took: float, *, logprobs: bool, endpoint: str = ""
    ) -> AgentLoopOutput:
        """verl's row for ``output``: every field from this one rollout, or a placeholder."""
        prompt_length = int(self.rollout_config.prompt_length)
        limit = int(self.rollout_config.response_length)
        meta: dict[str, Any] = {
            "harness": output.harness,
            "rollout_id": output.rollout_id,
            "seed": output.seed,
            "outcome": output.outcome,
            "endpoint": endpoint,
        }
        seq = _unusable(output, prompt_length=prompt_length, logprobs=logprobs)
        metrics = AgentLoopMetrics(generate_sequences=took)
        if isinstance(seq, str):
            # a row the manager never splices, shaped like a real one so that verl batches it
            # with the others (a missing logprobs tensor or an over-long prompt breaks that)
            meta["unusable"] = seq
            return AgentLoopOutput(
                prompt_ids=[self._pad_id()],
                response_ids=[self._pad_id()],
                response_mask=[0],
                response_logprobs=[0.0] if logprobs else None,
                reward_score=0.0,
                metrics=metrics,
                extra_fields={SLOT: json.dumps(meta)},
            )
        meta["truncated"] = len(seq.response_ids) > limit
        return AgentLoopOutput(
            prompt_ids=seq.prompt_ids,
            response_ids=seq.response_ids[:limit],
            response_mask=seq.response_mask[:limit],
            response_logprobs=seq.logprobs[:limit] if seq.logprobs is not None else None,
            reward_score=float(output.reward),
            num_turns=2 * seq.num_turns,
            metrics=metrics,
            extra_fields={SLOT: json.dumps(meta)},
        )

    def _pad_id(self) -> int:
        pad = getattr(self.tokenizer, "pad_token_id", None)
        return int(pad) if pad is not None else 0


def configured_model_names(config: Any) -> list[str]:
    """The names verl's config says the rollout server may serve the policy under, most
    specific first: the served name verl gives vLLM (``rollout.prometheus.served_model_name``
    when Prometheus is on, cut to its last path part as verl cuts it), then
    ``model.path``."""
    names: list[str] = []
    rollout = config.actor_rollout_ref.rollout
    prometheus = rollout.get("prometheus") if hasattr(rollout, "get") else None
    if prometheus is not None and prometheus.get("enable") and prometheus.get("served_model_name"):
        names.append(str(prometheus.get("served_model_name")).split("/")[-1])
    names.append(str(config.actor_rollout_ref.model.path))
    return names


def listed_models(endpoint: str, timeout_s: float = 10.0) -> list[str] | None:
    """The model ids the server at ``endpoint`` (an OpenAI base URL) lists at ``/models``;
    None when it lists none or cannot be asked (the rescue's own calls then say why)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        endpoint.rstrip("/") + "/models", headers={"Accept": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            body = json.loads(response.read(1_000_000))
        ids = [str(m["id"]) for m in body.get("data") or [] if isinstance(m, dict) and "id" in m]
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return None
    return ids or None


def served_model_name(endpoint: str, config: Any) -> str:
    """The name the rescue's calls give the model: the one the rollout server serves.

    verl starts vLLM on ``model_config.local_path`` (a hub id's downloaded snapshot, not
    ``model.path``) or under a served name, and vLLM refuses any other name, so the server
    is asked (``GET /models``). Of what it lists, a name the config gives
    (:func:`configured_model_names`) wins, else its only model; several, none of them the
    config's, is an error naming them. A server without a model list gets the config's."""
    wanted = configured_model_names(config)
    listed = listed_models(endpoint)
    if not listed:
        return wanted[0]
    for name in wanted:
        if name in listed:
            return name
    if len(listed) == 1:
        return listed[0]
    raise RuntimeError(
        f"the rollout server at {endpoint} serves {', '.join(listed)}, none of them the "
        f"trained model ({', '.join(wanted)}): name it in "
        "actor_rollout_ref.rollout.prometheus.served_model_name (with prometheus.enable, verl "
        "serves the policy under that name)"
    )


def sampled_groups(prompts: DataProto) -> dict[Any, list[int]]:
    """The batch's rows per ``uid``, in order, leaving out REMAX's greedy baseline rows:
    verl appends one per prompt, with the prompt's ``uid`` and ``__do_sample__`` false
    (``ray_trainer.py``), and reads its reward as ``reward_baselines``. A baseline is no
    attempt of the group: it neither decides whether the group failed nor is replaced."""
    sample = prompts.non_tensor_batch.get(DO_SAMPLE)
    groups: dict[Any, list[int]] = {}
    for i, uid in enumerate(prompts.non_tensor_batch["uid"]):
        if sample is None or bool(sample[i]):
            groups.setdefault(uid, []).append(i)
    return groups


def _use_v1(config: Any) -> bool:
    trainer = config.get("trainer") if hasattr(config, "get") else getattr(config, "trainer", None)
    if trainer is None:
        return False
    value = trainer.get("use_v1") if hasattr(trainer, "get") else getattr(trainer, "use_v1", None)
    return bool(value)


class RescueAgentLoopManager(AgentLoopManager):
    """verl's agent-loop manager plus the Harness-S rescue (see the module doc).

    Settings come from the environment, as verl builds the manager itself:
    ``HARNESSCTL_POOL`` (required), ``HARNESSCTL_RESCUE_K`` (Top-k, 2),
    ``HARNESSCTL_RESCUE_MIX`` (``keep-failures``, the default, or ``replace``) and, only to
    override the replicas found at run time, ``HARNESSCTL_RESCUE_ENDPOINT``. ``last_rescue``
    describes the last step's rescue (tried, replaced, per replaced row the sibling rollout
    it came from, and the step's metrics).
    """

    rescue_k = 2
    last_rescue: dict[str, Any]

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        if _use_v1(config):
            raise RuntimeError(V1_REFUSED)
        super().__init__(config, *args, **kwargs)
        self.last_rescue = {"tried": [], "replaced": [], "rows": {}}
        self._served: dict[str, str] = {}  # endpoint -> the model name it serves

    async def rescue_endpoints(self) -> list[str]:
        """The replicas' OpenAI-compatible base URLs (see the module doc)."""
        configured = os.environ.get(ENV_ENDPOINT)
        if configured:
            return [url.strip() for url in configured.split(",") if url.strip()]
        balancer = getattr(self.llm_client, "_load_balancer", None)
        addresses = await balancer.get_all_servers.remote() if balancer is not None else []
        if not addresses:
            raise RuntimeError(
                "the trainer's load balancer lists no rollout replica: set "
                f"{ENV_ENDPOINT} to their OpenAI-compatible base URL (http://HOST:PORT/v1)"
            )
        return [f"http://{address}/v1" for address in addresses]

    @auto_await
    async def generate_sequences(self, prompts: DataProto) -> DataProto:
        if not isinstance(prompts, DataProto):
            raise TypeError(f"{V1_REFUSED} (got a {type(prompts).__name__}, not a DataProto)")
        out = await super().generate_sequences(prompts)
        self.last_rescue = {"tried": [], "replaced": [], "rows": {}, "metrics": {}}
        if prompts.meta_info.get("validate") or "rm_scores" not in out.batch:
            return out
        pool_path = os.environ.get(ENV_POOL)
        if not pool_path:
            raise RuntimeError(f"set {ENV_POOL} to the exported pool's directory")
        pool = load_pool(pool_path)
        k = int(os.environ.get("HARNESSCTL_RESCUE_K", self.rescue_k))
        mix = check_mix(os.environ.get(ENV_MIX, DEFAULT_MIX))
        scores = [float(s) for s in out.batch["rm_scores"].sum(-1).tolist()]
        groups = sampled_groups(prompts)
        rows, slots = [], []
        base_seed = int(prompts.meta_info.get("global_steps", 0)) * 100_003
        for n, (uid, idx) in enumerate(groups.items()):
            if any(scores[i] > 0 for i in idx):
                continue
            task = task_of(prompts.non_tensor_batch["extra_info"][idx[0]])
            failed = [{"success": False, "outcome": "wrong_answer"} for _ in idx]
            plan = plan_group(pool, task, failed, k=k, seed=base_seed + 1000 * n, uid=uid, mix=mix)
            self.last_rescue["tried"].append(uid)
            if isinstance(plan, RescueResult):
                continue
            rows += [idx[slot.row] for slot in plan]
            slots += plan
        if rows:
            rescued = await self._rescue_rows(prompts, rows, slots, pool_path)
            out = self._splice(out, rescued, rows, slots, set(prompts.non_tensor_batch))
        self._record_metrics(out, groups)
        return out

    def _record_metrics(self, out: DataProto, groups: dict[Any, list[int]]) -> None:
        """The step's :class:`~harnessctl.pool.RescueMetrics` (from the rewards as spliced),
        in ``last_rescue["metrics"]`` and in ``out.meta_info["timing"]``: verl's legacy
        trainer logs that dict (as ``timing_s/<key>``) and no other from the rollout manager."""
        final = [float(s) for s in out.batch["rm_scores"].sum(-1).tolist()]
        spliced = self.last_rescue["rows"]
        rescued = [
            (
                [final[i] for i in groups[uid]],
                [pos for pos, i in enumerate(groups[uid]) if i in spliced],
            )
            for uid in self.last_rescue["replaced"]
        ]
        metrics = rescue_metrics(len(groups), len(self.last_rescue["tried"]), rescued).as_dict()
        self.last_rescue["metrics"] = metrics
        out.meta_info.setdefault("timing", {}).update(metrics)

    async def _rescue_rows(self, prompts: DataProto, rows: list[int], slots: list, pool_path: str):
        import numpy as np

        sub = prompts.select_idxs(rows)
        endpoints = await self.rescue_endpoints()
        models = {}
        for endpoint in endpoints:
            if endpoint not in self._served:
                self._served[endpoint] = await asyncio.to_thread(
                    served_model_name, endpoint, self.config
                )
            models[endpoint] = self._served[endpoint]
        column = [
            json.dumps(
                {
                    "pool": pool_path,
                    "harness": s.harness,
                    "seed": s.seed,
                    "endpoint": endpoints[j % len(endpoints)],
                    "model": models[endpoints[j % len(endpoints)]],
                }  # fmt: skip
            )
            for j, s in enumerate(slots)
        ]
        sub.non_tensor_batch[SLOT] = np.array(column, dtype=object)
        sub.non_tensor_batch["agent_name"] = np.array([AGENT_NAME] * len(rows), dtype=object)
        workers: list[Any] = list(self.agent_loop_workers)  # Ray actor handles
        parts = [list(range(len(rows)))[i :: len(workers)] for i in range(len(workers))]
        parts = [p for p in parts if p]
        done = await asyncio.gather(
            *[
                w.generate_sequences.remote(sub.select_idxs(p))
                for w, p in zip(workers, parts, strict=False)
            ]
        )
        order = [i for p in parts for i in p]  # where each part's rows sit in ``rows``
        merged = DataProto.concat(list(done))
        inverse = sorted(range(len(order)), key=order.__getitem__)
        return merged.select_idxs(inverse)

    def _splice(self, out: DataProto, rescued: DataProto, rows: list[int], slots: list, inputs):
        """``out`` with each rescued group's rows replaced by its rescue rows, in place.

        A replacement row keeps the input columns of the row it replaces (``uid``,
        ``extra_info``, ``agent_name``...: verl checks them when it joins the batch back) and
        takes every generated tensor and column from its own rescue rollout."""
        scores = [float(s) for s in rescued.batch["rm_scores"].sum(-1).tolist()]
        metas = [json.loads(m) for m in rescued.non_tensor_batch.pop(SLOT)]
        by_uid: dict[Any, list[int]] = {}
        for j, slot in enumerate(slots):
            by_uid.setdefault(slot.uid, []).append(j)
        source = [("out", i) for i in range(len(out))]
        for uid, js in by_uid.items():
            usable = all("unusable" not in metas[j] for j in js)
            if usable and any(scores[j] > 0 for j in js):
                for j in js:
                    source[rows[j]] = ("rescued", j)
                    self.last_rescue["rows"][rows[j]] = metas[j]
                self.last_rescue["replaced"].append(uid)
        if not self.last_rescue["replaced"]:
            return out
        missing = [key for key in out.batch.keys() if key not in rescued.batch]  # noqa: SIM118
        if missing:  # e.g. the base rows have rollout_log_probs and the rescue rows none
            self.last_rescue.update(replaced=[], rows={}, skipped=f"rescue rows lack {missing}")
            return out
        extra = [key for key in rescued.batch.keys() if key not in out.batch]  # noqa: SIM118
        if extra:
            rescued.pop(batch_keys=extra)
        columns = rescued.non_tensor_batch
        for key in list(columns):
            if key in inputs or key == "agent_name" or key not in out.non_tensor_batch:
                columns.pop(key)
        for key, values in out.non_tensor_batch.items():
            if key not in columns:  # an input column, or one only the base rows have
                columns[key] = values[rows]
        pieces: list[list[tuple[str, int]]] = []
        run: list[tuple[str, int]] = []
        for i, (name, at) in enumerate(source):
            if run and run[0][0] != name:
                pieces.append(run)
                run = []
            run.append((name, at))
            if i == len(source) - 1:
                pieces.append(run)
        parts = [
            (out if p[0][0] == "out" else rescued).select_idxs([at for _, at in p]) for p in pieces
        ]
        merged = DataProto.concat(parts)
        merged.meta_info = out.meta_info
        return merged
