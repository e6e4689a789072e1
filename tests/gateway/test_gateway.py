"""The gateway end to end: GatewayClient -> unix socket -> Gateway -> litellm -> OpenAI stub.

Budget concurrency and in-flight draining use an injected completer (they need control over
timing); everything else goes through real litellm against the local stub.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from harnessctl.gateway import Budget, Gateway, llm
from harnessctl.runtime.client import (
    BudgetExceeded,
    ContextLimit,
    GatewayClient,
    GatewayError,
    ModelRequestError,
    _UnixHTTPConnection,
)
from tests.helpers.gateway import ASK, MODEL, fake_completer
from tests.helpers.openai_stub import OpenAIStub, Reply


@pytest.fixture(scope="module")
def litellm_module():
    return llm.get_litellm()  # the ~4 s import, once for this file


@pytest.fixture
def stub(litellm_module):
    with OpenAIStub() as s:
        yield s


@pytest.fixture
def gw(litellm_module):
    with Gateway(timeout_s=0.4, retries=1, backoff_s=0.01) as g:
        yield g


def open_rollout(gw: Gateway, stub: OpenAIStub, budget: Budget | None = None, **meta) -> str:
    params = {"api_base": stub.url, "api_key": "dummy-key", "temperature": 0.0}
    return gw.open_rollout(
        "r1", model=MODEL, params=params, budget=budget or Budget(), metadata=meta or None
    )


def test_end_to_end_over_unix_socket(gw, stub):
    assert gw.address == f"unix://{gw.socket_path}"
    sock, directory = gw.socket_path.stat(), gw.socket_path.parent.stat()
    if os.geteuid() == 0:  # root and the sandboxes' group (nogroup) only
        assert (stat.S_IMODE(sock.st_mode), sock.st_gid) == (0o660, 65534)
        assert (stat.S_IMODE(directory.st_mode), directory.st_gid) == (0o710, 65534)
    else:
        assert stat.S_IMODE(sock.st_mode) == 0o666
        assert stat.S_IMODE(directory.st_mode) == 0o711
    stub.reply("42 rows", prompt_tokens=11, completion_tokens=2)
    token = open_rollout(gw, stub)

    reply = GatewayClient(gw.address, token).chat(
        ASK, temperature=0.9, max_tokens=50, model="gpt-4"
    )
    assert reply.content == "42 rows"
    assert reply.usage == {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    assert reply.raw["model"] == MODEL and reply.raw["object"] == "chat.completion"
    [sent] = stub.chat_requests
    assert sent.body is not None
    assert sent.body["model"] == "stub-model"  # the policy's model, not the harness's "gpt-4"
    assert (sent.body["temperature"], sent.body["max_tokens"]) == (0.0, 50)  # policy overrides

    ledger = gw.close_rollout(token)
    [call] = ledger.calls
    assert (call.index, call.status, call.reply, call.attempts) == (0, "ok", "42 rows", 1)
    assert call.messages == ASK
    assert call.params["api_key"] == "***" and call.params["api_base"] == stub.url
    assert (ledger.prompt_tokens, ledger.completion_tokens) == (11, 2)
    assert ledger.latency_s == call.latency_s > 0
    assert ledger.infra_error is None and ledger.budget_exceeded is None


def test_every_call_carries_rollout_metadata():
    completer = fake_completer()
    with Gateway(completer=completer) as gw:
        meta = {"task_id": "t3", "seed": 11}
        params = {"skill": 0.5}
        token = gw.open_rollout(
            "r9", model="sim/dbbench", params=params, budget=Budget(), metadata=meta
        )
        client = GatewayClient(gw.address, token)
        client.chat(ASK)
        client.chat(ASK, seed=1)
        assert client.models() == ["sim/dbbench"]
    metas = [s["meta"] for s in completer.seen]
    assert metas == [
        {"harnessctl": {"task_id": "t3", "seed": 11, "rollout_id": "r9", "call_index": i}}
        for i in (0, 1)
    ]
    assert completer.seen[1]["params"] == {"seed": 1, "skill": 0.5}


def test_exhausted_timeouts_are_502_and_infra_error(gw, stub, monkeypatch):
    monkeypatch.setattr(llm, "is_loopback", lambda base: False)  # the stub as a provider
    stub.hang(3).hang(3)
    token = open_rollout(gw, stub)
    with pytest.raises(GatewayError, match="502"):
        GatewayClient(gw.address, token).chat(ASK)
    ledger = gw.close_rollout(token)
    [call] = ledger.calls
    assert (call.status, call.attempts, call.reply) == ("upstream_error", 2, None)
    assert ledger.infra_error is not None and "Timeout" in ledger.infra_error
    assert len(stub.chat_requests) == 2


def test_a_loopback_server_s_timeout_is_one_request_and_infra_error(gw, stub):
    """The host sees the timeout itself (the ledger's infra_error), after one request."""
    stub.hang(3).reply("never asked")
    token = open_rollout(gw, stub)
    with pytest.raises(GatewayError, match="502"):
        GatewayClient(gw.address, token).chat(ASK)
    ledger = gw.close_rollout(token)
    [call] = ledger.calls
    assert (call.status, call.attempts) == ("upstream_error", 1)
    assert ledger.infra_error is not None and "not sent again" in ledger.infra_error
    assert len(stub.chat_requests) == 1


@pytest.fixture
def patient_gw(litellm_module):
    """A gateway whose timeout no slow CI machine reaches: where a test counts the requests
    the stub answered, a timed-out attempt retried would consume a scripted failure."""
    with Gateway(timeout_s=10, retries=1, backoff_s=0.01) as g:
        yield g


PROBE = [{"role": "user", "content": "Reply with OK."}]


def test_context_limit_and_bad_request_are_not_infra(patient_gw, litellm_module):
    gw = patient_gw
    # only this test's two requests and the probe consume the scripted failures (CI twice saw
    # the 422 consumed by a request this test did not make; its bodies are printed if so)
    with OpenAIStub(only=lambda body: body.get("messages") in (ASK, PROBE)) as stub:
        _context_limit_and_bad_request(gw, stub)


def _context_limit_and_bad_request(gw, stub):
    msg = "This model's maximum context length is 8 tokens. However, you requested 90 tokens."
    stub.fail(400, msg, code="context_length_exceeded", type="invalid_request_error")
    stub.fail(400, "temperature out of range", type="invalid_request_error")
    token = open_rollout(gw, stub)
    client = GatewayClient(gw.address, token)
    with pytest.raises(ContextLimit):
        client.chat(ASK)
    try:
        client.chat(ASK)
    except ModelRequestError:
        pass
    else:
        seen = [(r.path, r.body) for r in stub.chat_requests + stub.strays]
        pytest.fail(f"the bad request was answered; the stub saw: {seen!r}")
    ledger = gw.close_rollout(token)
    assert [c.status for c in ledger.calls] == ["context_limit", "bad_request"]
    assert ledger.infra_error is None and ledger.config_error is None
    # 4xx never retried; the bad request was followed by one minimal probe of the run's
    # parameters, which the provider accepted: the refusal was the harness's request's
    assert len(stub.chat_requests) == 3
    assert stub.chat_requests[2].body["messages"] == PROBE


def test_a_refused_run_configuration_is_a_config_error_probed_once(gw, stub):
    stub.fail(400, "Unrecognized request argument supplied: skill", type="invalid_request_error")
    stub.fail(400, "Unrecognized request argument supplied: skill", type="invalid_request_error")
    stub.fail(400, "Unrecognized request argument supplied: skill", type="invalid_request_error")
    first = open_rollout(gw, stub)
    with pytest.raises(ModelRequestError):
        GatewayClient(gw.address, first).chat(ASK)
    ledger = gw.close_rollout(first)
    assert "skill" in (ledger.config_error or "") and ledger.infra_error
    second = open_rollout(gw, stub)
    with pytest.raises(ModelRequestError):
        GatewayClient(gw.address, second).chat(ASK)
    assert "skill" in (gw.close_rollout(second).config_error or "")
    assert len(stub.chat_requests) == 3  # two calls and one probe: the verdict is kept


def test_provider_auth_failure_marks_infra_error(gw, stub):
    stub.fail(401, "invalid api key", type="invalid_request_error")
    token = open_rollout(gw, stub)
    with pytest.raises(ModelRequestError):
        GatewayClient(gw.address, token).chat(ASK)
    assert "invalid api key" in (gw.close_rollout(token).infra_error or "")


def test_call_budget(gw, stub):
    token = open_rollout(gw, stub, Budget(max_calls=2))
    client = GatewayClient(gw.address, token)
    client.chat(ASK)
    client.chat(ASK)
    with pytest.raises(BudgetExceeded, match="call budget"):
        client.chat(ASK)
    ledger = gw.close_rollout(token)
    assert [c.status for c in ledger.calls] == ["ok", "ok", "budget_exceeded"]
    assert ledger.budget_exceeded is not None and len(stub.chat_requests) == 2


def test_reply_over_token_budget_is_withheld(gw, stub):
    stub.reply("first").reply("second")  # 10 + 5 tokens each
    token = open_rollout(gw, stub, Budget(max_tokens=25))
    client = GatewayClient(gw.address, token)
    assert client.chat(ASK).content == "first"
    with pytest.raises(BudgetExceeded, match="30 of 25"):
        client.chat(ASK)
    with pytest.raises(BudgetExceeded, match="exhausted"):
        client.chat(ASK)  # refused before reaching the model
    ledger = gw.close_rollout(token)
    assert [(c.status, c.reply) for c in ledger.calls] == [
        ("ok", "first"),
        ("budget_exceeded", "second"),  # kept for audit, never shown to the harness
        ("budget_exceeded", None),
    ]
    assert ledger.prompt_tokens + ledger.completion_tokens == 30
    assert len(stub.chat_requests) == 2


def test_unknown_or_revoked_token_is_401(gw, stub):
    token = open_rollout(gw, stub)
    with pytest.raises(ModelRequestError, match="401"):
        GatewayClient(gw.address, "not-a-token").chat(ASK)
    with pytest.raises(ModelRequestError, match="401"):
        GatewayClient(gw.address, "not-a-token").models()
    assert gw.close_rollout(token).calls == []
    with pytest.raises(ModelRequestError, match="401"):
        GatewayClient(gw.address, token).chat(ASK)
    assert stub.requests == []


def raw_post(gw: Gateway, token: str, body: bytes, path: str = "/v1/chat/completions"):
    conn = _UnixHTTPConnection(str(gw.socket_path), 5)
    conn.request("POST", path, body=body, headers={"Authorization": f"Bearer {token}"})
    response = conn.getresponse()
    status, payload = response.status, json.loads(response.read())
    conn.close()
    return status, payload["error"]["code"]


def test_malformed_requests_are_400_and_recorded(gw, stub):
    token = open_rollout(gw, stub)
    ok_messages = json.dumps(ASK)
    cases = [
        b"{not json",
        b'{"messages": []}',
        b'{"messages": [{"role": "user", "content": ["parts"]}]}',
        f'{{"messages": {ok_messages}, "stream": true}}'.encode(),
        f'{{"messages": {ok_messages}, "n": 2}}'.encode(),
        f'{{"messages": {ok_messages}, "temperature": "hot"}}'.encode(),
        f'{{"messages": {ok_messages}, "tools": [{{"type": "function"}}]}}'.encode(),
        f'{{"messages": {ok_messages}, "tool_choice": "required"}}'.encode(),
        b'{"messages": [{"role": "tool", "content": "rows"}]}',
    ]
    assert [raw_post(gw, token, body) for body in cases] == [(400, "bad_request")] * len(cases)
    assert raw_post(gw, token, b"{}", path="/v1/embeddings") == (404, "not_found")
    ledger = gw.close_rollout(token)
    assert [c.status for c in ledger.calls] == ["bad_request"] * len(cases)
    assert stub.requests == []


def test_concurrent_rollouts_keep_separate_ledgers(gw, stub):
    stub.default = Reply(lambda body: "echo " + body["messages"][-1]["content"])
    tokens = {name: open_rollout(gw, stub) for name in ("a", "b")}
    replies: dict[str, list[str]] = {"a": [], "b": []}
    errors: list[Exception] = []

    def worker(name: str, i: int) -> None:
        msg = [{"role": "user", "content": f"{name}{i}"}]
        try:
            replies[name].append(GatewayClient(gw.address, tokens[name]).chat(msg).content)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n, i)) for n in "ab" for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for name in "ab":
        ledger = gw.close_rollout(tokens[name])
        assert [c.index for c in ledger.calls] == list(range(8))
        asked = sorted(c.messages[-1]["content"] for c in ledger.calls)
        assert asked == [f"{name}{i}" for i in range(8)]
        assert sorted(replies[name]) == [f"echo {q}" for q in asked]
        assert all(c.reply == f"echo {c.messages[-1]['content']}" for c in ledger.calls)


