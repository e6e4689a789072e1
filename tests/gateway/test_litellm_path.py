"""harnessctl.gateway.llm.complete through real litellm against a local OpenAI-compatible stub."""

from __future__ import annotations

import socket
import time

import pytest

from harnessctl.errors import InfraError
from harnessctl.gateway import llm
from tests.helpers.openai_stub import OpenAIStub

MODEL = "openai/stub-model"
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]


@pytest.fixture(scope="module")
def litellm_module():
    return llm.get_litellm()  # the ~4 s import, once for this file


@pytest.fixture
def stub(litellm_module):
    with OpenAIStub() as s:
        yield s


def call(stub_url: str, *, retries: int = 2, timeout_s: float = 5.0, **params):
    return llm.complete(
        MODEL,
        MESSAGES,
        {"api_base": stub_url, "api_key": "dummy-key", **params},
        metadata={"harnessctl": {"rollout_id": "r1", "call_index": 0}},
        timeout_s=timeout_s,
        retries=retries,
        backoff_s=0.01,
    )


def test_get_litellm_is_offline_and_cached(litellm_module):
    import os

    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert llm.get_litellm() is litellm_module
    assert litellm_module.suppress_debug_info is True


def test_plain_call_returns_content_tokens_and_attempts(stub):
    stub.reply("4", prompt_tokens=12, completion_tokens=3)
    c = call(stub.url, temperature=0.0, seed=7)
    assert (c.content, c.prompt_tokens, c.completion_tokens) == ("4", 12, 3)
    assert (c.attempts, c.finish_reason, c.model) == (1, "stop", "stub-model")
    assert c.cost_usd == 0.0  # unknown price is not an error
    assert c.latency_s > 0
    [req] = stub.chat_requests
    assert req.body is not None
    assert req.body["messages"] == MESSAGES
    assert (req.body["temperature"], req.body["seed"]) == (0.0, 7)
    assert req.headers["authorization"] == "Bearer dummy-key"
    assert "metadata" not in req.body  # harnessctl metadata is for custom providers only


