"""Function calling end to end: harness tool specs -> runtime client -> gateway -> litellm ->
an OpenAI-compatible server or an offline custom provider, and the tool calls back again.

The wire format itself (validation, the reply body) is checked on the protocol functions; the
round trips go through a real Gateway and real litellm, against tests/helpers/openai_stub.py.
"""

from __future__ import annotations

import json

import pytest

import harnessctl.runtime as rt
from harnessctl.gateway import Budget, Gateway, llm, protocol
from harnessctl.runtime.client import GatewayClient, ModelReply, ToolCall
from harnessctl.runtime.loop import EventLog, run_episode
from tests.helpers.openai_stub import OpenAIStub

MODEL = "openai/stub-model"
LOOKUP = rt.function_tool(
    "lookup",
    "Look a word up.",
    {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
)
ANSWER = rt.function_tool(
    "answer", "Give the final answer.", {"type": "object", "properties": {"text": {}}}
)
ASK = [{"role": "user", "content": "what does 'hx' mean?"}]


def call(call_id: str, name: str, arguments: dict | str) -> dict:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


# --- the wire format ---------------------------------------------------------------------


def parse(**body) -> tuple[list[dict], dict]:
    return protocol.parse_chat_request(json.dumps({"messages": ASK, **body}).encode())


def test_tools_and_a_tool_call_conversation_are_accepted():
    messages = [
        *ASK,
        {"role": "assistant", "tool_calls": [call("c1", "lookup", {"word": "hx"})]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "harness"}]},
    ]
    choice = {"type": "function", "function": {"name": "lookup"}}
    got, params = protocol.parse_chat_request(
        json.dumps(
            {
                "messages": messages,
                "tools": [LOOKUP],
                "tool_choice": choice,
                "parallel_tool_calls": False,
                "temperature": 0,
            }
        ).encode()
    )
    assert params == {
        "temperature": 0,
        "tools": [LOOKUP],
        "tool_choice": choice,
        "parallel_tool_calls": False,
    }
    assert got[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("c1", "lookup", {"word": "hx"})],
    }
    assert got[2] == {"role": "tool", "content": "harness", "tool_call_id": "c1"}


def test_empty_tools_count_as_none():
    assert parse(tools=[], tool_choice="auto", parallel_tool_calls=True)[1] == {}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"tools": {"name": "x"}}, "tools must be a list"),
        ({"tools": [{"type": "function", "function": {}}]}, "name must be a non-empty string"),
        ({"tools": [{"type": "code_interpreter"}]}, r"tools\[0\] must be"),
        (
            {"tools": [{"type": "function", "function": {"name": "x", "parameters": "{}"}}]},
            "parameters must be a JSON schema object",
        ),
        ({"tools": [LOOKUP, LOOKUP]}, "a second function named 'lookup'"),
        ({"tools": [LOOKUP], "tool_choice": "always"}, "tool_choice must be one of"),
        (
            {"tools": [LOOKUP], "tool_choice": {"type": "function", "function": {"name": "z"}}},
            "not in tools",
        ),
        ({"tool_choice": "required"}, "tool_choice requires tools"),
        ({"tools": [LOOKUP], "parallel_tool_calls": "yes"}, "parallel_tool_calls must be"),
        (
            {"messages": [*ASK, {"role": "tool", "content": "x"}]},
            "needs a tool_call_id",
        ),
        (
            {"messages": [*ASK, {"role": "tool", "tool_call_id": "c9", "content": "x"}]},
            "answers no earlier assistant tool call",
        ),
        (
            {"messages": [*ASK, {"role": "assistant", "tool_calls": [{"id": "c1"}]}]},
            r"tool_calls\[0\] must be",
        ),
        (
            {"messages": [*ASK, {"role": "assistant", "content": None}]},
            "content must be a string",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "must be a text part",
        ),
    ],
)
def test_bad_function_calling_requests_are_refused(body, error):
    with pytest.raises(protocol.RequestError, match=error):
        parse(**body)


