from __future__ import annotations

from rich.console import Console
from rich.panel import Panel

STYLE = {"success": "green", "wrong_answer": "red", "infra_error": "magenta"}


def _clip(text: str | None, limit: int = 1500) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


def render_trajectory(console: Console, row, trajectory: dict) -> None:
    style = STYLE.get(row.outcome, "yellow")
    console.print(
        f"rollout [bold]{row.id}[/]  task {row.task_id} ({row.category})  seed {row.seed}\n"
        f"harness {row.harness_name} ({row.harness_hash[:12]})  policy {row.policy_id}\n"
        f"outcome [bold {style}]{row.outcome}[/]  steps {row.steps}  calls {row.model_calls}  "
        f"tokens {row.prompt_tokens}+{row.completion_tokens}  wall {row.wall_s:.2f}s"
    )
    if row.error:
        console.print(f"[red]{row.error}[/]")
    calls = trajectory.get("calls") or []
    turns = [e for e in trajectory.get("events") or [] if e.get("event") == "turn"]
    for i, call in enumerate(calls):
        messages = call.get("messages") or []
        if i == 0:
            for m in messages[:2]:
                console.print(
                    Panel(
                        _clip(str(m.get("content"))),
                        title=m.get("role", "?"),
                        title_align="left",
                        border_style="dim",
                    )
                )
        console.print(
            Panel(
                _clip(call.get("reply") or call.get("error") or ""),
                title=f"model call {call.get('index')} [{call.get('status')}]",
                title_align="left",
                border_style="cyan",
            )
        )
        turn = turns[i] if i < len(turns) else None
        if turn is not None and turn.get("feedback") is not None:
            console.print(
                Panel(
                    _clip(str(turn["feedback"])),
                    title=f"harness -> model ({turn.get('kind')})",
                    title_align="left",
                    border_style="blue",
                )
            )
    result = trajectory.get("result") or {}
    console.print(f"runtime status: {result.get('status')}  answer: {result.get('answer')!r}")
    if result.get("traceback"):
        console.print(
            Panel(_clip(result["traceback"], 3000), title="harness traceback", border_style="red")
        )
    score = trajectory.get("score")
    if score:
        console.print(f"score: success={score.get('success')} detail={score.get('detail')}")
