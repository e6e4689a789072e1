"""ART: an ``after_each`` hook for ``art.gather_trajectory_groups`` that rescues all-fail groups.

Follows ``openpipe-art`` 0.5.18: ``art/gather.py`` (``after_each`` gets each finished
``TrajectoryGroup`` and returns the group that replaces it), ``art/trajectories.py``
(``Trajectory``, ``TrajectoryGroup``, ``History``) and ``art/preprocessing/tokenize.py`` (how a
trajectory becomes tokens). Nothing of ART is imported: a new group is built with the classes
of the group it replaces, so the hook works with whichever ART the trainer runs::

    hook = rescue_after_each(
        pool, lambda slot: policy_for(model), task_of=lambda g: tasks[g.metadata["task"]]
    )
    groups = await art.gather_trajectory_groups(groups, after_each=hook)
    result = await backend.train(model, groups)
    await model.log(groups, metrics={**result.metrics, **hook.take_metrics().as_dict()})

A group whose every trajectory has reward <= 0 is re-rolled under the pool's Top-k siblings
(its task through ``task_of``, from the group's or its trajectories' metadata). How many of its
trajectories get a fresh rollout is the ``mix`` (:mod:`harnessctl.pool.sampler`, as verl's
integration takes it): under ``keep-failures`` (the default) the first ``n - n // 2``, the
others keep their failed base attempts, so a rescued group's rewards vary and ART's
group-relative advantage is not zero on it; under ``replace`` every one. When a fresh rollout
succeeded the hook returns a new group (fresh trajectories at those places, the kept ones as
they were; the group's metadata, metrics, logs and exceptions kept), else the original group.

Per batch (one ``gather_trajectory_groups`` call) the hook counts what it saw:
``hook.take_metrics()`` returns the batch's :class:`~harnessctl.pool.RescueMetrics` (groups,
all-fail, rescued, rescued with zero reward variance, mean |GRPO advantage| of the rescued
trajectories) and starts the next batch; ``.as_dict()`` is ready for ``model.log(metrics=...)``.

What ART gets from a rollout: ART tokenizes a trajectory itself, applying the model's chat
template to its messages and training on each assistant turn given as an OpenAI ``Choice``
with logprobs. So each trajectory's ``messages_and_choices`` is the rollout's last context
(``RolloutOutput.messages``) with each of the policy's replies as a ``Choice`` carrying the
server's token ids (as ``token_id:<id>`` tokens, the form ART's own vLLM server returns) and
logprobs; a reply whose call has none stays a plain assistant message (trained only with
``allow_training_without_logprobs``). A reply that is not in the last context (the harness
rewrote its context) becomes an ``additional_histories`` entry: the context that call saw and
its reply. ``tools`` are the functions the last call offered, ``reward`` is the rollout's, and
``metadata`` the replaced trajectory's plus ``harnessctl_*`` keys naming the pool, harness,
rollout id, seed and outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..pool import EndpointPolicy, RolloutOutput
from ..pool.advantage import RescueMetrics, rescue_metrics
from ..pool.sampler import DEFAULT_MIX, RescueMix, RescueResult, arescue_group, check_mix
from ..records import ModelCall

_FINISH = ("stop", "length", "tool_calls", "content_filter", "function_call")


def policy_for(model: Any, params: dict[str, Any] | None = None) -> EndpointPolicy:
    """The endpoint of an ART model (``inference_base_url``, ``get_inference_name()``,
    ``inference_api_key``), with token capture."""
    return EndpointPolicy(
        model.inference_base_url,
        model.get_inference_name(),
        dict(params or {}),
        api_key=model.inference_api_key or "EMPTY",
        tokens=True,
    )


@dataclass
class RescueAfterEach:
    """The hook (see :func:`rescue_after_each`); its counts and results say what it did."""

    pool: Any
    policy: Any
    task_of: Callable[[Any], Any]
    k: int = 2
    seed: int = 0
    max_concurrency: int = 4
    mix: RescueMix = DEFAULT_MIX
    tried: int = 0
    rescued: int = 0
    extra_rollouts: int = 0
    #: The rule's result per tried group, in the order they were tried.
    results: list[RescueResult] = field(default_factory=list)
    #: This batch so far (since the last :meth:`take_metrics`): groups seen, all-fail groups,
    #: and per rescued group its rewards and the places of its fresh trajectories.
    batch_groups: int = 0
    batch_all_fail: int = 0
    batch_rescued: list[tuple[list[float], list[int]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.mix = check_mix(self.mix)

    def take_metrics(self) -> RescueMetrics:
        """The :class:`~harnessctl.pool.RescueMetrics` of the groups seen since the last call
        (one ``gather_trajectory_groups`` batch), and a fresh count for the next batch."""
        metrics = rescue_metrics(self.batch_groups, self.batch_all_fail, self.batch_rescued)
        self.batch_groups, self.batch_all_fail, self.batch_rescued = 0, 0, []
        return metrics

    async def __call__(self, group: Any) -> Any:
        trajectories = list(group.trajectories)
        self.batch_groups += 1
        if not trajectories or any(t.reward > 0 for t in trajectories):
            return group
        n, self.tried = self.tried, self.tried + 1  # no await before: groups get distinct n
        self.batch_all_fail += 1
        task = self.task_of(group)
        result = await arescue_group(
            self.pool,
            task,
            [{"success": False, "outcome": "wrong_answer"} for _ in trajectories],
            self.policy,
            k=self.k,
            seed=self.seed + 1000 * n,
            max_concurrency=self.max_concurrency,
            mix=self.mix,
        )
        self.results.append(result)
        self.extra_rollouts += result.extra_rollouts
        if not result.replaced:
            return group
        self.rescued += 1
        fresh = dict(zip(result.rows, result.attempted, strict=True))
        new = [
            to_trajectory(fresh[i], type(old), pool_id=self.pool.id, metadata=old.metadata)
            if i in fresh
            else old  # a base failure the keep-failures mix keeps
            for i, old in enumerate(trajectories)
        ]
        self.batch_rescued.append(([float(t.reward) for t in new], sorted(fresh)))
        replacement = type(group)(
            new,
            metadata={**group.metadata, "harnessctl_rescued": result.reason},
            metrics=dict(group.metrics),
            logs=[*group.logs, f"harnessctl: {result.reason} under {', '.join(result.routed)}"],
        )
        replacement.exceptions = list(group.exceptions)
        return replacement


def rescue_after_each(
    pool: Any,
    policy: Any,
    *,
    task_of: Callable[[Any], Any],
    k: int = 2,
    seed: int = 0,
    max_concurrency: int = 4,
    mix: str = DEFAULT_MIX,
) -> RescueAfterEach:
    """An ``after_each`` hook for ``art.gather_trajectory_groups`` (module doc). ``policy`` is
    the model's endpoint (:func:`policy_for`) or a function of the rescue slot giving one
    (``lambda slot: policy_for(model)`` follows the model's latest checkpoint, whose served
    name changes with each step); ``task_of(group)`` the task (a harnessctl Task or raw
    record) the group ran, from its ``metadata`` or its trajectories'. ``mix`` is
    ``"keep-failures"`` (the default) or ``"replace"`` (module doc; a ValueError names them
    otherwise). The ``n``-th group tried uses seeds from ``seed + 1000 * n``; at most
    ``max_concurrency`` rollouts of a group run at a time."""
    return RescueAfterEach(pool, policy, task_of, k, seed, max_concurrency, check_mix(mix))


def to_trajectory(
    out: RolloutOutput, cls: type, *, pool_id: str = "", metadata: dict | None = None
) -> Any:
    """An ART ``Trajectory`` (of class ``cls``) from one pool rollout (module doc)."""
    answered = [c for c in sorted(out.calls, key=lambda c: c.index) if c.status == "ok"]
    context = list(answered[-1].messages) if answered else list(out.messages)
    messages: list[Any] = list(context)
    histories = []
    for call in answered[:-1]:
        at = len(call.messages)
        if at < len(context) and _same_reply(context[at], call) and context[:at] == call.messages:
            messages[at] = _choice(call)
        else:
            histories.append({"messages_and_choices": [*call.messages, _choice(call)],
                              "tools": call.tools})  # fmt: skip
    if answered:
        messages.append(_choice(answered[-1]))
    return cls(
        messages_and_choices=messages,
        tools=answered[-1].tools if answered else None,
        additional_histories=histories,
        reward=float(out.reward),
        metadata={
            **(metadata or {}),
            "harnessctl_pool": pool_id,
            "harnessctl_harness": out.harness,
            "harnessctl_harness_hash": out.harness_hash,
            "harnessctl_rollout_id": out.rollout_id,
            "harnessctl_seed": out.seed,
            "harnessctl_outcome": out.outcome,
        },
    )


def _same_reply(message: dict, call: ModelCall) -> bool:
    return message.get("role") == "assistant" and (message.get("content") or "") == (
        call.reply or ""
    )


def _choice(call: ModelCall) -> Any:
    """The call's reply as an OpenAI ``Choice`` with the server's token ids and logprobs, or a
    plain assistant message when the call has none."""
    message: dict[str, Any] = {"role": "assistant", "content": call.reply}
    if call.tool_calls:
        message["tool_calls"] = call.tool_calls
    ids, logprobs = call.completion_ids, call.logprobs
    if ids is None or logprobs is None or len(ids) != len(logprobs):
        return {**message, "content": call.reply or ""}
    from openai.types.chat.chat_completion import Choice

    content: list[dict[str, Any]] = [
        {"token": f"token_id:{i}", "logprob": lp, "bytes": None, "top_logprobs": []}
        for i, lp in zip(ids, logprobs, strict=True)
    ]
    return Choice.model_validate(
        {
            "index": 0,
            "finish_reason": call.finish_reason if call.finish_reason in _FINISH else "stop",
            "message": message,
            "logprobs": {"content": content},
        }
    )
