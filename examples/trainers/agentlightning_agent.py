"""Agent Lightning (0.3.0): train a policy through a harnessctl pool harness as the agent.

Agent Lightning trains unmodified agents through an OpenAI-compatible proxy in front of its
VERL trainer; ``HarnessAgent`` (harnessctl.integrations.agentlightning) plays each row's task
under the pool's base harness (or the harness and seed a row names) against that proxy, and
returns the rollout's reward. Rows carry the task in ``harnessctl_task`` as a JSON string
(``rows`` below; ``datasets.Dataset.from_list`` refuses the records' mixed types otherwise).
All-fail groups are not rescued here (the integration module says why and what it needs).

    python examples/trainers/agentlightning_agent.py POOL_DIR TASKS.jsonl MODEL
"""

from __future__ import annotations

import json
import sys


def rows(path: str) -> list[dict]:
    """Agent Lightning dataset rows for a task file (one raw record a line): the typed columns
    of ``harnessctl.pool.rows.task_columns``, the task a JSON string ``HarnessAgent`` decodes."""
    from harnessctl.pool.rows import task_columns

    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [task_columns(record, i) for i, record in enumerate(records)]


def main(pool_dir: str, tasks: str, model: str) -> None:
    import agentlightning as agl

    from harnessctl.integrations.agentlightning import HarnessAgent
    from harnessctl.pool import Pool

    config = {  # Agent Lightning's VERL algorithm takes verl's overrides as a dict
        "algorithm": {"adv_estimator": "grpo"},
        "data": {"train_batch_size": 8},
        "actor_rollout_ref": {"model": {"path": model}, "rollout": {"n": 8, "name": "vllm"}},
    }
    with Pool.load(pool_dir) as pool:
        trainer = agl.Trainer(algorithm=agl.VERL(config), n_runners=4)
        trainer.fit(HarnessAgent(pool), train_dataset=rows(tasks))


if __name__ == "__main__":
    main(*sys.argv[1:4])
