"""Frozen sibling-harness pools for RL training.

``harnessctl export-pool`` writes a directory (and a single-file archive) holding the
harness trees, their profiles, a manifest and a checksum file; :class:`Pool` loads one
after verifying every hash, routes failed tasks to siblings, and runs rollouts of any pool
harness against an endpoint policy (an OpenAI-compatible inference server, as RL trainers
expose theirs). :func:`rescue_group` is the Harness-S rule: only an all-fail group is
re-rolled under the routed siblings, and only a group with a success replaces it; its
``mix`` says whether the rescued group keeps half of the base failures (the default, so the
group's GRPO advantage is not zero) or is replaced whole. :mod:`.rows` writes dataset rows
that carry a task as a JSON string; :mod:`.advantage` measures what a rescue gave GRPO.
"""

from .advantage import RescueMetrics, group_advantages, rescue_metrics
from .api import (
    EndpointPolicy,
    Pool,
    PoolHarness,
    RolloutInfraError,
    RolloutOutput,
    load_pool,
)
from .integrity import PoolIntegrityError, verify_pool
from .rows import decode_task, encode_task, task_columns
from .sampler import (
    DEFAULT_MIX,
    MIXES,
    RescueMix,
    RescueResult,
    RescueSlot,
    arescue_group,
    rescue_group,
)
from .tokens import CallSample, NoTokenIds, TokenSequence
from .trainer import BatchRescue, arescue_batch, rescue_batch

__all__ = [
    "load_pool",
    "DEFAULT_MIX",
    "MIXES",
    "BatchRescue",
    "CallSample",
    "EndpointPolicy",
    "NoTokenIds",
    "Pool",
    "PoolHarness",
    "PoolIntegrityError",
    "RescueMetrics",
    "RescueMix",
    "RescueResult",
    "RescueSlot",
    "RolloutInfraError",
    "RolloutOutput",
    "TokenSequence",
    "arescue_batch",
    "arescue_group",
    "decode_task",
    "encode_task",
    "group_advantages",
    "rescue_batch",
    "rescue_group",
    "rescue_metrics",
    "task_columns",
    "verify_pool",
]