def test_reply_body_with_tool_calls():
    calls = [call("c1", "lookup", {"word": "hx"})]
    kw = {"model": "m", "prompt_tokens": 1, "completion_tokens": 2}
    body = protocol.completion_body(content="", finish_reason="stop", tool_calls=calls, **kw)
    [choice] = body["choices"]
    assert choice["message"] == {"role": "assistant", "content": None, "tool_calls": calls}
    assert choice["finish_reason"] == "tool_calls"
    cut = protocol.completion_body(content="hm", finish_reason="length", tool_calls=calls, **kw)
    assert cut["choices"][0]["message"]["content"] == "hm"
    assert cut["choices"][0]["finish_reason"] == "length"  # the calls may be cut short
    plain = protocol.completion_body(content="", finish_reason=None, **kw)["choices"][0]
    assert plain["message"] == {"role": "assistant", "content": ""}
    assert plain["finish_reason"] == "stop"


# --- through the gateway ---------------------------------------------------------------


@pytest.fixture(scope="module")
def litellm_module():
    return llm.get_litellm()


@pytest.fixture
def stub(litellm_module):
    with OpenAIStub() as s:
        yield s


@pytest.fixture
def gw(litellm_module):
    with Gateway(timeout_s=5, retries=0) as g:
        yield g


def open_rollout(gw: Gateway, stub: OpenAIStub) -> str:
    params = {"api_base": stub.url, "api_key": "dummy-key"}
    return gw.open_rollout("r1", model=MODEL, params=params, budget=Budget())


def test_tool_call_round_trip_through_the_gateway(gw, stub):
    stub.calls(("call_a", "lookup", {"word": "hx"}), prompt_tokens=20, completion_tokens=7)
    stub.reply("hx means harness")
    token = open_rollout(gw, stub)
    client = GatewayClient(gw.address, token)

    reply = client.chat(ASK, tools=[LOOKUP], tool_choice="auto", temperature=0.0)
    assert reply.tool_calls == [ToolCall("call_a", "lookup", '{"word": "hx"}')]
    assert (reply.content, reply.finish_reason) == ("", "tool_calls")
    assert reply.raw["choices"][0]["message"]["content"] is None
    sent = stub.chat_requests[0].body
    assert sent is not None
    assert (sent["tools"], sent["tool_choice"]) == ([LOOKUP], "auto")

    followup = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [c.to_dict() for c in reply.tool_calls],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "hx: harness"},
    ]
    assert client.chat(followup, tools=[LOOKUP]).content == "hx means harness"
    sent = stub.chat_requests[1].body
    assert sent is not None
    assert sent["messages"][1]["tool_calls"] == [call("call_a", "lookup", {"word": "hx"})]
    assert sent["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": "hx: harness",
    }

    first, second = gw.close_rollout(token).calls
    assert first.tools == [LOOKUP] and "tools" not in first.params
    assert first.params["tool_choice"] == "auto"
    assert first.tool_calls == [call("call_a", "lookup", {"word": "hx"})]
    assert first.reply == ""
    assert (first.prompt_tokens, first.completion_tokens) == (20, 7)
    assert second.messages == followup and second.tool_calls == [] and second.tools == [LOOKUP]


def test_plain_calls_record_no_tools(gw, stub):
    token = open_rollout(gw, stub)
    reply = GatewayClient(gw.address, token).chat(ASK)
    assert (reply.tool_calls, reply.finish_reason) == ([], "stop")
    assert "tools" not in (stub.chat_requests[0].body or {})
    [rec] = gw.close_rollout(token).calls
    assert (rec.tools, rec.tool_calls) == (None, [])