def test_a_price_given_as_params_is_what_the_call_costs(stub):
    """A model litellm does not map, priced by the user (the hosted recipe's local servers, a
    fine-tune): the call is recorded at that price, not at $0, so cost caps can trip."""
    stub.reply("4", prompt_tokens=1000, completion_tokens=500)
    c = call(stub.url, input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    assert c.cost_usd == pytest.approx(1000 * 1e-6 + 500 * 2e-6)


def test_one_500_then_success_is_retried(stub):
    stub.fail(500).reply("ok")
    c = call(stub.url)
    assert (c.content, c.attempts) == ("ok", 2)
    assert len(stub.chat_requests) == 2


def test_429_and_503_are_retried_with_doubling_backoff(stub):
    stub.fail(429, "slow down").fail(503).reply("ok")
    c = llm.complete(
        MODEL,
        MESSAGES,
        {"api_base": stub.url, "api_key": "k"},
        metadata=None,
        timeout_s=5,
        retries=3,
        backoff_s=0.1,
    )
    assert c.attempts == 3
    t = [r.at for r in stub.chat_requests]
    assert t[1] - t[0] >= 0.1 and t[2] - t[1] >= 0.2  # backoff_s * 2**i


@pytest.fixture
def remote(monkeypatch):
    """The stub taken for a provider's server: the rule for a remote api_base (the stub
    itself can only listen on loopback; ``is_loopback`` is tested on its own below)."""
    monkeypatch.setattr(llm, "is_loopback", lambda base: False)


def test_a_provider_s_timeout_is_retried(stub, remote):
    stub.hang(3).reply("after timeout")
    c = call(stub.url, timeout_s=0.3)
    assert (c.content, c.attempts) == ("after timeout", 2)


@pytest.mark.parametrize("model", [MODEL, "hosted_vllm/stub-model"])
def test_a_loopback_server_s_timeout_is_not_sent_again(stub, model):
    """A server on this machine may still be generating the call that timed out: sending it
    again would start the generation over behind it. One request, then an upstream error
    that says so; a 5xx or a refused connection (nothing generating) is still retried.
    Through the openai SDK (``openai/``) and litellm's own HTTP client (``hosted_vllm/``,
    the local model's provider) alike: neither re-sends on its own."""
    stub.hang(3).reply("never asked")
    with pytest.raises(llm.UpstreamError) as info:
        llm.complete(model, MESSAGES, {"api_base": stub.url, "api_key": "k"}, timeout_s=0.3,
                     retries=3, backoff_s=0.01)  # fmt: skip
    assert info.value.attempts == 1 and len(stub.chat_requests) == 1
    assert "not sent again" in str(info.value) and "0.3 s" in str(info.value)


def test_a_slow_loopback_server_is_waited_for_once(stub):
    """Under the endpoint's default timeout a slow local reply is waited for, sent once."""
    stub.hang(1.0, then=None).reply("unused")
    c = call(stub.url, timeout_s=None)
    assert (c.content, c.attempts) == ("late", 1) and len(stub.chat_requests) == 1


@pytest.mark.parametrize(
    ("base", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://127.3.4.5:8080/v1", True),
        ("http://localhost:11434", True),
        ("http://llm.localhost/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://[::ffff:127.0.0.1]:8000/v1", True),
        ("127.0.0.1:8080", True),
        ("https://api.openai.com/v1", False),
        ("http://10.0.0.5:8000/v1", False),
        ("http://localhost.example.com/v1", False),
        ("http://[::2]:8000", False),
        ("", False),
        (None, False),
    ],
)
def test_loopback_is_read_from_the_url_alone(base, local):
    assert llm.is_loopback(base) is local


def test_the_default_timeout_depends_on_the_endpoint():
    from harnessctl.constants import DEFAULT_LOCAL_MODEL_TIMEOUT_S, DEFAULT_MODEL_TIMEOUT_S

    local = {"api_base": "http://127.0.0.1:9/v1"}
    assert llm.call_timeout("hosted_vllm/m", local, None) == DEFAULT_LOCAL_MODEL_TIMEOUT_S
    assert llm.call_timeout("ollama/qwen", {}, None) == DEFAULT_LOCAL_MODEL_TIMEOUT_S
    assert llm.call_timeout("openai/gpt-4o-mini", {}, None) == DEFAULT_MODEL_TIMEOUT_S
    assert llm.call_timeout("hosted_vllm/m", local, 7.5) == 7.5  # the run's setting wins
    assert DEFAULT_LOCAL_MODEL_TIMEOUT_S > DEFAULT_MODEL_TIMEOUT_S


def test_exhausted_timeouts_raise_upstream_error(stub, remote):
    stub.hang(3).hang(3)
    t0 = time.monotonic()
    with pytest.raises(llm.UpstreamError) as info:
        call(stub.url, timeout_s=0.3, retries=1)
    assert info.value.attempts == 2
    assert isinstance(info.value, InfraError)
    assert "Timeout" in str(info.value)
    assert len(stub.chat_requests) == 2
    assert time.monotonic() - t0 < 2.5  # neither litellm nor openai retried on their own


def test_garbage_body_is_an_upstream_failure(stub):
    stub.garbage().garbage()
    with pytest.raises(llm.UpstreamError) as info:
        call(stub.url, retries=1)
    assert info.value.attempts == 2


@pytest.mark.parametrize("status", [400, 401, 404])
def test_4xx_is_not_retried(stub, status):
    stub.fail(status, "nope", type="invalid_request_error").reply("never")
    with pytest.raises(llm.ModelRequestError) as info:
        call(stub.url, retries=3)
    assert (info.value.attempts, info.value.status_code) == (1, status)
    assert len(stub.chat_requests) == 1


def test_context_window_overflow(stub):
    msg = "This model's maximum context length is 8 tokens. However, you requested 90 tokens."
    stub.fail(400, msg, code="context_length_exceeded", type="invalid_request_error")
    with pytest.raises(llm.ContextWindowError):
        call(stub.url, retries=3)
    assert len(stub.chat_requests) == 1


def test_connection_refused_is_upstream_error(litellm_module):
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(llm.UpstreamError) as info:
        call(f"http://127.0.0.1:{port}/v1", retries=1)
    assert info.value.attempts == 2


def test_metadata_reaches_a_custom_provider(litellm_module):
    from litellm import CustomLLM, ModelResponse

    seen: list[dict] = []

    class Echo(CustomLLM):
        def completion(self, *args, **kwargs) -> ModelResponse:
            # copied now: litellm adds its own keys to the metadata dict after the call
            seen.append(dict(kwargs["litellm_params"]["metadata"]["harnessctl"]))
            return litellm_module.completion(
                model="openai/x", messages=kwargs["messages"], mock_response="echoed"
            )

    saved = list(litellm_module.custom_provider_map)
    litellm_module.custom_provider_map = [*saved, {"provider": "hxecho", "custom_handler": Echo()}]
    try:
        c = llm.complete(
            "hxecho/any",
            MESSAGES,
            {},
            metadata={"harnessctl": {"task_id": "t7", "seed": 3}},
            timeout_s=5,
            retries=0,
            backoff_s=0,
        )
    finally:
        litellm_module.custom_provider_map = saved
    assert c.content == "echoed"
    assert seen == [{"task_id": "t7", "seed": 3}]


def test_tools_go_upstream_and_tool_calls_come_back(stub):
    tools = [{"type": "function", "function": {"name": "sql", "parameters": {"type": "object"}}}]
    stub.calls(("call_1", "sql", {"query": "SELECT 1"}), ("call_2", "sql", "{}"))
    c = call(stub.url, tools=tools, tool_choice="required")
    [req] = stub.chat_requests
    assert req.body is not None
    assert (req.body["tools"], req.body["tool_choice"]) == (tools, "required")
    assert (c.content, c.finish_reason) == ("", "tool_calls")
    assert c.tool_calls == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "sql", "arguments": '{"query": "SELECT 1"}'},
        },
        {"id": "call_2", "type": "function", "function": {"name": "sql", "arguments": "{}"}},
    ]


def test_tool_calls_are_normalised_to_the_openai_shape():
    calls = [
        {"id": "a", "function": {"name": "f", "arguments": {"x": 1}}},  # arguments as an object
        {"function": {"name": "g"}},  # no id, no arguments
    ]
    first, second = llm.tool_call_dicts(calls)
    assert first == {
        "id": "a",
        "type": "function",
        "function": {"name": "f", "arguments": '{"x": 1}'},
    }
    assert second["id"].startswith("call_") and second["function"] == {
        "name": "g",
        "arguments": "{}",
    }
    assert llm.tool_call_dicts(None) == []
