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
the trainer's rows, so every token of a trained row comes from that harness's rollout::

    import agentlightning as agl
    agent = HarnessAgent(Pool.load("pools/dbbench-pool"))
    agl.Trainer(algorithm=agl.VERL(config), n_runners=4).fit(agent, train_dataset=rows)

Rescue of all-fail groups is not offered here: Agent Lightning decides a step's groups in its
VERL daemon (``AgentModeDaemon``, replaceable through ``agl.VERL(config, daemon_cls=...)``,
marked experimental), after every queued rollout finished and before the batch is built. A
rescue there would, for each ``data_id`` whose rollouts all scored <= 0, queue the pool's
Top-k siblings as rows naming ``harnessctl_harness`` and ``harnessctl_seed`` (same
resources), wait for them, and swap the group's completed rollouts only when one of them
succeeded; the daemon keeps those in private fields (``_completed_rollouts_v0``,
``_task_id_to_original_sample``), so such a subclass would follow one release's internals.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentlightning import LLM, LitAgent

from ..pool import EndpointPolicy, Pool, RolloutOutput
from ..pool.rows import TASK_KEY, decode_task

TASK = TASK_KEY
HARNESS = "harnessctl_harness"
SEED = "harnessctl_seed"
#: Agent Lightning's sampling parameters a rollout's calls reuse
SAMPLING = ("temperature", "top_p", "max_tokens")


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