def test_bad_tool_requests_are_400_and_recorded(gw, stub):
    from harnessctl.runtime.client import ModelRequestError

    token = open_rollout(gw, stub)
    client = GatewayClient(gw.address, token)
    with pytest.raises(ModelRequestError, match="bad_request"):
        client.chat(ASK, tools=[{"type": "function", "function": {"name": 3}}])
    with pytest.raises(ModelRequestError, match="tool_call_id"):
        client.chat([*ASK, {"role": "tool", "content": "x"}])
    ledger = gw.close_rollout(token)
    assert [c.status for c in ledger.calls] == ["bad_request", "bad_request"]
    assert stub.requests == []


def test_offline_custom_provider_tool_calls_reach_the_runtime_client(litellm_module):
    """An offline policy is a litellm custom provider: its tool calls take the same path."""
    from litellm import CustomLLM
    from litellm.types.utils import ChatCompletionMessageToolCall, Function

    seen: list[dict] = []

    class Caller(CustomLLM):
        def completion(self, *args, **kwargs):
            seen.append(kwargs["optional_params"])
            response = kwargs["model_response"]
            function = Function(name="lookup", arguments='{"word": "hx"}')
            response.choices[0].message.content = None
            response.choices[0].message.tool_calls = [
                ChatCompletionMessageToolCall(id="call_x", type="function", function=function)
            ]
            response.choices[0].finish_reason = "tool_calls"
            return response

    saved = list(litellm_module.custom_provider_map)
    litellm_module.custom_provider_map = [*saved, {"provider": "hxfc", "custom_handler": Caller()}]
    try:
        with Gateway(retries=0) as gw:
            token = gw.open_rollout("r", model="hxfc/any", params={}, budget=Budget())
            reply = GatewayClient(gw.address, token).chat(ASK, tools=[LOOKUP])
            [rec] = gw.close_rollout(token).calls
    finally:
        litellm_module.custom_provider_map = saved
    assert seen[0]["tools"] == [LOOKUP]
    assert reply.tool_calls == [ToolCall("call_x", "lookup", '{"word": "hx"}')]
    assert rec.tool_calls == [call("call_x", "lookup", {"word": "hx"})]


# --- the runtime loop ------------------------------------------------------------------


