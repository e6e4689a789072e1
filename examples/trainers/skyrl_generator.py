"""SkyRL (skyrl 0.4.0): rescue all-fail GRPO groups inside generate(), engines still awake.

SkyRL's own entrypoint with one change: the generator is wrapped by
``harnessctl.integrations.skyrl.RescuingGenerator``. Each dataset row carries its task in a
``harnessctl_task`` column as a JSON string (``harnessctl.pool.rows.task_columns``; SkyRL
passes the extra columns as ``env_extras``). tests/integrations/test_integration_skyrl.py
loads this file against skyrl 0.4.0 and runs its generator on a batch.

    python examples/trainers/skyrl_generator.py trainer.policy.model.path=Qwen/Qwen3-8B ...

(skyrl-train 0.3.1: the same classes under ``skyrl_train.*``; pass ``endpoint=`` the HTTP
endpoint's ``http://host:port/v1``.)
"""

import sys

import ray
from skyrl.backends.skyrl_train.inference_servers.utils import resolve_policy_model_name
from skyrl.train.config import SkyRLTrainConfig
from skyrl.train.entrypoints.main_base import BasePPOExp, validate_cfg
from skyrl.train.utils import initialize_ray

from harnessctl.integrations.skyrl import RescuingGenerator
from harnessctl.pool import Pool

POOL = "pools/dbbench-pool"  # verified on load; frozen for the whole run


class RescuePPOExp(BasePPOExp):
    def get_generator(self, cfg, tokenizer, inference_engine_client):
        return RescuingGenerator(
            super().get_generator(cfg, tokenizer, inference_engine_client),
            Pool.load(POOL),
            model=resolve_policy_model_name(cfg),  # the name the engines serve the policy as
            endpoint=inference_engine_client,  # its get_endpoint_url() + "/v1"
            k=2,
            max_concurrency=8,
            # half of a rescued group keeps its base failures, so GRPO's advantage on it is
            # not zero ("replace": every row from a sibling); rollout_metrics get the
            # harnessctl/rescue_* counts, which SkyRL's trainer logs
            mix="keep-failures",
        )


@ray.remote(num_cpus=1)
def skyrl_entrypoint(cfg):
    RescuePPOExp(cfg).run()


def main() -> None:
    cfg = SkyRLTrainConfig.from_cli_overrides(sys.argv[1:])
    validate_cfg(cfg)
    initialize_ray(cfg)
    ray.get(skyrl_entrypoint.remote(cfg))


if __name__ == "__main__":
    main()
