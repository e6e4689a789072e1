"""Agent Lightning (``agentlightning`` 0.3.0): a pool harness as an Agent Lightning agent.

Importing this module imports Agent Lightning; it follows ``agentlightning/litagent/litagent.py``
(``LitAgent.rollout(task, resources, rollout)``: a float return is the rollout's final
reward), ``agentlightning/types/resources.py`` (``LLM``, ``ProxyLLM.get_base_url(rollout_id,
attempt_id)``: the per-attempt endpoint of the trainer's ``LLMProxy``, which records each
call's token ids for the trainer) and ``agentlightning/verl/daemon.py`` (the trainer queues
each dataset row ``n`` times, as rows with a ``data_id``, and gives the agents one
``"main_llm"`` resource).

Agent Lightning trains unmodified agents: a harnessctl harness is one, since it reaches the
model only through an OpenAI-compatible endpoint. :class:`HarnessAgent` plays one rollout of
the row's task (its ``harnessctl_task`` column: the task as a JSON string, see
:mod:`harnessctl.pool.rows`, or a raw task record of the pool's environment as a dict)
under the pool's base harness, or under the harness and seed the row names
(``harnessctl_harness``, ``harnessctl_seed``), against the rollout's endpoint, and returns
the rollout's reward. The proxy records the calls' tokens and the adapter turns them into
the trainer's rows, so every token of a trained row comes from that harness's rollout. The
adapter must read the proxy's spans, ``agl.LlmProxyTraceToTriplet()``: the Trainer's default
(``TracerTraceToTriplet``) reads the agent's own OpenAI-client spans, which a harness run
through harnessctl's sandbox and gateway does not leave with token ids::

    import agentlightning as agl
    from harnessctl.integrations.agentlightning import HarnessAgent, RescueDaemon
    agent = HarnessAgent(Pool.load("pools/dbbench-pool"))
    algorithm = agl.VERL(config, daemon_cls=RescueDaemon)   # HARNESSCTL_POOL names the pool
    trainer = agl.Trainer(algorithm=algorithm, n_runners=4, adapter=agl.LlmProxyTraceToTriplet())
    trainer.fit(agent, train_dataset=rows)

All-fail groups are rescued in Agent Lightning's VERL daemon (``agentlightning/verl/daemon.py``,
``AgentModeDaemon``), the one place that sees a step's groups after every queued rollout
finished and before the batch is built. :class:`RescueDaemon` (imported lazily: it needs verl,
which ``agl.VERL`` needs anyway) is that daemon plus the Harness-S rule, passed as
``agl.VERL(config, daemon_cls=RescueDaemon)``. After the daemon's own wait for a training
step's rollouts it groups them by ``data_id``; for each group whose rollouts all scored <= 0
(the daemon's rewards, a missing one filled as it fills it) it routes the row's task to the
pool's Top-k siblings and queues fresh rollouts of the same row, naming ``harnessctl_harness``
and ``harnessctl_seed``, with the step's resources (the trainer's LLM proxy), so the agents
play them like any other rollout and the proxy records their tokens. How many rows get one is
the ``mix`` (:mod:`harnessctl.pool.sampler`, as verl's integration takes it): under
``keep-failures`` (the default) the first ``n - n // 2`` of the group, the rest keep their
failed base rollouts so that the group's rewards vary; under ``replace`` all. It waits for
them with the daemon's own wait, then swaps them in for those rows only when one of them
succeeded and every one left token triplets (a rollout without them would drop out of the
batch); otherwise it discards them. The batch is then built by the daemon's own
``get_train_data_batch`` from the rollouts kept, and its metrics gain the step's
:class:`~harnessctl.pool.RescueMetrics` (``harnessctl/rescue_*``), which the trainer logs.

Settings come from the environment, as the trainer builds the daemon itself (inside Ray's
TaskRunner, whose worker inherits the environment Ray started with): ``HARNESSCTL_POOL`` (the
exported pool, required), ``HARNESSCTL_RESCUE_K`` (Top-k, 2), ``HARNESSCTL_RESCUE_MIX``
(``keep-failures`` or ``replace``), the names verl's integration reads; or from a subclass's
``pool_dir``, ``rescue_k`` and ``rescue_mix`` (the environment wins). The daemon follows
private fields of one release (``_completed_rollouts_v0``, ``_task_id_to_original_sample``,
``_total_tasks_queued``, ``_async_run_until_finished``, ``_fillna_reward``): it refuses any
agentlightning but :data:`AGL_VERSION`, and the deprecated ``v0`` mode (no LightningStore).
Its tested verl is 0.5.0, the release agentlightning 0.3.0's install guide names and its own
code special-cases (its ``async_server`` imports verl 0.5's ``AsyncvLLMServer``; verl >= 0.6
lacks it). With
agentlightning 0.3.0, two newer releases of its dependencies break its VERL path: fastapi
>= 0.139.1 (a lock in its routers: the store server no longer pickles into Ray's TaskRunner)
and opentelemetry-exporter-otlp-proto-http >= 1.45 (its endpoint is fixed when it is made,
so the LLM proxy's spans go to ``localhost:4318`` instead of the store, and the batch has no
rows); the tested set pins ``fastapi==0.139.0`` and the OpenTelemetry 1.44.0 packages.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

from agentlightning import LLM, LitAgent

from ..pool import EndpointPolicy, Pool, RolloutOutput, load_pool
from ..pool.advantage import RescueMetrics, rescue_metrics
from ..pool.rows import TASK_KEY, decode_task
from ..pool.sampler import DEFAULT_MIX, RescueResult, RescueSlot, check_mix, decide, plan_group

TASK = TASK_KEY
HARNESS = "harnessctl_harness"
SEED = "harnessctl_seed"
#: Agent Lightning's sampling parameters a rollout's calls reuse
SAMPLING = ("temperature", "top_p", "max_tokens")
#: The one agentlightning release whose daemon :class:`RescueDaemon` follows
AGL_VERSION = "0.3.0"
ENV_POOL = "HARNESSCTL_POOL"
ENV_K = "HARNESSCTL_RESCUE_K"
ENV_MIX = "HARNESSCTL_RESCUE_MIX"


class HarnessAgent(LitAgent[dict[str, Any]]):
    """One rollout of a row's task under a pool harness (see the module doc).

    ``resource`` names the LLM resource (``"main_llm"``, as Agent Lightning's VERL algorithm
    names it); ``model`` overrides the name the endpoint serves (default: the resource's).
    ``last_output`` is the last rollout's :class:`~harnessctl.pool.RolloutOutput` in this
    process (its calls carry the token ids when the endpoint returns them).
    """

    def __init__(
        self, pool: Pool, *, resource: str = "main_llm", model: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.pool = pool
        self.resource = resource
        self.model = model
        self.last_output: RolloutOutput | None = None

    def policy(self, resources: Any, rollout: Any) -> EndpointPolicy:
        llm = resources.get(self.resource) if hasattr(resources, "get") else None
        if not isinstance(llm, LLM):
            raise KeyError(f"the rollout's resources have no LLM named {self.resource!r}")
        attempt = getattr(rollout, "attempt", None)  # an AttemptedRollout's, when a runner runs it
        ids = (rollout.rollout_id, attempt.attempt_id) if attempt else (None, None)
        url = llm.get_base_url(*ids)
        params = {k: v for k, v in (llm.sampling_parameters or {}).items() if k in SAMPLING}
        return EndpointPolicy(url, self.model or llm.model, params, tokens=True)

    async def rollout_async(self, task: dict[str, Any], resources: Any, rollout: Any) -> float:
        if TASK not in task:
            raise KeyError(
                f"the row has no {TASK!r} column: put the task's raw record there so that a "
                "harness of the pool can run it"
            )
        name = task.get(HARNESS) or self.pool.base.name
        seed = int(task.get(SEED, 0))
        harness = self.pool.harness(name)
        policy = self.policy(resources, rollout)
        output = await asyncio.to_thread(
            harness.rollout, decode_task(task[TASK]), policy, seed=seed
        )
        self.last_output = output
        return float(output.reward)


def check_agentlightning(version: str | None = None) -> None:
    """Refuse any agentlightning but :data:`AGL_VERSION` (its daemon's private fields are
    what :class:`RescueDaemon` works on)."""
    if version is None:
        import agentlightning

        version = str(getattr(agentlightning, "__version__", "unknown"))
    if version != AGL_VERSION:
        raise RuntimeError(
            f"harnessctl's RescueDaemon follows agentlightning {AGL_VERSION}'s AgentModeDaemon "
            f"(its private fields), and agentlightning {version} is installed: install "
            f"agentlightning=={AGL_VERSION} or train without the rescue (HarnessAgent alone)"
        )


@dataclass(frozen=True)
class _Fresh:
    """A finished rescue rollout, as :func:`harnessctl.pool.sampler.decide` reads one."""

    rollout_id: str
    reward: float
    trainable: bool

    @property
    def success(self) -> bool:
        return self.reward > 0


class RescueMixin:
    """The rescue of :class:`RescueDaemon` (module doc), on top of ``AgentModeDaemon``.

    ``last_rescue`` describes the last training step's rescue: the ``data_id`` of every group
    tried and of every group rescued, per rescued group the rule's reason, and the step's
    metrics (``RescueMetrics.as_dict()``).
    """

    #: Defaults a subclass may set instead of the environment.
    pool_dir: str | None = None
    rescue_k: int = 2
    rescue_mix: str = DEFAULT_MIX

    # AgentModeDaemon's, as agentlightning 0.3.0 names them
    mode: str
    is_train: bool
    store: Any
    llm_timeout_seconds: float
    _internal_loop: Any
    _completed_rollouts_v0: dict[str, Any]
    _task_id_to_original_sample: dict[str, dict[str, Any]]
    _total_tasks_queued: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        check_agentlightning()
        if kwargs.get("mode", args[8] if len(args) > 8 else "v1") != "v1":
            raise RuntimeError(
                "harnessctl's RescueDaemon runs in Agent Lightning's v1 mode only (a "
                "LightningStore, as agl.Trainer gives the algorithm); the deprecated v0 "
                "server mode queues rollouts elsewhere"
            )
        super().__init__(*args, **kwargs)
        self.last_rescue: dict[str, Any] = {}
        self._rescue_steps = 0
        self._rescue_metrics = RescueMetrics()

    def settings(self) -> tuple[str, int, str]:
        """The pool's directory, Top-k and mix (module doc)."""
        pool_dir = os.environ.get(ENV_POOL) or self.pool_dir
        if not pool_dir:
            raise RuntimeError(f"set {ENV_POOL} to the exported pool's directory")
        k = int(os.environ.get(ENV_K) or self.rescue_k)
        return pool_dir, k, check_mix(os.environ.get(ENV_MIX) or self.rescue_mix)

    def run_until_all_finished(self, verbose: bool = True) -> None:
        super().run_until_all_finished(verbose)  # type: ignore[misc]
        self.last_rescue, self._rescue_metrics = {}, RescueMetrics()
        if not self.is_train or not self._total_tasks_queued:
            return
        self._rescue_steps += 1
        future = asyncio.run_coroutine_threadsafe(self._rescue(verbose), self._internal_loop)
        future.result()

    def get_train_data_batch(self, *args: Any, **kwargs: Any) -> Any:
        batch, metrics = super().get_train_data_batch(*args, **kwargs)  # type: ignore[misc]
        metrics.update(self._rescue_metrics.as_dict())
        return batch, metrics

    def groups(self) -> dict[str, list[str]]:
        """The step's rollout ids per ``data_id``, in the order they were queued."""
        out: dict[str, list[str]] = {}
        for rollout_id, sample in self._task_id_to_original_sample.items():
            out.setdefault(str(sample["data_id"]), []).append(rollout_id)
        return out

    def reward(self, rollout_id: str) -> float:
        return float(self._fillna_reward(self._completed_rollouts_v0[rollout_id]))  # type: ignore[attr-defined]

    def trainable(self, rollout_id: str) -> bool:
        """Whether the rollout left triplets with token ids (the batch's rows)."""
        triplets = self._completed_rollouts_v0[rollout_id].triplets or []
        return bool(triplets) and all(
            t.prompt.get("token_ids") and t.response.get("token_ids") for t in triplets
        )

    async def _rescue(self, verbose: bool) -> None:
        from agentlightning.types import EnqueueRolloutRequest, RolloutConfig
        from agentlightning.verl.daemon import _to_native

        pool_dir, k, mix = self.settings()
        pool = load_pool(pool_dir)
        groups = self.groups()
        base_seed = self._rescue_steps * 100_003
        plans: dict[str, list[RescueSlot]] = {}
        tried: list[str] = []
        requests = []
        for n, (data_id, ids) in enumerate(groups.items()):
            rewards = [self.reward(i) for i in ids]
            if any(r > 0 for r in rewards):
                continue
            base = [{"reward": r, "outcome": "wrong_answer"} for r in rewards]
            tried.append(data_id)
            sample = _to_native(self._task_id_to_original_sample[ids[0]])
            if TASK not in sample:
                raise KeyError(f"the row of data_id {data_id} has no {TASK!r} column to route")
            task = decode_task(sample[TASK])
            plan = await asyncio.to_thread(
                plan_group, pool, task, base, k=k, seed=base_seed + 1000 * n, uid=data_id, mix=mix
            )
            if isinstance(plan, RescueResult):
                continue
            plans[data_id] = plan
            resources_id = self._completed_rollouts_v0[ids[0]].task.resources_id
            for slot in plan:
                requests.append(
                    EnqueueRolloutRequest(
                        input={**sample, HARNESS: slot.harness, SEED: slot.seed},
                        mode="train",
                        resources_id=resources_id,
                        config=RolloutConfig(
                            unresponsive_seconds=self.llm_timeout_seconds,
                            timeout_seconds=self.llm_timeout_seconds,
                        ),
                        metadata={"data_id": data_id, "is_train": True, HARNESS: slot.harness},
                    )
                )
        fresh_ids: dict[str, list[str]] = {}
        if requests:
            rollouts = await self.store.enqueue_many_rollouts(requests)
            for rollout in rollouts:
                data_id = str(rollout.metadata["data_id"])
                fresh_ids.setdefault(data_id, []).append(rollout.rollout_id)
                self._task_id_to_original_sample[rollout.rollout_id] = (
                    self._task_id_to_original_sample[groups[data_id][0]]
                )
            self._total_tasks_queued += len(rollouts)
            await self._async_run_until_finished(verbose)  # type: ignore[attr-defined]
        rescued: list[tuple[list[float], list[int]]] = []
        reasons: dict[str, str] = {}
        for data_id, plan in plans.items():
            ids = groups[data_id]
            fresh = [_Fresh(i, self.reward(i), self.trainable(i)) for i in fresh_ids[data_id]]
            result = decide(ids, plan, fresh)
            if result.replaced and not all(f.trainable for f in fresh):
                result = RescueResult(
                    False, ids, "a sibling rollout left no token triplets: kept", result.routed
                )
            reasons[data_id] = result.reason
            dropped = (
                [ids[s.row] for s in plan] if result.replaced else [f.rollout_id for f in fresh]
            )
            for rollout_id in dropped:
                del self._completed_rollouts_v0[rollout_id]
                del self._task_id_to_original_sample[rollout_id]
                self._total_tasks_queued -= 1
            if result.replaced:
                final = [
                    r.rollout_id if isinstance(r, _Fresh) else i
                    for r, i in zip(result.group, ids, strict=True)
                ]
                rescued.append(([self.reward(i) for i in final], list(result.rows)))
        self._rescue_metrics = rescue_metrics(len(groups), len(tried), rescued)
        self.last_rescue = {
            "tried": tried,
            "rescued": [d for d in plans if reasons[d].startswith("rescued")],
            "reasons": reasons,
            "metrics": self._rescue_metrics.as_dict(),
        }


_daemon: type | None = None


def rescue_daemon_class() -> type:
    """:class:`RescueDaemon`: ``RescueMixin`` on agentlightning's ``AgentModeDaemon``, made on
    first use (importing the daemon imports verl)."""
    global _daemon
    if _daemon is None:
        check_agentlightning()
        from agentlightning.verl.daemon import AgentModeDaemon

        cls = type("RescueDaemon", (RescueMixin, AgentModeDaemon), {"__module__": __name__})
        cls.__doc__ = "Agent Lightning's VERL daemon with the Harness-S rescue (module doc)."
        _daemon = cls
    return _daemon


def __getattr__(name: str) -> Any:
    if name == "RescueDaemon":  # lazily: HarnessAgent needs no verl
        return rescue_daemon_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