class Lookup:
    """A tool that takes its arguments as a function call (``run_call``)."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def run_call(self, arguments: dict, limit: int = 0) -> rt.Observation:
        self.calls.append(arguments)
        return rt.Observation(text=f"{arguments['word']}: harness")

    def run(self, argument: str, limit: int = 0) -> rt.Observation:
        raise AssertionError("a function call goes to run_call")


class Echo:
    """A text tool (``run`` only), the kind every text-protocol tool is."""

    def run(self, argument: str, limit: int = 0) -> rt.Observation:
        return rt.Observation(text=f"echo {argument}")


class CallingHarness(rt.Harness):
    tool_specs = [LOOKUP, rt.function_tool("echo"), ANSWER]
    tool_choice = "auto"
    answer_tool = "answer"


class Script:
    """A model that answers from a list of ModelReplies; records what it was sent."""

    def __init__(self, *replies: ModelReply) -> None:
        self.replies = list(replies)
        self.seen: list[tuple[list[dict], dict]] = []

    def chat(self, messages, **params):
        self.seen.append((messages, params))
        return self.replies.pop(0)


def calls_reply(*calls: ToolCall, content: str = "") -> ModelReply:
    return ModelReply(content=content, usage={}, raw={}, tool_calls=list(calls))


def episode(tmp_path, model, harness_cls=CallingHarness, settings=None):
    harness = harness_cls(tmp_path, tmp_path, {"max_rounds": 4, **(settings or {})})
    harness.tools = {"lookup": Lookup(), "echo": Echo()}
    state = rt.State(task={"instruction": "What does hx mean?"}, max_rounds=harness.max_rounds)
    log = EventLog(tmp_path / "events.jsonl")
    run_episode(harness, state, model, log)
    log.close()
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    return harness, state, events


def test_a_harness_with_tool_specs_runs_a_tool_call_and_replays_it(tmp_path):
    model = Script(
        calls_reply(ToolCall("c1", "lookup", '{"word": "hx"}'), content="Let me look."),
        calls_reply(ToolCall("c2", "answer", '{"text": "harness"}')),
    )
    harness, state, events = episode(tmp_path, model)
    assert (state.status, state.answer) == ("answered", "harness")
    assert harness.tools["lookup"].calls == [{"word": "hx"}]

    first = state.turns[0]
    assert first.action == rt.Action(
        kind="tool", tool="lookup", argument="hx", call_id="c1", arguments={"word": "hx"}
    )
    assert first.action.is_call and first.feedback == "hx: harness"
    assert state.turns[1].kind == "answer"

    messages, params = model.seen[1]
    assert params == {"tools": CallingHarness.tool_specs, "tool_choice": "auto"}
    assert messages[-2:] == [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [call("c1", "lookup", {"word": "hx"})],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "hx: harness"},
    ]
    assert events[0]["tool_calls"] == [call("c1", "lookup", {"word": "hx"})]
    assert events[0]["action"]["call_id"] == "c1"
    assert events[0]["action"]["arguments"] == {"word": "hx"}


def test_one_call_per_turn_the_others_are_answered_as_not_run(tmp_path):
    model = Script(
        calls_reply(ToolCall("c1", "echo", '{"text": "a"}'), ToolCall("c2", "echo", "{}")),
        calls_reply(ToolCall("c3", "answer", '{"text": "done"}')),
    )
    _, state, _ = episode(tmp_path, model)
    assert state.turns[0].feedback == "echo a"  # one string argument goes to run()
    messages, _ = model.seen[1]
    assert [m["role"] for m in messages[-3:]] == ["assistant", "tool", "tool"]
    assert messages[-2] == {"role": "tool", "tool_call_id": "c1", "content": "echo a"}
    assert messages[-1]["tool_call_id"] == "c2"
    assert messages[-1]["content"] == rt.harness.CALL_NOT_RUN


def test_invalid_arguments_and_unknown_functions_are_format_failures(tmp_path):
    class Lenient(CallingHarness):
        def recover(self, failure, state):
            return rt.Recovery("continue")

    model = Script(
        calls_reply(ToolCall("c1", "lookup", '{"word": ')),
        calls_reply(ToolCall("c2", "delete_all", "{}")),
        calls_reply(ToolCall("c3", "echo", '{"a": "x", "b": "y"}')),
        calls_reply(ToolCall("c4", "answer", '"just text"')),
    )
    _, state, _ = episode(tmp_path, model, Lenient)
    kinds = [(t.kind, t.action.error if t.action else None) for t in state.turns]
    assert kinds[0][0] == "invalid_format" and "not valid JSON" in (kinds[0][1] or "")
    assert kinds[1] == ("invalid_format", "unknown tool 'delete_all'")
    assert state.turns[2].kind == "tool_error"  # a text tool takes exactly one string
    assert "takes one string argument" in (state.turns[2].feedback or "")
    assert kinds[3][0] == "invalid_format" and "must be a JSON object" in (kinds[3][1] or "")
    messages, _ = model.seen[1]
    assert messages[-1]["role"] == "tool" and messages[-1]["tool_call_id"] == "c1"
    assert "not valid JSON" in messages[-1]["content"]


def test_text_harnesses_still_read_text_when_the_model_calls_a_function(tmp_path):
    """A text-protocol harness that ignores tool calls still sends a valid conversation."""

    class TextOnly(rt.Harness):
        def parse_action(self, reply, state):
            return rt.Action(kind="tool", tool="echo", argument=reply)

    model = Script(calls_reply(ToolCall("c1", "echo", "{}"), content="hi"), calls_reply())
    _, state, _ = episode(tmp_path, model, TextOnly, {"max_rounds": 2})
    messages, params = model.seen[1]
    assert params == {}  # no tool specs, nothing sent
    assert messages[-3:] == [
        {"role": "assistant", "content": "hi", "tool_calls": [call("c1", "echo", {})]},
        {"role": "tool", "tool_call_id": "c1", "content": rt.harness.CALL_NOT_RUN},
        {"role": "user", "content": "echo hi"},
    ]


def test_settings_choose_the_tool_choice(tmp_path):
    model = Script(calls_reply(ToolCall("c1", "answer", '{"text": "x"}')))
    episode(tmp_path, model, settings={"tool_choice": "required"})
    assert model.seen[0][1]["tool_choice"] == "required"


def test_loop_through_the_real_gateway(tmp_path, gw, stub):
    """The history the runtime replays is what the gateway accepts and forwards upstream."""
    stub.calls(("call_1", "lookup", {"word": "hx"}))
    stub.calls(("call_2", "answer", {"text": "harness"}), content="Found it.")
    token = open_rollout(gw, stub)
    _, state, _ = episode(tmp_path, GatewayClient(gw.address, token))
    assert (state.status, state.answer) == ("answered", "harness")
    sent = stub.chat_requests[1].body
    assert sent is not None and sent["tools"] == CallingHarness.tool_specs
    assert sent["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "hx: harness",
    }
    calls = gw.close_rollout(token).calls
    assert [c.tool_calls[0]["id"] for c in calls] == ["call_1", "call_2"]
    assert calls[1].reply == "Found it."


FC_HARNESS = """
import json
from harnessctl_runtime import Action, Harness, Observation, function_tool


