"""SkyRL: a generator wrapper that rescues all-fail groups of each generate() call."""

from harnessctl.pool import EndpointPolicy, Pool
from harnessctl.pool.trainer import rescue_batch


class RescuingGenerator:
    def __init__(self, inner, pool_path, base_url, model, k=2):
        self.inner = inner
        self.pool = Pool.load(pool_path)
        self.policy = EndpointPolicy(base_url, model)
        self.k = k
        self.step = 0

    async def generate(self, inputs):
        output = await self.inner.generate(inputs)
        samples = [
            {"uid": uid, "reward": reward, "record": env_extra["record"]}
            for uid, reward, env_extra in zip(
                inputs["trajectory_ids"], output["rewards"], inputs["env_extras"], strict=True
            )
        ]
        result = rescue_batch(
            self.pool,
            samples,
            self.policy,
            task_of=lambda s: s["record"],
            convert=lambda out, s: {**s, "reward": out.reward, "messages": out.messages},
            k=self.k,
            seed=self.step,
        )
        self.step += 1
        output["rewards"] = [s["reward"] for s in result.samples]
        output["rescued_groups"] = result.rescued_uids
        return output
