"""Running rollouts: evaluation, the rollout session, the executors and the budgets.

- :mod:`.session`: one rollout start to finish (``RolloutSession.run``: prepare, gateway,
  sandbox, score, classify), with a warm gateway and sandbox across rollouts;
- :mod:`.evaluate`: a harness over a suite split, cached, resumable, retried on infrastructure
  failures (``evaluate(EvalRequest)``);
- :mod:`.executor`: where rollouts run, chosen by name (``local``: threads, :mod:`.local`;
  ``ray``: a Ray cluster, :mod:`.ray` and :mod:`.node`); every result is stored through
  :mod:`.record`;
- :mod:`.budget`: the per-rollout budgets, resolved in one place.

The wall-clock limit is the sandbox's (``Limits``), the call, token and step budgets the
gateway's (``resolve_budgets``), the retry policy ``EvalRequest.retries``: nothing else in
harnessctl decides them. This package imports nothing above it (the CLI, evolve, profiles,
pools and reports import it).
"""

from .budget import Budgets, resolve_budgets
from .evaluate import EvalRequest, EvalResult, evaluate
from .session import RolloutRecord, RolloutSession

__all__ = [
    "Budgets",
    "EvalRequest",
    "EvalResult",
    "RolloutRecord",
    "RolloutSession",
    "evaluate",
    "resolve_budgets",
]
