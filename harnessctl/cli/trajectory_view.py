"""``harnessctl show``: one rollout's trajectory. Everything in it came from outside (task
text, model replies, harness output), so it is printed through ``render.text`` (control
sequences removed), never as markup."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel

from ..outcomes import explain
from ..records import ModelCall, Trajectory, clip
from .render import text

STYLE = {"success": "green", "wrong_answer": "red", "infra_error": "magenta"}


def _panel(body: object, title: str, border: str, limit: int = 1500, align="left") -> Panel:
    return Panel(text(clip(body, limit)), title=text(title), title_align=align, border_style=border)


def render_trajectory(console: Console, row, trajectory: Trajectory) -> None:
    console.print(_header(row))
    if row.error:
        console.print(text(row.error, style="red"))
    if trajectory.env_calls:  # the episode's own (a simulated user...), not the agent's
        console.print(_env_calls(trajectory.env_calls))
    if trajectory.steps and trajectory.steps[0].kind == "reset":
        console.print(_panel(trajectory.steps[0].observation, "environment (reset)", "green"))
    steps = iter(s for s in trajectory.steps if s.kind == "step")
    turns = trajectory.turns()
    for i, call in enumerate(trajectory.calls):
        if i == 0:
            for m in call.messages[:2]:
                console.print(_panel(m.get("content"), str(m.get("role", "?")), "dim"))
        _call(console, call)
        turn = turns[i] if i < len(turns) else None
        if turn is not None and turn.get("kind") in ("tool", "tool_error"):
            step = next(steps, None)
            if step is not None:
                title = (
                    f"environment step {step.index} [{step.status}{', done' if step.done else ''}]"
                )
                console.print(_panel(step.observation or step.error, title, "green"))
        if turn is not None and turn.get("feedback") is not None:
            title = f"harness -> model ({turn.get('kind')})"
            console.print(_panel(turn["feedback"], title, "blue"))
    result = trajectory.result
    status, answer = (result.status, result.answer) if result else (None, None)
    console.print(text(f"runtime status: {status}  answer: {answer!r}"))
    why = explain(trajectory.outcome, status, result.tool_error_streak if result else 0)
    if why:
        console.print(text(f"outcome {trajectory.outcome}: {why}"))
    if result is not None and result.traceback:
        console.print(_panel(result.traceback, "harness traceback", "red", 3000, "center"))
    if trajectory.score is not None:
        score = trajectory.score
        console.print(text(f"score: success={score.success} detail={score.detail}"))


def _call(console: Console, call: ModelCall) -> None:
    reply = call.reply or call.error or ""
    cut = ", cut at the token limit" if call.finish_reason == "length" else ""
    console.print(_panel(reply, f"model call {call.index} [{call.status}{cut}]", "cyan"))
    for tool_call in call.tool_calls:
        function = tool_call.get("function") or {}
        body = f"{function.get('name')}({function.get('arguments')})"
        console.print(_panel(body, f"tool call {tool_call.get('id')}", "cyan"))


def _env_calls(calls: list[ModelCall]):
    """One line per caller: the environment's own model calls, costed apart."""
    lines = []
    for caller in sorted({c.caller for c in calls}):
        mine = [c for c in calls if c.caller == caller]
        tokens = f"{sum(c.prompt_tokens for c in mine)}+{sum(c.completion_tokens for c in mine)}"
        cost = sum(c.cost_usd for c in mine)
        lines.append(
            f"{caller}: {len(mine)} model calls of the environment, tokens {tokens}, "
            f"${cost:.6f} (not the agent's, not in its budget)"
        )
    return text("\n".join(lines), style="dim")


def _header(row):
    style = STYLE.get(row.outcome, "yellow")
    return text(
        "rollout ",
        (row.id, "bold"),
        f"  task {row.task_id} ({row.category})  seed {row.seed}\n"
        f"harness {row.harness_name} ({row.harness_hash[:12]})  policy {row.policy_id}\n"
        "outcome ",
        (row.outcome, f"bold {style}"),
        f"  steps {row.steps}  calls {row.model_calls}  "
        f"tokens {row.prompt_tokens}+{row.completion_tokens}  wall {row.wall_s:.2f}s",
    )
