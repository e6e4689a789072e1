"""verl 0.9: GRPO with all-fail groups rescued by a harnessctl pool.

The rescue lives in harnessctl.integrations.verl (library code;
tests/integrations/test_integration_verl.py runs it through verl 0.9.1's own agent-loop
manager, workers and batching, configured with ``verl_overrides`` below); this file is the
wiring a verl user adds:

1. the dataset rows carry the task's raw record in ``extra_info["harnessctl_task"]``
   (``to_verl_rows`` below), so a pool harness can run the row's task;
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


def to_verl_rows(records, data_source="dbbench"):
    """verl RLHFDataset rows for raw task records (write them with pandas.to_parquet)."""
    return [
        {
            "data_source": data_source,
            "prompt": [{"role": "user", "content": record.get("description", "")}],
            "extra_info": {"index": i, "harnessctl_task": record},
        }
        for i, record in enumerate(records)
    ]


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
