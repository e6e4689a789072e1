"""Agent Lightning (0.3.0, verl 0.5.0): train a policy through a harnessctl pool harness as the
agent, rescuing all-fail groups with the pool's siblings.

Agent Lightning trains unmodified agents through an OpenAI-compatible proxy in front of its
VERL trainer; ``HarnessAgent`` (harnessctl.integrations.agentlightning) plays each row's task
under the pool's base harness (or the harness and seed a row names) against that proxy, and
returns the rollout's reward. ``RescueDaemon`` is Agent Lightning's VERL daemon plus the
Harness-S rescue: a row whose rollouts all failed gets fresh rollouts under the pool's Top-k
siblings (``keep-failures``: the first half of its rows, the rest keep their base failures;
``HARNESSCTL_RESCUE_MIX=replace`` for all), swapped in when one succeeded; each step logs
``harnessctl/rescue_*`` metrics. The adapter reads the proxy's spans, which carry the server's
token ids. Rows carry the task in ``harnessctl_task`` as a JSON string (``rows`` below;
``datasets.Dataset.from_list`` refuses the records' mixed types otherwise).

    HARNESSCTL_POOL=POOL_DIR python examples/trainers/agentlightning_agent.py TASKS.jsonl MODEL
"""

from __future__ import annotations

import json
import os
import sys


def rows(path: str) -> list[dict]:
    """Agent Lightning dataset rows for a task file (one raw record a line): the typed columns
    of ``harnessctl.pool.rows.task_columns``, the task a JSON string ``HarnessAgent`` decodes."""
    from harnessctl.pool.rows import task_columns

    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [task_columns(record, i) for i, record in enumerate(records)]


def main(tasks: str, model: str) -> None:
    import agentlightning as agl

    from harnessctl.integrations.agentlightning import HarnessAgent, RescueDaemon
    from harnessctl.pool import Pool

    config = {  # Agent Lightning's VERL algorithm takes verl's overrides as a dict
        "algorithm": {"adv_estimator": "grpo"},
        "data": {"train_batch_size": 8},
        "actor_rollout_ref": {"model": {"path": model}, "rollout": {"n": 8, "name": "vllm"}},
    }
    with Pool.load(os.environ["HARNESSCTL_POOL"]) as pool:
        algorithm = agl.VERL(config, daemon_cls=RescueDaemon)
        adapter = agl.LlmProxyTraceToTriplet()  # the proxy's spans: the server's token ids
        trainer = agl.Trainer(algorithm=algorithm, n_runners=4, adapter=adapter)
        trainer.fit(HarnessAgent(pool), train_dataset=rows(tasks))


if __name__ == "__main__":
    main(*sys.argv[1:3])
