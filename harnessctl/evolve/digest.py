"""Failure digests: what an editor sees of a failed rollout (never the gold label)."""

from __future__ import annotations

from dataclasses import dataclass

from ..records import Trajectory, clip


@dataclass(frozen=True)
class Digest:
    task_id: str
    category: str
    seed: int
    outcome: str
    error: str | None
    task_text: str
    steps: list[dict]

    def render(self) -> str:
        lines = [f"### task {self.task_id} ({self.category}), seed {self.seed}: {self.outcome}"]
        if self.error:
            lines.append(f"error: {self.error}")
        lines.append(f"task: {self.task_text}")
        for step in self.steps:
            lines.append(f"- round {step['round']} [{step['kind']}] model: {step['reply']}")
            if step.get("feedback"):
                lines.append(f"  harness replied: {step['feedback']}")
        return "\n".join(lines)

    def text(self) -> str:
        """Everything matched by rule-based signals."""
        return self.render().lower()


def _clip(text: object, limit: int) -> str:
    return clip(str(text or ""), limit, one_line=True, suffix="...")


def digest(row, trajectory: Trajectory, *, max_steps: int = 4, clip: int = 240) -> Digest:
    """Summarise one failed rollout: the last steps, where it went wrong, the error."""
    turns = trajectory.turns()
    interesting = [t for t in turns if t.get("kind") != "tool"] or turns
    chosen = (interesting[:1] + turns[-(max_steps - 1) :]) if turns else []
    seen, steps = set(), []
    for t in chosen:
        key = t.get("round")
        if key in seen:
            continue
        seen.add(key)
        steps.append(
            {
                "round": key,
                "kind": t.get("kind"),
                "reply": _clip(t.get("reply"), clip),
                "feedback": _clip(t.get("feedback"), clip),
            }
        )
    steps.sort(key=lambda s: s["round"] or 0)
    task_text = _clip(trajectory.task_text(), 400)
    return Digest(
        task_id=row.task_id,
        category=row.category,
        seed=row.seed,
        outcome=row.outcome,
        error=row.error,
        task_text=task_text,
        steps=steps,
    )
