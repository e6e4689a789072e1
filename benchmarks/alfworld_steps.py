#!/usr/bin/env python3
"""What serving ALFWorld through harnessctl costs on top of the game itself.

1. Step round trip: a real gateway in this process serves a real ALFWorld episode; a client
   speaking the sandbox runtime's protocol (`harnessctl.runtime.env.EnvClient`: HTTP over the
   rollout's unix socket, bearer token) plays each game's walkthrough. Per step, the round trip
   minus the game's own time (the gateway's `latency_s` around `episode.step`, recorded in the
   ledger) is the cost of the socket path: request parsing, auth, the step record, JSON.
   The same with a null episode (answers at once) gives the bare path.
2. Per-rollout overhead: the same walkthroughs as full rollouts (`RolloutSession`: the local
   sandbox, the runtime, `alfworld-base`, `replay/alfworld` through the gateway and litellm,
   scoring), against playing them directly in one process (`Game.reset` and `Game.step`, no
   harnessctl around it), each in interleaved rounds. The answer memo is off on both sides
   (`memo=False`), so both pay the game's full time. Each rollout's time is also split from
   its trajectory (`rollout_breakdown_ms`, medians): the sandbox's and runtime's start, the
   game, the model calls, scoring and records after the game, and the rest.
3. Replay throughput at 1 and 2 workers: `replay/alfworld` rollouts of every shipped game
   (`--scale-games`, default all 36) run by 1 and then 2 rollout threads sharing one
   `RolloutSession`, as `harnessctl eval --workers N` runs them (memo off, so every step runs
   in an engine process), in `--rounds` alternating rounds; the ratio of the median
   throughputs, and whether the outcomes are the same. Before it, every game is reset once
   on each of the 2 engine processes, so neither side pays a PDDL translation.

usage: .venv/bin/python benchmarks/alfworld_steps.py [--games 12] [--rounds 3]
       [--scale-games 36] [--json out.json]
Needs the `alfworld` extra and bwrap (Debian's bubblewrap).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harnessctl.envs import Episode, StepResult, get_environment
from harnessctl.envs.alfworld import AlfworldEnvironment
from harnessctl.envs.alfworld.play import Game
from harnessctl.gateway import Budget, Gateway
from harnessctl.runtime.client import GatewayClient
from harnessctl.runtime.env import EnvClient

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class NullEpisode(Episode):
    """Answers every step at once: the socket path alone."""

    def reset(self) -> StepResult:
        return StepResult("You are in the middle of a room.", info={"admissible_commands": []})

    def step(self, tool, argument, arguments) -> StepResult:
        return StepResult("Nothing happens.", info={"admissible_commands": []})

    def close(self) -> None:
        pass


def socket_steps(gateway: Gateway, episode, commands: list[str]) -> list[tuple[float, float]]:
    """(round trip, game time) of each step of ``commands`` through the gateway's socket."""
    token = gateway.open_rollout(
        "bench", model="replay/alfworld", params={}, budget=Budget(), episode=episode
    )
    client = EnvClient(GatewayClient(gateway.address, token))
    client.reset()
    trips = []
    for command in commands:
        t0 = time.perf_counter()
        client.step("act", command)
        trips.append(time.perf_counter() - t0)
    ledger = gateway.close_rollout(token)
    games = [s.latency_s for s in ledger.steps if s.kind == "step"]
    return list(zip(trips, games, strict=True))


def direct(env: AlfworldEnvironment, task) -> float:
    t0 = time.perf_counter()
    game = Game(task.record, memo=False)
    game.reset()
    for command in task.record["walkthrough"]:
        game.step(command)
    game.close()
    return time.perf_counter() - t0


def warm_engines(tasks, engines: int) -> None:
    """Reset every game on each of ``engines`` engine processes (held at once, so each is a
    different one): their PDDL translations are then memoised in all of them."""

    def reset_all(_: int) -> None:
        for task in tasks:
            game = Game(task.record, memo=False)
            game.reset()
            held.append(game)

    held: list[Game] = []
    with ThreadPoolExecutor(engines) as pool:
        list(pool.map(reset_all, range(engines)))
    for game in held:
        game.close()


def breakdown(record, began: float, wall_s: float) -> dict[str, float]:
    """Where one rollout's wall time went, from its trajectory: ``start`` until the runtime's
    first environment request (the sandbox and the runtime starting), ``env`` in the game
    (reset and steps, the gateway's ``latency_s``), ``model`` in the model calls, ``after``
    from the last environment answer to the rollout's end (scoring, records), ``other`` the
    rest (the runtime's own work between requests, the socket path)."""
    trajectory = record.trajectory
    steps = trajectory.steps
    env_s = sum(s.latency_s for s in steps)
    model_s = sum(c.latency_s for c in trajectory.calls)
    start_s = steps[0].started_at - began
    after_s = wall_s - (steps[-1].started_at + steps[-1].latency_s - began)
    other_s = wall_s - start_s - env_s - model_s - after_s
    return {"start": start_s, "env": env_s, "model": model_s, "after": after_s, "other": other_s}