def test_concurrent_calls_cannot_overrun_the_call_budget():
    completer = fake_completer(delay=0.2)
    with Gateway(completer=completer) as gw:
        token = gw.open_rollout("r", model="m", params={}, budget=Budget(max_calls=3))
        outcomes: list[str] = []

        def worker() -> None:
            try:
                GatewayClient(gw.address, token).chat(ASK)
                outcomes.append("ok")
            except BudgetExceeded:
                outcomes.append("refused")
            except Exception as exc:
                outcomes.append(repr(exc))

        threads = [threading.Thread(target=worker) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ledger = gw.close_rollout(token)
    assert sorted(outcomes) == ["ok"] * 3 + ["refused"] * 9
    assert len(completer.seen) == 3 and len(ledger.calls) == 12


def test_close_rollout_waits_for_calls_in_flight():
    completer = fake_completer(content="late", delay=0.3)
    with Gateway(completer=completer) as gw:
        token = gw.open_rollout("r", model="m", params={}, budget=Budget())
        t = threading.Thread(target=lambda: GatewayClient(gw.address, token).chat(ASK))
        t.start()
        assert completer.entered.wait(5)
        ledger = gw.close_rollout(token)
        t.join()
    assert [c.reply for c in ledger.calls] == ["late"]


def test_loopback_port_is_opt_in(litellm_module, stub):
    with Gateway(port=0, retries=0) as gw:
        assert gw.socket_path is None and gw.address.startswith("http://127.0.0.1:")
        token = open_rollout(gw, stub)
        assert GatewayClient(gw.address, token).chat(ASK).content == "stub reply"
        assert len(gw.close_rollout(token).calls) == 1


def test_socket_and_directory_removed_on_close(tmp_path):
    gw = Gateway(socket_dir=tmp_path, completer=fake_completer()).start()
    path = gw.socket_path
    assert path is not None and path.exists() and path.parent.parent == tmp_path.resolve()
    token = gw.open_rollout("r", model="m", params={}, budget=Budget())
    gw.close()
    assert not path.exists() and not path.parent.exists()
    with pytest.raises(GatewayError, match="unreachable"):
        GatewayClient(gw.address, token, timeout_s=2).chat(ASK)


def test_client_from_env(monkeypatch):
    from harnessctl import constants
    from harnessctl.runtime import client as client_module

    # the sandbox client cannot import harnessctl.constants, so it mirrors the names
    assert client_module.ENV_GATEWAY == constants.RT_ENV_GATEWAY
    assert client_module.ENV_TOKEN == constants.RT_ENV_TOKEN
    monkeypatch.delenv("HXRT_TOKEN", raising=False)
    monkeypatch.setenv("HXRT_GATEWAY", "unix:///tmp/x/gw.sock")
    with pytest.raises(GatewayError):
        GatewayClient.from_env()
    monkeypatch.setenv("HXRT_TOKEN", "tok")
    client = GatewayClient.from_env()
    assert (client.address, client.token) == ("unix:///tmp/x/gw.sock", "tok")
    with pytest.raises(ValueError):
        GatewayClient("ftp://host/x", "tok")


def test_long_socket_dir_is_refused(tmp_path):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    with pytest.raises(ValueError, match="too long"):
        Gateway(socket_dir=Path(deep), completer=fake_completer()).start()
    assert list(deep.iterdir()) == []
