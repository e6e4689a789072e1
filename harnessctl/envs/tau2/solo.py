"""tau2's solo mode (``env_options: {solo: true}``): the agent works a ticket alone.

tau2-bench defines it for tasks its ``LLMSoloAgent.check_valid_task`` accepts (in its task
sets: every telecom task, none of airline's or retail's): there is no user (tau2's
``DummyUser``); the domain's environment is built with ``solo_mode=True`` (telecom's solo
policy; the agent's calls of the user's device tools run on the user's device); the agent
gets the task's ``ticket``, its own tools, the user's tools and tau2's ``done`` stop tool, may
only make tool calls, and ends the episode with ``done`` (or the stop token); tau2's
evaluator scores it with ``solo_mode=True``.

This module is light (tau2 is imported inside its functions only); the episode is
:mod:`.solo_episode`. See docs/tau2.md "Solo mode".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harnessctl.envs import Task
from harnessctl.errors import ConfigError

from .package import tau2

#: tau2's stop tool of its solo agent (``LLMSoloAgent.STOP_FUNCTION_NAME``) and its stop token.
STOP_TOOL = "done"
STOP_TOKEN = "###STOP###"
#: telecom's user (device) tools, which tau2's solo agent gets besides its own
#: (tests/envs/tau2/test_tau2_solo.py checks them against tau2's).
USER_TOOLS = (
    "can_send_mms", "check_apn_settings", "check_app_permissions", "check_app_status",
    "check_data_restriction_status", "check_installed_apps", "check_network_mode_preference",
    "check_network_status", "check_payment_request", "check_sim_status", "check_status_bar",
    "check_vpn_status", "check_wifi_calling_status", "check_wifi_status", "connect_vpn",
    "disconnect_vpn", "grant_app_permission", "make_payment", "reboot_device",
    "reseat_sim_card", "reset_apn_settings", "run_speed_test", "set_apn_settings",
    "set_network_mode_preference", "toggle_airplane_mode", "toggle_data",
    "toggle_data_saver_mode", "toggle_roaming", "toggle_wifi", "toggle_wifi_calling",
)  # fmt: skip
#: The observation of a message to the user in solo mode: refused, nothing reaches tau2.
NO_USER = (
    "There is no user in solo mode: a message reaches no one. Act with tool calls only "
    f"(the device tools included), and call `{STOP_TOOL}` when the ticket is resolved."
)
#: Invalid task ids named in the refusal before "and N more".
NAMED = 10


def _tau2_task(task: Task) -> Any:
    return tau2().Task.model_validate(task.record["task"])


def accepts(task: Task) -> bool:
    """Whether tau2's solo agent accepts ``task`` (``LLMSoloAgent.check_valid_task``)."""
    tau2()  # the quiet import first
    from tau2.agent.llm_agent import LLMSoloAgent

    return bool(LLMSoloAgent.check_valid_task(_tau2_task(task)))


def refuse_invalid(tasks: Sequence[Task], where: str) -> None:
    """``ConfigError`` at ``where`` naming the tasks tau2's solo agent does not accept."""
    refused = [t for t in tasks if not accepts(t)]
    if not refused:
        return
    invalid = [t.id for t in refused]
    named = ", ".join(invalid[:NAMED])
    more = f" and {len(invalid) - NAMED} more" if len(invalid) > NAMED else ""
    files = sorted({t.source.rsplit(":", 1)[0] for t in refused if ":" in t.source})
    more += f" (from {', '.join(files)})" if files else ""
    raise ConfigError(
        where,
        f"env_options solo: tau2's solo mode runs only tasks its solo agent accepts "
        f"(LLMSoloAgent.check_valid_task: a ticket and gold actions; in tau2's task sets, "
        f"telecom's), and {len(invalid)} of {len(tasks)} tasks are not: {named}{more}. "
        "Select telecom tasks for a solo suite, or leave solo out.",
    )


def instruction() -> str:
    """tau2's own instruction to its solo agent (``AGENT_SOLO_INSTRUCTION``)."""
    tau2()
    from tau2.agent.llm_agent import AGENT_SOLO_INSTRUCTION

    return str(AGENT_SOLO_INSTRUCTION.format(stop_function_name=STOP_TOOL, stop_token=STOP_TOKEN))


def opening(ticket: str) -> str:
    """The reset's observation: tau2's solo instruction and the ticket, as tau2's solo
    system prompt frames them."""
    return f"{instruction()}\n\n<ticket>\n{ticket.strip()}\n</ticket>"
