"""``sim/tau2``: a simulated tau2-bench agent. A TEST DOUBLE, not a model.

It knows the task's gold (the environment's oracle: ``replay/tau2``'s script, see
:mod:`.gold`) and plays it one turn at a time, as function calls of the offered tools and
messages to the user, failing in seeded ways that depend on what the harness shows it. Each
(seed, task) draws at most one failure mode, at one drawn step of the script:

- ``arguments``: at a drawn tool call, it leaves out one argument the tool's schema requires
  (the request's ``tools``). It sends the same incomplete call again until a message from
  the harness answering it says the argument is "required by the schema" (a harness that
  checks calls against the schema before running them), then sends the whole call.
  ``tau2-base`` runs the incomplete call, tau2 answers with an error each time, and the
  conversation ends at tau2's tool-error limit (``wrong_answer``).
- ``giveup``: at a drawn tool call with an id argument (a name ending in ``_id``), it sends
  the id mistyped (an ``X`` appended); when the tool fails, it gives up and tells the user
  it could not help, which ends the conversation (``wrong_answer``), unless the harness's
  answer to the failed call tells it to "try again" (a harness that recovers from tool
  errors), then it sends the right call.
- ``empty``: at a drawn step, it answers with an empty reply (no text, no call), until a
  message from the harness after it asks it to "call a tool or write" (a harness that
  re-prompts on an empty reply). ``tau2-base`` ends the episode on an empty reply
  (``invalid_format``).
- ``hasty``: at a drawn write action (a call of a tool tau2 marks ``ToolType.WRITE``:
  :data:`WRITE_TOOLS`), in a task whose reward basis checks the database, it runs the call
  with one detail slipped (:func:`slipped`: the next value of an enum, a number plus one, the
  last digit of a text moved on: a cabin, a bag count, a zip code; never an id), and takes the
  step as done. tau2 runs it, the database ends unlike the gold's and tau2's database check
  fails (``wrong_answer``). A slip tau2 refuses (an error) is corrected on the next call.
  When any message of the harness (its system prompt, an answer) says "before any write
  action" (a harness that has write actions confirmed, as the domain policies require), it
  first asks the user to confirm each write action, listing its details (a question; the
  scripted user agrees), and then runs it right.
- ``stop``: at the gold's transfer (a ``transfer_to_human_agents`` call) or, in a task
  without one, at a closing that tells the user something (tau2's ``communicate_info``), it
  says goodbye with tau2's ``###STOP###`` instead (:data:`GOODBYE`), which ends the
  conversation: tau2's action or communicate check fails (``wrong_answer``). Once a message
  from the harness answering the goodbye says "before ending the conversation" (a harness
  that checks a closing message before sending it), it does the step.
- ``forget``: at a drawn write action at least ``FORGET_AFTER`` steps into the script, in a
  task whose reward basis checks the database, with an argument whose value the user gave in
  their first message (an address, a zip code, a cabin), it slips that value as ``hasty``
  does (confirming the write does not help: it lists the detail as it remembers it). It
  remembers the value when the newest messages (after its last reply) restate it in a
  reminder that says "the user said at the start" (a harness that keeps the user's facts next
  to the latest message); such a reminder is not part of the answer it follows.

A step of the script counts as carried out when the reply that made it is answered by
anything but an error (a tau2 ``Error: ...`` result, or the harness saying it was not sent or
rejected). Randomness: each mode draws once per (seed, task id) and is on below its rate; of
those on, the one with the smallest draw / rate is the episode's (raising ``skill`` only
switches modes off). Rates are ``BASE_RATES`` scaled by ``2 * (1 - skill)``; ``rate_<mode>``
params override them. The reply is a pure function of (oracle, messages, seed, params, tools).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harnessctl.policies import OracleSim
from harnessctl.policies.sim_signals import field_of, offered_functions, text_of

MODES = ("arguments", "giveup", "empty", "hasty", "stop", "forget")
BASE_RATES: dict[str, float] = {
    "arguments": 0.5,
    "giveup": 0.5,
    "empty": 0.5,
    "hasty": 0.5,
    "stop": 0.5,
    "forget": 0.5,
}
DEFAULT_SKILL = 0.5
#: What a harness says when it checks a call against the tool's schema (``arguments``).
SCHEMA_WORDS = "required by the schema"
#: What a harness says when it asks for a failed call to be retried (``giveup``).
RETRY_WORDS = "try again"
#: What a harness says when it re-prompts after an empty reply (``empty``).
REPROMPT_WORDS = "call a tool or write"
#: What a harness says (in any message: its system prompt, an answer) when it has write
#: actions confirmed with the user first (``hasty``).
CONFIRM_WORDS = "before any write action"
#: What a harness says when it restates the user's first message late in the context
#: (``forget``); what follows it in a message is a reminder, not an answer.
KEEP_WORDS = "the user said at the start"
#: ``forget`` strikes only at steps of the script this far in (this many steps before it).
FORGET_AFTER = 4
#: What a harness says when it answers a closing message with a check (``stop``).
CLOSING_WORDS = "before ending the conversation"
GIVE_UP = "I am sorry, I could not complete your request."
#: ``stop``'s bare goodbye: tau2's agent stop token ends the conversation at once.
GOODBYE = "Thank you for contacting us. Have a great day! ###STOP###"
#: The replay's closing when there is nothing to tell the user and no transfer (see .gold).
BARE_CLOSING = "Everything is done."
TRANSFER_TOOL = "transfer_to_human_agents"
#: The agent tools that change the domain's database: those tau2 marks ``ToolType.WRITE``
#: (tests/envs/tau2/test_tau2_sim.py checks the set against tau2's own marks).
WRITE_TOOLS = frozenset(
    {
        # airline
        "book_reservation", "cancel_reservation", "send_certificate",
        "update_reservation_baggages", "update_reservation_flights",
        "update_reservation_passengers",
        # retail
        "cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address",
        "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address",
        "return_delivered_order_items",
        # telecom
        "disable_roaming", "enable_roaming", "refuel_data", "resume_line",
        "send_payment_request", "suspend_line",
    }
)  # fmt: skip
#: Words in an answer that mean the reply was not carried out.
FAILED_WORDS = ("not sent", "not run", "rejected", SCHEMA_WORDS)


@dataclass(frozen=True)
class Exchange:
    """One reply of the agent (its call or its text) and what came back after it."""

    call: tuple[str, str] | None  # (name, arguments as canonical JSON)
    text: str
    feedback: str


def _canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True)


def _call(message: Any) -> tuple[str, str] | None:
    calls = field_of(message, "tool_calls") or []
    if not calls:
        return None
    function = field_of(calls[0], "function") or {}
    raw = field_of(function, "arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        arguments = raw
    return str(field_of(function, "name")), _canonical(arguments)


def read_history(messages: Sequence[Any]) -> list[Exchange]:
    """The agent's replies, each with the messages that followed it (up to a reminder of
    the user's first message, see ``KEEP_WORDS``)."""
    turns: list[Exchange] = []
    for message in messages or []:
        role = str(field_of(message, "role") or "user")
        if role == "assistant":
            text = text_of(field_of(message, "content")).strip()
            turns.append(Exchange(_call(message), text, ""))
        elif turns and role in ("user", "tool"):
            last = turns[-1]
            text = text_of(field_of(message, "content"))
            cut = text.lower().find(KEEP_WORDS)  # a reminder is not an answer
            text = text if cut < 0 else text[:cut]
            turns[-1] = Exchange(last.call, last.text, f"{last.feedback}\n{text}".strip())
    return turns


