"""The most an evolve run can spend, counted from its settings before it starts.

An evolve's rollouts are not known in advance (a judgement stops at its first decision, an
edit may be rejected before any rollout), so the count here is an upper bound, each part
from the code that spends it: the base evaluation (what is not in the store yet: the
rollouts that surely run); per judgement (directions x rounds x attempts) a smoke rollout,
the gate's looks (parent and child at fresh seeds, :class:`.gate.GatePlan`) and the split
guard's; per accepted edit (at most one per direction and round) its reproduction and the
child's evaluation on the split. Cached rollouts are not subtracted past the base: a rerun
of a finished evolve is bounded as if it were new. The LLM editor makes one call per
judgement; ``--max-editor-cost`` caps its share (checked before each round, so one round's
calls may pass it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..gateway.estimate import CostEstimate, Part, agent_part, price_of, window_of
from ..run.pending import pending_rollouts

DIGEST_BYTES = 8192
"""Size of one failure digest in an editor's prompt, at most about (its task text and steps
are clipped; the rollout's error is a bounded tail)."""
FEEDBACK_BYTES = 2048
"""A rejected patch's reason handed back on a retry, about."""
LINE_BYTES = 120
"""A changed line of an accepted edit, about (the parent's files grow round by round)."""


@dataclass(frozen=True)
class Rollouts:
    """An evolve's rollouts of the agent: ``base`` surely run, ``total`` at most."""

    base: int
    judgements: int
    per_judgement: int
    accepted: int
    per_accepted: int

    @property
    def total(self) -> int:
        return self.base + self.judgements * self.per_judgement + self.accepted * self.per_accepted

    def how(self) -> str:
        return (
            f"base {self.base:,} + {self.judgements} judgement(s) x up to "
            f"{self.per_judgement:,} + {self.accepted} accepted edit(s) x up to "
            f"{self.per_accepted:,}"
        )


def evolve_rollouts(req, store) -> Rollouts:
    """The agent's rollouts of evolve request ``req`` (an ``EvolveRequest``), at most."""
    from .guard import MAX_TASKS
    from .reproduce import FRESH_TRIES

    ev = req.eval
    split = {t.id for t in ev.suite.tasks(ev.split).tasks}
    n_split = len(split)
    outside = sum(1 for t in ev.suite.all_tasks.tasks if t.id not in split)
    judged = max(1, min((req.batch_size or 0) + (req.control_size or 0), n_split))
    plan = req.plan
    if plan is not None:  # sequential: parent and child per pair, look by look
        guard = min(n_split, MAX_TASKS) if req.guarded else 0
        looks = max(
            2 * (t + guard) * plan.seeds_per_look(t) * plan.max_looks for t in range(1, judged + 1)
        )
    else:  # same-batch: the child on the pairs, then parent and child on the confirmation
        looks = (req.batch_size or 0) + (req.control_size or 0)
        looks += 2 * judged * req.confirm_seeds
    directions_rounds = len(req.directions) * req.rounds
    # reproduction: the parent on fresh seeds, the child on one; held-out tasks, parent and
    # child; the parent's null retries of every pair tested
    reproduction = judged * (FRESH_TRIES + 2) + 3 * outside
    return Rollouts(
        base=pending_rollouts(replace(ev, harness=req.base), store),
        judgements=directions_rounds * (req.editor_retries + 1),
        per_judgement=1 + looks,  # its smoke rollout first
        accepted=directions_rounds,
        per_accepted=reproduction + n_split * ev.rollouts,
    )


def evolve_estimate(req, store) -> CostEstimate:
    """Each paid model's share of evolve request ``req``: the agent's, the LLM editor's."""
    from ..policies import is_offline

    parts = []
    if not is_offline(req.eval.policy.model):  # a test double's rollouts are free: not counted
        counted = evolve_rollouts(req, store)
        agent = agent_part(req.eval, counted.total, store, certain=counted.base, how=counted.how())
        if agent is not None:
            parts.append(agent)
    editor = editor_part(req)
    if editor is not None:
        parts.append(editor)
    return CostEstimate(tuple(parts))


def editor_part(req) -> Part | None:
    """The LLM editor's share: one call per judgement, each at most its context window (or,
    where litellm does not know it, about the size of the prompt it is sent) and its reply
    cap (``--editor-param max_tokens``, else litellm's). None for an editor that is not a
    paid model (rules, null, a trained engineer) or an offline test double."""
    from ..policies import is_offline
    from .editors import LLMEditor

    editor = req.editor
    if not isinstance(editor, LLMEditor) or is_offline(editor.model):
        return None
    params = editor.params
    window = window_of(editor.model)
    reply = params.get("max_tokens") or params.get("max_completion_tokens") or window.max_output
    prompt = window.max_input or _prompt_bytes(req, int(reply or 0))
    calls = len(req.directions) * req.rounds * (req.editor_retries + 1)
    return Part(
        role="editor",
        model=editor.model,
        unit="call",
        units=calls,
        price=price_of(editor.model, params, option="--editor-param"),
        max_input=prompt,
        max_output=int(reply) if reply else None,
        cap_usd=req.max_editor_cost,
        cap_slack_units=req.editor_retries + 1,
        how=f"{len(req.directions)} direction(s) x {req.rounds} round(s) x "
        f"{req.editor_retries + 1} attempt(s)"
        + ("" if window.max_input else "; prompt sized from the files and digests, in bytes"),
    )


def _prompt_bytes(req, reply: int) -> int:
    """The largest first prompt in UTF-8 bytes (a tokenizer's tokens are at most its bytes):
    the system text, the direction's brief and files (grown by every earlier round's edit),
    the failure digests; then each retry adds the reply and the feedback."""
    from .editors import SYSTEM, SYSTEM_JSON, render_parts
    from .validate import scope_files

    system = max(len(SYSTEM.encode()), len(SYSTEM_JSON.encode()))
    largest = 0
    for direction in req.directions:
        text = render_parts(direction, scope_files(req.base, direction), [])
        grown = (req.rounds - 1) * direction.max_changed_lines * LINE_BYTES
        largest = max(largest, len(text.encode()) + grown)
    digests = (req.batch_size or 0) * DIGEST_BYTES
    return system + largest + digests + req.editor_retries * (reply + FEEDBACK_BYTES)