class FunctionCallingDBBench(Harness):
    tool_specs = [
        function_tool("execute_sql", "Run one SQL statement.",
                      {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}),
        function_tool("commit_final_answer", "Submit the answer.",
                      {"type": "object", "properties": {"answers": {"type": "array"}},
                       "required": ["answers"]}),
    ]
    answer_tool = "commit_final_answer"

    def parse_action(self, reply, state):
        action = super().parse_action(reply, state)
        if action.kind == "answer" and action.arguments is not None:
            action.argument = json.dumps(action.arguments.get("answers"))
        return action

    def mediate_tool(self, action, state):
        if action.tool == "execute_sql":
            return self.tools["sql"].run(action.argument, limit=self.observation_limit)
        return Observation(text=f"unknown tool {action.tool}", ok=False)
"""


def test_a_function_calling_harness_solves_dbbench_with_replay_end_to_end(tmp_path, workspace):
    """replay/dbbench answers with tool calls when the request offers the functions: through
    the gateway, the runtime's typed actions, the sandboxed SQL tool, scoring and the store."""
    from harnessctl.harness import load_harness
    from harnessctl.policy import Policy
    from harnessctl.run.evaluate import EvalRequest, evaluate
    from harnessctl.suite import load_suite
    from harnessctl.workspace import load_workspace

    harness = tmp_path / "dbbench-fc-test"
    harness.mkdir()
    (harness / "harness.yaml").write_text(
        "name: dbbench-fc-test\nenv: dbbench\nentry: harness.py:FunctionCallingDBBench\n"
    )
    (harness / "harness.py").write_text(FC_HARNESS)
    store = load_workspace(workspace).open_store()
    tasks = ["dev-000", "dev-004", "dev-045"]  # an INSERT, a query, an UPDATE
    request = EvalRequest(
        load_harness(harness),
        load_suite(workspace / "examples" / "dbbench"),
        "dev",
        Policy("replay/dbbench"),
        rollouts=1,
        task_ids=tasks,
    )
    result = evaluate(request, store)
    assert sorted(r.task_id for r in result.rows) == tasks
    assert {r.outcome for r in result.rows} == {"success"}
    for row in result.rows:
        trajectory = store.trajectory(row)
        assert trajectory.calls[0].tools and trajectory.calls[-1].tool_calls
        names = [c.tool_calls[0]["function"]["name"] for c in trajectory.calls]
        assert names[-1] == "commit_final_answer"
        logged = store.calls(row.id)
        assert json.loads(logged[-1].tool_calls_json)[0]["function"]["name"] == names[-1]
