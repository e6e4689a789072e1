"""verl 0.9: GRPO with all-fail groups rescued by a harnessctl pool.

The rescue lives in harnessctl.integrations.verl (library code;
tests/integrations/test_integration_verl.py runs it through verl 0.9.1's own agent-loop
manager, workers and batching, configured with ``verl_overrides`` below); this file is the
wiring a verl user adds:

1. the dataset rows carry the task in ``extra_info["harnessctl_task"]``, as a JSON string
   (``to_verl_rows`` below: a parquet column cannot hold the records' mixed types), so a
   pool harness can run the row's task;
2. verl's agent-loop manager is replaced by ``RescueAgentLoopManager`` and the rescue agent
   loop is registered from a YAML file, both by configuration;
3. ``trainer.use_v1=False``: verl 0.9's default trainer is the TransferQueue trainer, which
   this manager does not feed (it refuses it, naming this setting);
4. ``HARNESSCTL_POOL`` names the exported pool (verified on load).

The rescue runs inside ``generate_sequences``, while the rollout replicas are awake, against
their OpenAI-compatible endpoints, which the manager asks of verl's load balancer at run time
(the replicas bind free ports when they start); every replaced row's prompt, response, mask,
logprobs and reward come from one sibling rollout. Rewards must be computed inside the agent
loop (verl's reward loop; the default without a colocated reward model), since the rescue
reads ``rm_scores``; ``calculate_log_probs=True`` makes the rescue rows carry the server's
logprobs, as verl's own rows then do.

    python examples/trainers/verl_agent_loop.py POOL_DIR TRAIN_PARQUET MODEL
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
AGENT_LOOPS = [
    {"name": "harnessctl_rescue", "_target_": "harnessctl.integrations.verl.HarnessRescueAgentLoop"}
]


def to_verl_rows(tasks, data_source=None, prompt_of=None):
    """verl ``RLHFDataset`` rows for ``tasks`` (loaded Tasks, e.g. ``load_suite(...).tasks("train")
    .tasks``, or raw task records), which ``pandas.DataFrame(rows).to_parquet(path)`` writes and
    verl's loader (``datasets.load_dataset("parquet")``) reads back.

    The task rides in ``extra_info["harnessctl_task"]`` as a JSON string (records mix types
    that a parquet column cannot hold); the rescue loop decodes it. ``data_source`` is the
    environment kind (a Task's own by default; name it for raw records); ``prompt`` is
    ``prompt_of(task)``, by default the record's ``description`` when it is text (what
    verl's length filter tokenizes and your own agent loop gets; a pool harness builds its
    own context from the task).
    """
    from harnessctl.pool.rows import task_columns

    rows = []
    for i, task in enumerate(tasks):
        record = getattr(task, "record", task)
        source = data_source or getattr(task, "env", None)
        if not source:
            raise ValueError("raw task records need data_source= (their environment kind)")
        text = prompt_of(task) if prompt_of else record.get("description")
        rows.append(
            {
                "data_source": source,
                "prompt": [{"role": "user", "content": text if isinstance(text, str) else ""}],
                "extra_info": task_columns(task, i),
            }
        )
    return rows


def agent_loops_yaml(path: Path) -> Path:
    """The file ``agent_loop_config_path`` names: registers the rescue loop in each worker."""
    path.write_text(json.dumps(AGENT_LOOPS))  # YAML is a superset of JSON
    return path


def verl_overrides(*, model: str, train_files: str, loops: Path) -> list[str]:
    """The Hydra overrides of ``verl.trainer.main_ppo`` (verl 0.9.1) for a rescued GRPO run."""
    return [
        "trainer.use_v1=False",
        "algorithm.adv_estimator=grpo",
        f"data.train_files={train_files}",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        # not in verl's config schema (its trainers read it with .get): added with "+"
        "+actor_rollout_ref.rollout.agent.agent_loop_manager_class="
        "harnessctl.integrations.verl.RescueAgentLoopManager",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
    ]


def main(pool: str, train_files: str, model: str) -> int:
    loops = agent_loops_yaml(HERE / "harnessctl_agent_loops.yaml")
    env = {**os.environ, "HARNESSCTL_POOL": pool}
    overrides = verl_overrides(model=model, train_files=train_files, loops=loops)
    return subprocess.call([sys.executable, "-m", "verl.trainer.main_ppo", *overrides], env=env)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
