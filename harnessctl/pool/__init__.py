"""Frozen sibling-harness pools for RL training.

``harnessctl export-pool`` writes a directory (and a single-file archive) holding the
harness trees, their profiles, a manifest and a checksum file; :class:`Pool` loads one
after verifying every hash, routes failed tasks to siblings, and runs rollouts of any pool
harness against an endpoint policy (an OpenAI-compatible inference server, as RL trainers
expose theirs). :func:`rescue_group` is the Harness-S rule: only an all-fail group is
re-rolled under the routed siblings, and only a group with a success replaces it.
"""

from .api import EndpointPolicy, Pool, PoolHarness, RolloutInfraError, RolloutOutput
from .integrity import PoolIntegrityError, verify_pool
from .sampler import RescueResult, RescueSlot, arescue_group, rescue_group
from .tokens import CallSample, NoTokenIds, TokenSequence
from .trainer import BatchRescue, arescue_batch, rescue_batch

__all__ = [
    "BatchRescue",
    "CallSample",
    "EndpointPolicy",
    "NoTokenIds",
    "Pool",
    "PoolHarness",
    "PoolIntegrityError",
    "RescueResult",
    "RescueSlot",
    "RolloutInfraError",
    "RolloutOutput",
    "TokenSequence",
    "arescue_batch",
    "arescue_group",
    "rescue_batch",
    "rescue_group",
    "verify_pool",
]
