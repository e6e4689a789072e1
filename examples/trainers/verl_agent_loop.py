"""verl: rescue all-fail GRPO groups after the agent loop, before advantage computation.

Call ``rescue_all_fail_groups(batch_items)`` on the per-sample items your agent-loop
manager produced (each with ``uid``, ``reward`` and the task record under
``extra_info["record"]``), then build the DataProto from the returned list.
"""

from harnessctl.pool import EndpointPolicy, Pool
from harnessctl.pool.trainer import rescue_batch

POOL = Pool.load("pools/dbbench-pool")  # verified on load; frozen for the whole run
POLICY = EndpointPolicy("http://127.0.0.1:8000/v1", "actor", {"temperature": 1.0})


def to_item(output, original):
    """A pool RolloutOutput in the shape of the agent loop's items."""
    return {
        **original,
        "reward": output.reward,
        "messages": output.messages,
        "harness": output.harness,
        "harness_hash": output.harness_hash,
    }


def rescue_all_fail_groups(items, step):
    result = rescue_batch(
        POOL,
        items,
        POLICY,
        task_of=lambda it: it["extra_info"]["record"],
        convert=to_item,
        k=2,
        seed=step,
    )
    return result.samples  # same length and order; all-fail groups replaced when rescued
