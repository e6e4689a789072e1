"""``harnessctl show``: one rollout's trajectory. Everything in it came from outside (task
text, model replies, harness output), so it is printed as ``Text``, never as markup."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

STYLE = {"success": "green", "wrong_answer": "red", "infra_error": "magenta"}


def _clip(text: str | None, limit: int = 1500) -> Text:
    text = text or ""
    clipped = text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"
    return Text(clipped)


def _panel(body: str | None, title: str, border: str, limit: int = 1500, align="left") -> Panel:
    return Panel(_clip(body, limit), title=Text(title), title_align=align, border_style=border)


def render_trajectory(console: Console, row, trajectory: dict) -> None:
    console.print(_header(row))
    if row.error:
        console.print(Text(row.error, style="red"))
    calls = trajectory.get("calls") or []
    turns = [e for e in trajectory.get("events") or [] if e.get("event") == "turn"]
    for i, call in enumerate(calls):
        if i == 0:
            for m in (call.get("messages") or [])[:2]:
                console.print(_panel(str(m.get("content")), str(m.get("role", "?")), "dim"))
        reply = call.get("reply") or call.get("error") or ""
        title = f"model call {call.get('index')} [{call.get('status')}]"
        console.print(_panel(reply, title, "cyan"))
        turn = turns[i] if i < len(turns) else None
        if turn is not None and turn.get("feedback") is not None:
            title = f"harness -> model ({turn.get('kind')})"
            console.print(_panel(str(turn["feedback"]), title, "blue"))
    result = trajectory.get("result") or {}
    console.print(Text(f"runtime status: {result.get('status')}  answer: {result.get('answer')!r}"))
    if result.get("traceback"):
        console.print(_panel(result["traceback"], "harness traceback", "red", 3000, "center"))
    score = trajectory.get("score")
    if score:
        console.print(Text(f"score: success={score.get('success')} detail={score.get('detail')}"))


def _header(row) -> Text:
    style = STYLE.get(row.outcome, "yellow")
    return Text.assemble(
        "rollout ",
        (row.id, "bold"),
        f"  task {row.task_id} ({row.category})  seed {row.seed}\n"
        f"harness {row.harness_name} ({row.harness_hash[:12]})  policy {row.policy_id}\n"
        "outcome ",
        (row.outcome, f"bold {style}"),
        f"  steps {row.steps}  calls {row.model_calls}  "
        f"tokens {row.prompt_tokens}+{row.completion_tokens}  wall {row.wall_s:.2f}s",
    )
