"""Helpers shared by the pool tests: the CLI, a real exported pool, and vLLM-shaped replies
(token ids and logprobs, as a vLLM server gives them when asked) for
tests/helpers/openai_stub.py."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from harnessctl.workspace import init_workspace
from tests.helpers.openai_stub import Reply
from tests.helpers.worlds import World

DIRECTIONS = "execution-recovery,context-construction,observation-shaping"


def cli(ws, *args, ok=True):
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *map(str, args)],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if ok:
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def build_pool(
    root: Path,
    *,
    directions: str = DIRECTIONS,
    evolve: tuple = ("--rollouts", 2),
    profile: tuple = ("--rollouts", 2),
    cache: World | None = None,
) -> tuple[Path, Path, list[str]]:
    """evolve -> profile -> export-pool of dbbench-base and its best siblings under ``root``:
    ``(workspace, pool directory, harness names)``. The defaults are the full run; fewer
    rollouts and a small batch (``evolve=("--rollouts", 1, "--batch", 4, ...)``) make a
    pool in about 20 s. With ``cache`` the workspace reads through that world's rollouts."""
    ws = root / "ws"
    init_workspace(ws)
    with cache.read_through() if cache is not None else contextlib.nullcontext():
        evolved = json.loads(
            cli(ws, "evolve", "dbbench-base", "--directions", directions, "--rounds", 1,
                *evolve, "--json").stdout
        )  # fmt: skip
        names = ["dbbench-base", *sorted(v["name"] for v in evolved["best"].values())]
        assert len(names) >= 3
        cli(ws, "profile", *names, "--split", "train", *profile)
    out = root / "exported" / "dbbench-pool"
    # these pools test the pool's mechanics: every sibling in, reproduced or not (#54)
    cli(ws, "export-pool", "--name", "dbbench-pool", "--out", out, "--include-unreproduced")
    return ws, out, names


def pool_of_world(
    root: Path, world: World, *, directions: str = DIRECTIONS
) -> tuple[Path, Path, list[str]]:
    """profile -> export-pool of dbbench-base and the round-1 siblings ``world`` (the
    session's DBBench evolve) accepted along ``directions``, in a copy of its workspace: the
    pool of :func:`build_pool` without running an evolve of its own."""
    ws = world.copy(root / "ws")
    wanted = directions.split(",")
    siblings = sorted(
        v["name"]
        for v in world.result["variants"]
        if v["round"] == 1 and v["direction"] in wanted and v["parent"] == "dbbench-base"
    )
    names = ["dbbench-base", *siblings]
    assert len(names) >= 3, world.result["variants"]
    cli(ws, "profile", *names, "--split", "train", "--rollouts", 2)
    out = root / "exported" / "dbbench-pool"
    cli(ws, "export-pool", *names, "--name", "dbbench-pool", "--out", out, "--include-unreproduced")
    return ws, out, names


#: a small pool, fast enough for a module fixture (two siblings)
SMALL_POOL = dict(
    directions="execution-recovery,observation-shaping",
    evolve=("--rollouts", 1, "--batch", 4, "--control", 4, "--alpha", 1),
    profile=("--rollouts", 1),
)

END, ROLE = 1000, {"system": 1001, "user": 1002, "assistant": 1003, "tool": 1004}


def toy_ids(text):
    return list((text or "").encode())


def toy_prompt(messages):
    """A byte-level stand-in for a chat template: role marker, content bytes, end marker."""
    ids = []
    for m in messages:
        ids += [ROLE[m["role"]], *toy_ids(m.get("content")), END]
    return ids + [ROLE["assistant"]]


def vllm_reply(text, offset=0):
    """A reply as vLLM gives it when asked for ``return_token_ids`` and ``logprobs``: the
    completion's ids end with the end-of-turn token, as vLLM's do. ``text`` and ``offset`` (added
    to every id) may be functions of the request body (a reply that depends on the
    conversation so far, ids that say which rollout asked)."""

    def text_of(req):
        return text(req) if callable(text) else text

    def offset_of(req):
        return offset(req) if callable(offset) else offset

    def choice(req):
        ids = toy_ids(text_of(req)) + [END]
        extra = {}
        if req.get("return_token_ids"):
            extra["token_ids"] = [i + offset_of(req) for i in ids]
        if req.get("logprobs"):
            extra["logprobs"] = {
                "content": [
                    {"token": str(i), "logprob": -0.001 * (n + 1), "bytes": [], "top_logprobs": []}
                    for n, i in enumerate(ids)
                ]
            }
        return extra

    def body(req):
        if not req.get("return_token_ids"):
            return {}
        return {"prompt_token_ids": [i + offset_of(req) for i in toy_prompt(req["messages"])]}

    completion_tokens = 0 if callable(text) else len(toy_ids(text)) + 1
    return Reply(text, prompt_tokens=50, completion_tokens=completion_tokens,
                 choice_extra=choice, body_extra=body)  # fmt: skip


DBB_REPLIES = [
    "Action: Operation\n```sql\nSELECT COUNT(*) FROM `Game Schedule`\n```",
    'Action: Answer\nFinal Answer: ["1.0"]',
]


def answered(req) -> bool:
    """The conversation holds the policy's own earlier reply (an ``Action:``), not only the
    "Ok." agent turn AgentBench's DBBench protocol injects."""
    return any(
        m.get("role") == "assistant" and "Action:" in str(m.get("content") or "")
        for m in req["messages"]
    )


def dbbench_turns(req):
    """Two turns of a DBBench episode: a query, then (once the conversation has a reply) the
    answer; record 4 of the example suite's dev split is solved by them."""
    return DBB_REPLIES[1] if answered(req) else DBB_REPLIES[0]


def dbbench_record(ws, n=4):
    return json.loads((ws / "examples" / "dbbench" / "dev.jsonl").read_text().splitlines()[n])