def replay_throughput(env, tasks, harness, policy, workers: int, rounds: int) -> dict:
    """Rollouts per second of ``tasks`` replayed at 1 and at ``workers`` threads."""
    from harnessctl.run.session import RolloutSession

    warm_engines(tasks, workers)
    rates: dict[int, list[float]] = {1: [], workers: []}
    outcomes: dict[int, dict[str, str]] = {}
    with RolloutSession(env, sandbox="local") as session:
        for _ in range(rounds):
            for n in (1, workers):
                t0 = time.perf_counter()
                with ThreadPoolExecutor(n) as pool:
                    records = list(pool.map(lambda t: session.run(harness, t, 0, policy), tasks))
                rates[n].append(len(tasks) / (time.perf_counter() - t0))
                outcomes[n] = {r.task.id: r.outcome.value for r in records}
    one, many = statistics.median(rates[1]), statistics.median(rates[workers])
    return {
        "games": len(tasks),
        "workers": workers,
        "rollouts_per_s": {"1": one, str(workers): many},
        "ratio": many / one,
        "outcomes_unchanged": outcomes[1] == outcomes[workers],
        "all_success": set(outcomes[1].values()) == {"success"},
        "rounds": rounds,
        "load_average_1min_after": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale-games", type=int, default=36)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from harnessctl.harness import load_harness
    from harnessctl.policy import Policy
    from harnessctl.run.session import RolloutSession
    from harnessctl.suite import load_suite

    suite = load_suite(ROOT / "examples" / "alfworld")
    env = get_environment("alfworld", memo=False)
    tasks = suite.tasks("dev").tasks[: args.games]
    for task in tasks:  # warm the PDDL translation of every game: not part of any figure
        direct(env, task)

    gateway = Gateway().start()
    try:
        overhead, game_time, null = [], [], []
        for task in tasks:
            walk = list(task.record["walkthrough"])
            episode = env.open_episode(task, 0)
            for trip, game in socket_steps(gateway, episode, walk):
                overhead.append(trip - game)
                game_time.append(game)
            episode.close()
            null += [trip for trip, _ in socket_steps(gateway, NullEpisode(), walk)]
    finally:
        gateway.close()

    harness = load_harness(ROOT / "harnesses" / "alfworld-base")
    policy = Policy("replay/alfworld")
    steps = sum(len(t.record["walkthrough"]) for t in tasks)
    rollout_s, direct_s = [], []
    parts: dict[str, list[float]] = {}
    with RolloutSession(env, sandbox="local") as session:
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            for task in tasks:
                began, t1 = time.time(), time.perf_counter()
                record = session.run(harness, task, 0, policy)
                assert record.outcome.value == "success", (task.id, record.outcome)
                for name, value in breakdown(record, began, time.perf_counter() - t1).items():
                    parts.setdefault(name, []).append(value)
            rollout_s.append((time.perf_counter() - t0) / len(tasks))
            t0 = time.perf_counter()
            for task in tasks:
                direct(env, task)
            direct_s.append((time.perf_counter() - t0) / len(tasks))

    scaling = replay_throughput(
        env, suite.tasks("dev").tasks[: args.scale_games], harness, policy, 2, args.rounds
    )

    ms = 1000.0
    report = {
        "games": len(tasks),
        "steps": len(overhead),
        "step_overhead_ms": {
            "median": statistics.median(overhead) * ms,
            "p95": percentile(overhead, 0.95) * ms,
        },
        "step_game_ms": {"median": statistics.median(game_time) * ms},
        "null_step_round_trip_ms": {
            "median": statistics.median(null) * ms,
            "p95": percentile(null, 0.95) * ms,
        },
        "rollout_ms": statistics.median(rollout_s) * ms,
        "direct_episode_ms": statistics.median(direct_s) * ms,
        "rollout_overhead_ms": (statistics.median(rollout_s) - statistics.median(direct_s)) * ms,
        "rollout_overhead_per_step_ms": (
            (statistics.median(rollout_s) - statistics.median(direct_s)) * ms * len(tasks) / steps
        ),
        "rollout_breakdown_ms": {name: statistics.median(v) * ms for name, v in parts.items()},
        "rounds": args.rounds,
        "replay_scaling": scaling,
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