def failed(exchange: Exchange) -> bool:
    """The reply was not carried out: an error came back, or the harness did not send it."""
    feedback = exchange.feedback.strip()
    low = feedback.lower()
    return feedback.startswith("Error") or any(w in low for w in FAILED_WORDS)


def _expected(step: Mapping[str, Any]) -> tuple[tuple[str, str] | None, str]:
    call = step.get("tool_call")
    if call:
        return (str(call["name"]), _canonical(call.get("arguments") or {})), ""
    return None, str(step.get("text") or "")


def progress_at(
    script: Sequence[Mapping[str, Any]],
    history: Sequence[Exchange],
    stand_ins: Mapping[int, tuple[str, str]] | None = None,
) -> tuple[int, int]:
    """How many steps of the script were carried out, in order, and where in ``history`` the
    current step began (just after the reply that carried out the last one). ``stand_ins``:
    a call that carries out a step in place of the script's (``hasty``'s wrong call)."""
    done, start = 0, 0
    for index, exchange in enumerate(history):
        if done >= len(script) or failed(exchange):
            continue
        call, text = _expected(script[done])
        stand_in = (stand_ins or {}).get(done)
        matched = exchange.call is not None and exchange.call in (call, stand_in)
        if matched or (call is None and exchange.text == text):
            done, start = done + 1, index + 1
    return done, start


def progress(script: Sequence[Mapping[str, Any]], history: Sequence[Exchange]) -> int:
    """How many steps of the script were carried out, in order."""
    return progress_at(script, history)[0]


@dataclass(frozen=True)
class Plan:
    """The episode-level draws for one (seed, task)."""

    mode: str | None
    step: int  # the script step the mode applies to
    key: str  # arguments / giveup / hasty: the argument left out, mistyped or slipped


def _parameters(tools: Sequence[Any], name: str) -> dict[str, Any]:
    for tool in tools or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == name:
            return dict(function.get("parameters") or {})
    return {}


