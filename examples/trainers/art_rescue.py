"""ART (openpipe-art 0.5.18): rescue all-fail groups as they finish, before backend.train.

The agent is the pool's base harness, run against the model ART serves; its rollouts become
ART trajectories with the same conversion the rescue uses (``to_trajectory``: each reply a
``Choice`` with the server's token ids and logprobs). In an all-fail group the first half of
the trajectories are replaced by the siblings' rollouts when one of them succeeded, the rest
keep their base failures (``rescue_after_each``'s default ``mix="keep-failures"``: the group's
rewards then vary, so ART's advantage on it is not zero); each step logs the batch's rescue
metrics (``hook.take_metrics()``).

ART pins litellm<=1.82: install it in an environment of its own, next to harnessctl.
"""

import asyncio

import art
from art.local import LocalBackend

from harnessctl.integrations.art import policy_for, rescue_after_each, to_trajectory
from harnessctl.pool import Pool
from harnessctl.suite import load_suite

ROLLOUTS_PER_GROUP, GROUPS_PER_STEP, STEPS = 4, 8, 100


async def rollout(pool, model, task, seed):
    out = await asyncio.to_thread(pool.base.rollout, task, policy_for(model), seed=seed)
    return to_trajectory(out, art.Trajectory, pool_id=pool.id)


def group(pool, model, task_id, task, step):
    seeds = range(step * ROLLOUTS_PER_GROUP, (step + 1) * ROLLOUTS_PER_GROUP)
    rollouts = (rollout(pool, model, task, seed) for seed in seeds)
    return art.TrajectoryGroup(rollouts, metadata={"task": task_id})


async def main() -> None:
    tasks = load_suite("examples/dbbench").tasks("train").by_id()
    ids = sorted(tasks)
    backend = LocalBackend()
    model = art.TrainableModel(
        name="dbbench-agent", project="harness-rescue", base_model="Qwen/Qwen2.5-7B-Instruct"
    )
    await model.register(backend)
    with Pool.load("pools/dbbench-pool") as pool:  # verified on load; frozen for the run
        hook = rescue_after_each(
            pool,
            lambda slot: policy_for(model),  # the latest checkpoint's served name
            task_of=lambda group: tasks[group.metadata["task"]],
        )
        for step in range(await model.get_step(), STEPS):
            batch = [ids[(step * GROUPS_PER_STEP + i) % len(ids)] for i in range(GROUPS_PER_STEP)]
            groups = await art.gather_trajectory_groups(
                [group(pool, model, t, tasks[t], step) for t in batch],
                after_each=hook,
                max_exceptions=ROLLOUTS_PER_GROUP * GROUPS_PER_STEP,
            )
            result = await backend.train(model, groups, learning_rate=1e-5)
            metrics = {**result.metrics, **hook.take_metrics().as_dict()}
            await model.log(groups, metrics=metrics, step=result.step, split="train")
    await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
