"""verl (0.8, 0.9): GRPO with all-fail groups rescued by a harnessctl pool.

The rescue lives in harnessctl.integrations.verl (library code, tested against verl 0.9.1's
agent-loop contract); this file shows the ~20 lines of wiring:

1. the dataset rows carry the task's raw record in ``extra_info["harnessctl_task"]``
   (``to_verl_rows`` below), so a pool harness can run the row's task;
2. verl's agent-loop manager is replaced by ``RescueAgentLoopManager`` and the rescue agent
   loop is registered from a YAML file, both by configuration;
3. ``HARNESSCTL_POOL`` names the exported pool (verified on load).

The rescue runs inside ``generate_sequences``, while the rollout replicas are awake, against
their OpenAI-compatible endpoint (``HARNESSCTL_RESCUE_ENDPOINT``, http://HOST:PORT/v1), and
every replaced row's prompt, response, mask, logprobs and reward come from one sibling
rollout. Rewards must be computed inside the agent loop (verl's reward loop; the default
without a colocated reward model), since the rescue reads ``rm_scores``.
"""

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


def main(pool: str, endpoint: str, train_files: str, model: str) -> int:
    loops = HERE / "harnessctl_agent_loops.yaml"
    loops.write_text(json.dumps(AGENT_LOOPS))  # YAML is a superset of JSON
    env = {**os.environ, "HARNESSCTL_POOL": pool, "HARNESSCTL_RESCUE_ENDPOINT": endpoint}
    overrides = [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={train_files}",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        "actor_rollout_ref.rollout.agent.agent_loop_manager_class="
        "harnessctl.integrations.verl.RescueAgentLoopManager",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
    ]
    return subprocess.call([sys.executable, "-m", "verl.trainer.main_ppo", *overrides], env=env)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