def _required(tools: Sequence[Any], name: str) -> list[str]:
    return [str(r) for r in _parameters(tools, name).get("required") or []]


def slipped(value: Any, schema: Mapping[str, Any]) -> Any:
    """``hasty``'s wrong value for an argument, one the tool accepts as well as the right
    one: the next value of an enum, a number plus one, the last digit of a text moved on by
    one (a house number, a zip code); None when there is none (ids are ``giveup``'s)."""
    options = schema.get("enum")
    if isinstance(options, list) and value in options and len(options) > 1:
        return options[(options.index(value) + 1) % len(options)]
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        digits = [i for i, c in enumerate(value) if c.isdigit()]
        if digits:
            i = digits[-1]
            return f"{value[:i]}{(int(value[i]) + 1) % 10}{value[i + 1 :]}"
    return None


def _slip_places(call: Mapping[str, Any], tools: Sequence[Any]) -> list[str]:
    if call.get("name") not in WRITE_TOOLS:
        return []
    properties = _parameters(tools, str(call["name"])).get("properties") or {}
    keys = []
    for key, value in (call.get("arguments") or {}).items():
        if key == "id" or key.endswith(("_id", "_ids")) or key not in properties:
            continue
        if slipped(value, properties[key]) is not None:
            keys.append(key)
    return keys


def _slip_call(call: Mapping[str, Any], key: str, tools: Sequence[Any]) -> dict[str, Any]:
    arguments = dict(call.get("arguments") or {})
    properties = _parameters(tools, str(call["name"])).get("properties") or {}
    arguments[key] = slipped(arguments[key], properties.get(key) or {})
    return arguments


def plan_episode(
    oracle: Mapping[str, Any],
    seed: int,
    rates: Mapping[str, float],
    tools: Sequence[Any],
    opening: str = "",
) -> Plan:
    """Draw the episode's mode (as ``sim/alfworld`` does) and where it strikes; a mode that
    has nowhere to strike in this task is off. ``opening``: the user's first message (where
    ``forget``'s facts come from)."""
    script = list(oracle.get("script") or [])
    task_id = str(oracle.get("task_id", ""))
    checks_db = "db" in str(oracle.get("category", "")).split(":")[-1].split("+")
    rng = random.Random(f"{seed}|{task_id}|details")
    places: dict[str, list[tuple[int, str]]] = {"empty": [(i, "") for i in range(len(script))]}
    for name in ("arguments", "giveup", "hasty", "stop", "forget"):
        places[name] = []
    for index, step in enumerate(script):
        call = step.get("tool_call")
        if not call:
            continue
        arguments = call.get("arguments") or {}
        for key in _required(tools, str(call["name"])):
            if key in arguments:
                places["arguments"].append((index, key))
        for key, value in arguments.items():
            if key.endswith("_id") and isinstance(value, str):
                places["giveup"].append((index, key))
        if checks_db:
            slips = _slip_places(call, tools)
            places["hasty"] += [(index, key) for key in slips]
            if index >= FORGET_AFTER:
                told = [k for k in slips if str(arguments[k]) in opening]
                places["forget"] += [(index, key) for key in told]
        if call.get("name") == TRANSFER_TOOL and not places["stop"]:
            places["stop"].append((index, ""))
    if script and not places["stop"] and str(script[-1].get("text")) != BARE_CLOSING:
        places["stop"].append((len(script) - 1, ""))
    best: tuple[float, str] | None = None
    for name in MODES:
        rate = max(0.0, rates.get(name, 0.0))
        draw = random.Random(f"{seed}|{task_id}|{name}").random()
        if places[name] and draw < rate and (best is None or draw / rate < best[0]):
            best = (draw / rate, name)
    if best is None:
        return Plan(None, -1, "")
    step, key = rng.choice(places[best[1]])
    return Plan(best[1], step, key)


def _call_of(call: Mapping[str, Any]) -> tuple[str, str]:
    return str(call["name"]), _canonical(call.get("arguments") or {})


def _as_call(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"name": name, "arguments": dict(arguments)}]}


def first_message(messages: Sequence[Any]) -> str:
    """The user's first message in the context (the opening of the conversation)."""
    for message in messages or []:
        if str(field_of(message, "role") or "user") == "user":
            return text_of(field_of(message, "content"))
    return ""


def kept(messages: Sequence[Any], value: Any) -> bool:
    """Whether the newest messages (after the agent's last reply) restate the user's fact
    ``value`` in a reminder that says ``KEEP_WORDS``."""
    tail: list[str] = []
    for message in messages or []:
        if str(field_of(message, "role") or "user") == "assistant":
            tail = []
        else:
            tail.append(text_of(field_of(message, "content")))
    return any(KEEP_WORDS in t.lower() and str(value) in t for t in tail)


def confirmation(call: Mapping[str, Any]) -> str:
    """The question the agent asks before a write action when told to confirm them."""
    details = json.dumps(call.get("arguments") or {}, sort_keys=True)
    return f"Before I go ahead, please confirm: {call['name']} with {details}. Shall I proceed?"


def told_to_confirm(messages: Sequence[Any]) -> bool:
    """Whether any message of the harness (not the agent's own) says ``CONFIRM_WORDS``."""
    return any(
        str(field_of(m, "role") or "user") != "assistant"
        and CONFIRM_WORDS in text_of(field_of(m, "content")).lower()
        for m in messages or []
    )


def next_reply(
    oracle: Mapping[str, Any],
    messages: Sequence[Any],
    seed: int,
    rates: Mapping[str, float],
    tools: Sequence[Any],
) -> str | dict[str, Any]:
    """The agent's next reply to ``messages`` (see the module docstring)."""
    script = list(oracle.get("script") or [])
    if not script:
        return ""
    plan = plan_episode(oracle, seed, rates, tools, first_message(messages))
    history = read_history(messages)
    stand_ins: dict[int, tuple[str, str]] = {}
    if plan.mode in ("hasty", "forget"):
        slip = script[plan.step]["tool_call"]
        stand_ins[plan.step] = (str(slip["name"]), _canonical(_slip_call(slip, plan.key, tools)))
    done, start = progress_at(script, history, stand_ins)
    step = script[min(done, len(script) - 1)]
    call = step.get("tool_call")
    current = history[start:]
    intended = call  # forget: the call as the agent remembers it
    forgot = plan.mode == "forget" and done == plan.step and call is not None
    if forgot and call is not None and not kept(messages, call["arguments"][plan.key]):
        slip = {"name": call["name"], "arguments": _slip_call(call, plan.key, tools)}
        if not any(e.call == _call_of(slip) and failed(e) for e in current):
            intended = slip
    confirm = call is not None and call.get("name") in WRITE_TOOLS and told_to_confirm(messages)
    if confirm and intended is not None:
        question = confirmation(intended)
        if not any(e.text == question and not failed(e) for e in current):
            return question
    if intended is not None and intended is not call:
        return _as_call(str(intended["name"]), intended["arguments"])
    if plan.mode is not None and done == plan.step:
        if plan.mode == "empty":
            empty = [e for e in history if e.call is None and not e.text]
            if not any(REPROMPT_WORDS in e.feedback.lower() for e in empty):
                return ""
        elif plan.mode == "stop":
            said = [e for e in history if e.call is None and e.text == GOODBYE]
            if not any(CLOSING_WORDS in e.feedback.lower() for e in said):
                return GOODBYE
        elif call is not None and plan.mode != "forget":  # forget: above
            arguments = dict(call.get("arguments") or {})
            if plan.mode == "arguments":
                wrong = {k: v for k, v in arguments.items() if k != plan.key}
                tried = [e for e in history if e.call == (call["name"], _canonical(wrong))]
                if not any(SCHEMA_WORDS in e.feedback for e in tried):
                    return _as_call(str(call["name"]), wrong)
            elif plan.mode == "hasty":
                wrong = _slip_call(call, plan.key, tools)
                tried = [e for e in current if e.call == (call["name"], _canonical(wrong))]
                if not confirm and not tried:
                    return _as_call(str(call["name"]), wrong)
            else:  # giveup
                wrong = {**arguments, plan.key: f"{arguments[plan.key]}X"}
                tried = [e for e in history if e.call == (call["name"], _canonical(wrong))]
                if not tried:
                    return _as_call(str(call["name"]), wrong)
                if not any(RETRY_WORDS in e.feedback.lower() for e in tried):
                    return GIVE_UP
    if call and call.get("name") in offered_functions(tools):
        return _as_call(str(call["name"]), call.get("arguments") or {})
    return str(step.get("text") or "")


class SimTau2(OracleSim):
    """``sim/tau2`` as an offline policy plugin: the environment's oracle is its view."""

    description = (
        "TEST DOUBLE, not a model: gold-backed simulated tau2-bench agent with seeded, "
        "harness-sensitive failure modes (params: skill, rate_arguments, rate_giveup, "
        "rate_empty, rate_hasty, rate_stop, rate_forget)"
    )

    base_rates = BASE_RATES
    default_skill = DEFAULT_SKILL

    def reply(
        self,
        view: Mapping[str, Any],
        messages: Sequence[Any],
        seed: int,
        params: Mapping[str, Any],
        tools: Sequence[Any],
    ) -> str | dict[str, Any]:
        return next_reply(view, messages, seed, self.rates(params), tools)
