"""The host-side model gateway: an OpenAI-compatible endpoint on a per-run unix socket.

Sandboxed harnesses reach the model only here. Each rollout gets a random bearer token; the
gateway picks the model and params of the rollout's policy, enforces its budget, forwards to
litellm (:mod:`harnessctl.gateway.llm`) and records every call in the rollout's ledger.
Calls of one rollout may arrive concurrently: the rollout's state is guarded by its condition
variable, which is never held while the model is called.

Budgets hold before a request leaves the host: a rollout has at most one model call upstream
at a time (others wait their turn on the rollout's condition, then meet the budget check
with every earlier call counted), and a prompt whose size alone (a lower bound of its tokens:
characters / 8) exceeds what is left of the token budget is refused without being sent. The
only overrun left is the reply of the one call in flight, which is withheld from the harness.

What the ledger keeps is bounded too (:mod:`harnessctl.bounds`): a refused request is
recorded without its body (the reason and its size), and each record costs the rollout's
``RecordMeter``; past its bound a request is refused unsent and unrecorded, and the closed
ledger's ``record_limit`` says so (the rollout ends ``context_limit``).
"""

from __future__ import annotations

import copy
import functools
import json
import secrets
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ..bounds import REFUSED_RECORD_BYTES, RecordMeter, clip_error
from ..envs import ModelAccess, ModelReply, check_purpose
from . import episodes, llm, protocol, transport
from .ledger import (
    BAD_REQUEST,
    BUDGET_EXCEEDED,
    CONTEXT_LIMIT,
    OK,
    UPSTREAM_ERROR,
    Budget,
    CallRecord,
    RolloutLedger,
)
from .transport import Response


def prompt_floor(messages: list[dict[str, Any]], tools: Any = None) -> int:
    """A lower bound of a prompt's tokens: its characters / 8 (no tokenizer packs more)."""
    chars = 0
    for m in messages:
        chars += len(m.get("content") or "")
        for call in m.get("tool_calls") or ():
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"])
    if tools:
        chars += len(json.dumps(tools))
    return chars // 8


class Completer(Protocol):
    """The signature of :func:`harnessctl.gateway.llm.complete`."""

    def __call__(
        self,
        model: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        *,
        metadata: dict[str, Any] | None,
        timeout_s: float | None,
        retries: int,
        backoff_s: float,
    ) -> llm.Completion: ...


class WaitClock:
    """Seconds a rollout has spent waiting on the host (model calls, environment requests):
    the union of those intervals, so requests made concurrently count once. The sandbox adds
    them to the rollout's deadline: the harness is charged only its own time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._since = 0.0
        self._total = 0.0

    def __enter__(self) -> WaitClock:
        with self._lock:
            if self._open == 0:
                self._since = time.monotonic()
            self._open += 1
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._open -= 1
            if self._open == 0:
                self._total += time.monotonic() - self._since

    def seconds(self) -> float:
        with self._lock:
            ongoing = time.monotonic() - self._since if self._open else 0.0
            return self._total + ongoing


@dataclass
class _Rollout:
    ledger: RolloutLedger
    params: dict[str, Any]
    budget: Budget
    metadata: dict[str, Any]
    next_index: int = 0
    sent: int = 0  # calls that went (or are going) upstream: what max_calls limits
    in_flight: int = 0
    closed: bool = False  # revoked: calls still waiting for their turn are refused
    cond: threading.Condition = field(default_factory=threading.Condition)
    episode: episodes.EpisodeSlot | None = None  # a host-served environment's episode
    waiting: WaitClock = field(default_factory=WaitClock)
    meter: RecordMeter = field(default_factory=RecordMeter)  # what the host keeps of it

    def keep(self, rec: CallRecord, cost: int = REFUSED_RECORD_BYTES) -> None:
        """Append ``rec`` to the ledger if the record bound leaves room (caller holds
        ``cond``); past it the call is only counted (``meter.dropped``)."""
        if self.meter.take(cost, "model call"):
            self.ledger.calls.append(rec)

    def record(
        self, messages: list[dict[str, Any]], params: dict[str, Any], started_at: float
    ) -> CallRecord:
        """A new record with the next index (caller holds ``cond``); status ``ok`` until set."""
        index, self.next_index = self.next_index, self.next_index + 1
        redacted = protocol.redact(params)
        model = self.ledger.model
        return CallRecord(
            index, model, messages, redacted, None, 0, 0, 0.0, 0.0, 0, OK, None, started_at
        )


class Gateway:
    """OpenAI-compatible gateway. Use as a context manager, or ``start()`` / ``close()``.

    Listens on ``<socket_dir or /tmp>/hxgw-XXXX/gw.sock`` or, only when ``port`` is given, on
    ``127.0.0.1:port`` (0 picks a free port). ``completer`` replaces :func:`llm.complete`
    (tests of the budget logic); ``timeout_s``/``retries``/``backoff_s`` are passed to it
    (``timeout_s`` None: the completer's default for the endpoint, ``llm.call_timeout``).
    """

    def __init__(
        self,
        *,
        socket_dir: Path | None = None,
        port: int | None = None,
        timeout_s: float | None = None,
        retries: int = 3,
        backoff_s: float = 0.5,
        completer: Completer | None = None,
    ) -> None:
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self._completer: Completer = completer if completer is not None else llm.complete
        self._socket_dir, self._port = socket_dir, port
        self._rollouts: dict[str, _Rollout] = {}
        self._probed: dict[str, bool] = {}  # (model, run params) -> refused on a minimal call
        self._lock = threading.Lock()
        self._server: socketserver.BaseServer | None = None
        self.socket_path: Path | None = None
        self.address = ""  # set by start()

    def start(self) -> Gateway:
        """Bind and serve in a daemon thread; sets ``address`` (and ``socket_path``)."""
        if self._server is not None:
            raise RuntimeError("gateway already started")
        env_routes: dict[str, Callable[[Any, bytes], Response]] = {
            path: functools.partial(self._episode, path=path)
            for path in (episodes.RESET_PATH, episodes.STEP_PATH)
        }
        handler = transport.make_handler(
            self._authorize, self._chat, self._models, posts=env_routes
        )
        if self._port is not None:
            tcp = transport.TCPServer(("127.0.0.1", self._port), handler)
            self._server, self.address = tcp, f"http://127.0.0.1:{tcp.server_address[1]}"
        else:
            self._server, self.socket_path = transport.bind_unix(self._socket_dir, handler)
            self.address = f"unix://{self.socket_path}"
        # a short poll interval makes close() quick; the cost is a few idle wake-ups per second
        serve = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="hx-gateway", daemon=True
        )
        serve.start()
        return self

    def close(self) -> None:
        """Stop serving; remove the socket and its directory. Idempotent."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.socket_path is not None:
            from ..sandbox import OWNER_FILE

            self.socket_path.unlink(missing_ok=True)
            (self.socket_path.parent / OWNER_FILE).unlink(missing_ok=True)
            if self.socket_path.parent.exists():
                self.socket_path.parent.rmdir()

    def __enter__(self) -> Gateway:
        return self if self._server is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open_rollout(
        self,
        rollout_id: str,
        *,
        model: str,
        params: dict[str, Any],
        budget: Budget,
        metadata: dict[str, Any] | None = None,
        episode: Any = None,
    ) -> str:
        """Register a rollout; return the fresh bearer token its harness must present.

        ``params`` (policy sampling settings, api_base...) override the harness's own;
        ``metadata`` reaches the provider as ``metadata["harnessctl"]`` on every call;
        ``episode`` (a host-served environment's :class:`harnessctl.envs.Episode`) is what
        the token may reset and step, at most ``budget.max_steps`` steps.
        """
        token = secrets.token_urlsafe(24)
        ledger = RolloutLedger(rollout_id, model)
        meter = RecordMeter(budget.max_record_bytes, budget.max_records)
        state = _Rollout(ledger, dict(params), budget, dict(metadata or {}), meter=meter)
        if episode is not None:
            state.episode = episodes.EpisodeSlot(
                episode, budget.max_steps, max_resets=budget.max_resets, meter=meter
            )
        with self._lock:
            self._rollouts[token] = state
        return token

    def close_rollout(self, token: str, *, wait_s: float = 5.0) -> RolloutLedger:
        """Revoke ``token``; return a snapshot of the rollout's ledger, calls ordered by index.

        Calls still in flight (the sandbox was killed mid-call) are waited for up to ``wait_s``;
        any that finish later are not in the returned ledger. Unknown token: KeyError.
        """
        with self._lock:
            state = self._rollouts.pop(token)
        with state.cond:
            state.closed = True
            state.cond.notify_all()
            state.cond.wait_for(lambda: state.in_flight == 0, timeout=wait_s)
            calls = sorted(state.ledger.calls, key=lambda c: c.index)
        steps: list[Any] = []
        if state.episode is not None:
            with state.episode.lock:  # a step still running finishes first
                steps = list(state.episode.records)
        with state.cond:
            env_calls = sorted(state.ledger.env_calls, key=lambda c: c.index)
            return replace(
                state.ledger,
                calls=calls,
                steps=steps,
                env_calls=env_calls,
                record_limit=state.meter.summary(),
            )

    def model_access(self, token: str) -> EpisodeModels:
        """The :class:`harnessctl.envs.ModelAccess` of the rollout of ``token``: the
        episode's own model calls, recorded in its ledger's ``env_calls``, outside its
        budget. Unknown token: KeyError."""
        with self._lock:
            state = self._rollouts[token]
        return EpisodeModels(self, state)

    def waited_s(self, token: str) -> float:
        """Seconds the rollout of ``token`` has waited on the host so far (0 once closed)."""
        with self._lock:
            state = self._rollouts.get(token)
        return state.waiting.seconds() if state is not None else 0.0

    # --- request handlers (run on the server's threads) ---
    def _episode(self, state: _Rollout, raw: bytes, *, path: str) -> Response:
        with state.waiting:
            return episodes.handle(state, raw, path=path)

    def _authorize(self, authorization: str | None) -> _Rollout | None:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        with self._lock:
            return self._rollouts.get(token.strip())

    def _models(self, state: _Rollout) -> dict[str, Any]:
        return protocol.models_body(state.ledger.model)

    def _chat(self, state: _Rollout, raw: bytes) -> Response:
        started_at = time.time()
        ledger, budget = state.ledger, state.budget
        try:
            messages, harness_params = protocol.parse_chat_request(raw)
        except protocol.RequestError as exc:
            with state.cond:  # the fact, its size and why: never the body
                rec = state.record([], {}, started_at)
                rec.status = BAD_REQUEST
                rec.error = f"{clip_error(str(exc))} (request of {len(raw)} bytes, not kept)"
                state.keep(rec)
            return 400, protocol.error_body("invalid_request_error", "bad_request", str(exc))
        params = {**harness_params, **state.params}
        with state.cond:
            # the function specs are recorded once, in rec.tools, not again among the params
            rec = state.record(
                messages, {k: v for k, v in params.items() if k != "tools"}, started_at
            )
            rec.tools = copy.deepcopy(params.get("tools"))  # litellm may rewrite what it is sent
            # one call upstream at a time per rollout: the check below sees every earlier call
            state.cond.wait_for(lambda: state.in_flight == 0 or state.closed)
            used = ledger.total_tokens
            floor = prompt_floor(messages, params.get("tools"))
            refusal = None
            if state.closed:
                refusal = "rollout closed: the call arrived after the rollout ended"
            elif state.sent >= budget.max_calls:
                refusal = f"call budget exhausted: {state.sent} of {budget.max_calls} calls used"
            elif used >= budget.max_tokens:
                refusal = f"token budget exhausted: {used} of {budget.max_tokens} tokens used"
            elif used + floor > budget.max_tokens:
                refusal = (
                    f"token budget exhausted: the prompt alone needs at least {floor} tokens, "
                    f"{budget.max_tokens - used} of {budget.max_tokens} are left"
                )
            if refusal is None and not state.meter.take(len(raw), "model call"):
                refusal = state.meter.hit  # sent, it would be kept: refused unsent, unrecorded
                ledger.budget_exceeded = ledger.budget_exceeded or refusal
                return 400, protocol.error_body(BUDGET_EXCEEDED, BUDGET_EXCEEDED, refusal or "")
            if refusal is not None:  # kept without its body: the fact, its size and why
                rec.messages, rec.params, rec.tools = [], {}, None
                rec.status = BUDGET_EXCEEDED
                rec.error = f"{refusal} (request of {len(raw)} bytes, not kept)"
                state.keep(rec)
                ledger.budget_exceeded = ledger.budget_exceeded or refusal
                return 400, protocol.error_body(BUDGET_EXCEEDED, BUDGET_EXCEEDED, refusal)
            state.sent += 1
            state.in_flight += 1
        try:
            with state.waiting:
                return self._forward(state, rec, params)
        finally:
            with state.cond:
                state.in_flight -= 1
                state.cond.notify_all()

    def _forward(self, state: _Rollout, rec: CallRecord, params: dict[str, Any]) -> Response:
        """Call the model for ``rec`` (no lock held), record the outcome, build the answer."""
        ledger, t0 = state.ledger, time.monotonic()
        ids = {"rollout_id": ledger.rollout_id, "call_index": rec.index}
        meta = {"harnessctl": {**state.metadata, **ids}}
        infra, err = False, Exception()
        try:
            c = self._completer(
                ledger.model,
                copy.deepcopy(rec.messages),  # the record keeps what the harness sent
                params,
                metadata=meta,
                timeout_s=self.timeout_s,
                retries=self.retries,
                backoff_s=self.backoff_s,
            )
        except llm.ContextWindowError as exc:
            status, code, err = 400, "context_length_exceeded", exc
            rec.status = CONTEXT_LIMIT
        except llm.ModelRequestError as exc:
            status, code, err = 400, "bad_request", exc
            rec.status = BAD_REQUEST
            # 401/403/404: the host's key or model name is wrong, not the harness's request;
            # a 400 is the run's too when a minimal request with its parameters is refused.
            config = exc.status_code in (401, 403, 404) or self._refused_config(
                ledger.model, state.params
            )
            if config:
                infra = True
                with state.cond:
                    ledger.config_error = ledger.config_error or f"{exc}"
        except llm.UpstreamError as exc:
            status, code, err, infra = 502, "upstream_error", exc, True
            rec.status = UPSTREAM_ERROR
        except Exception as exc:  # a bug below us: an infra failure, never the harness's
            status, code, err, infra = 500, "internal_error", exc, True
            rec.status = UPSTREAM_ERROR
        else:
            return self._finish(state, rec, c)
        rec.error = f"{type(err).__name__}: {err}"
        rec.attempts = getattr(err, "attempts", 1)
        rec.latency_s = time.monotonic() - t0
        with state.cond:
            ledger.calls.append(rec)
            if infra and ledger.infra_error is None:
                ledger.infra_error = rec.error
        kind = {400: "invalid_request_error", 502: "upstream_error"}.get(status, "server_error")
        return status, protocol.error_body(kind, code, str(err))

    def _refused_config(self, model: str, run_params: dict[str, Any]) -> bool:
        """Whether the provider refuses ``model`` with the run's parameters on a minimal
        request (one short user message): then a refusal is the run's configuration, not the
        harness's request. Asked once per (model, parameters); an unanswered probe (provider
        down) decides nothing and is asked again next time."""
        key = json.dumps([model, run_params], sort_keys=True, default=str)
        with self._lock:
            known = self._probed.get(key)
        if known is not None:
            return known
        try:
            self._completer(
                model,
                [{"role": "user", "content": "Reply with OK."}],
                dict(run_params),
                metadata={"harnessctl": {"purpose": "configuration probe"}},
                timeout_s=self.timeout_s,
                retries=self.retries,
                backoff_s=self.backoff_s,
            )
            refused = False
        except llm.ModelRequestError:
            refused = True
        except Exception:  # no answer: nothing learned about the configuration
            return False
        with self._lock:
            self._probed[key] = refused
        return refused

    def _finish(self, state: _Rollout, rec: CallRecord, c: llm.Completion) -> Response:
        rec.model, rec.reply, rec.attempts = c.model, c.content, c.attempts
        rec.tool_calls = c.tool_calls
        rec.finish_reason = c.finish_reason
        rec.prompt_ids, rec.completion_ids = c.prompt_ids, c.completion_ids
        rec.logprobs = c.logprobs
        rec.prompt_tokens, rec.completion_tokens = c.prompt_tokens, c.completion_tokens
        rec.cost_usd, rec.latency_s = c.cost_usd, c.latency_s
        ledger, limit = state.ledger, state.budget.max_tokens
        ids = len(c.prompt_ids or ()) + len(c.completion_ids or ()) + len(c.logprobs or ())
        state.meter.add(len(c.content or "") + len(json.dumps(c.tool_calls or [])) + 8 * ids)
        with state.cond:
            ledger.calls.append(rec)
            used = ledger.total_tokens
            if used > limit:  # withheld: the harness may not use a reply that overran its budget
                msg = f"token budget exceeded: {used} of {limit} tokens used by this reply"
                rec.status, rec.error = BUDGET_EXCEEDED, msg
                ledger.budget_exceeded = ledger.budget_exceeded or msg
                return 400, protocol.error_body(BUDGET_EXCEEDED, BUDGET_EXCEEDED, msg)
        body = protocol.completion_body(
            model=ledger.model,
            content=c.content,
            finish_reason=c.finish_reason,
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            tool_calls=c.tool_calls,
        )
        return 200, body


class EpisodeModels(ModelAccess):
    """A rollout's :class:`harnessctl.envs.ModelAccess` (``Gateway.model_access``): each call
    goes through the gateway's completer (:func:`llm.complete`: litellm models and offline
    test doubles) with the gateway's retries, and is recorded in the ledger's ``env_calls``
    as ``env:<purpose>`` (params redacted; the record bound applies), never in ``calls``:
    the agent's budget, which sums ``calls`` and counts ``sent``, does not see it."""

    def __init__(self, gateway: Gateway, state: _Rollout) -> None:
        self._gateway, self._state = gateway, state
        self._next = 0

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        purpose: str,
        model: str,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> ModelReply:
        caller = f"env:{check_purpose(purpose)}"
        state, gateway = self._state, self._gateway
        sent = {**params, **({"tools": tools} if tools else {})}
        with state.cond:
            index, self._next = self._next, self._next + 1
        rec = CallRecord(
            index, model, copy.deepcopy(messages), protocol.redact(params), None,
            0, 0, 0.0, 0.0, 0, OK, None, time.time(), tools=tools, caller=caller,
        )  # fmt: skip
        meta = {"harnessctl": {**state.metadata, "rollout_id": state.ledger.rollout_id}}
        meta["harnessctl"].update(caller=caller, call_index=index)
        t0 = time.monotonic()
        try:
            c = gateway._completer(
                model,
                copy.deepcopy(messages),
                sent,
                metadata=meta,
                timeout_s=gateway.timeout_s,
                retries=gateway.retries,
                backoff_s=gateway.backoff_s,
            )
        except Exception as exc:
            rec.status = {
                llm.ContextWindowError: CONTEXT_LIMIT,
                llm.ModelRequestError: BAD_REQUEST,
            }.get(type(exc), UPSTREAM_ERROR)
            rec.error = _scrubbed(f"{type(exc).__name__}: {exc}", params)
            rec.attempts = getattr(exc, "attempts", 1)
            rec.latency_s = time.monotonic() - t0
            self._keep(rec)
            if isinstance(exc, llm.ModelRequestError) and exc.status_code in (401, 403, 404):
                with state.cond:  # the key or model name is the run's: stop, do not retry
                    said = f"{caller} model {model}: {rec.error}"
                    state.ledger.config_error = state.ledger.config_error or said
            raise
        rec.model, rec.reply, rec.attempts = c.model, c.content, c.attempts
        rec.tool_calls, rec.finish_reason = list(c.tool_calls), c.finish_reason
        rec.prompt_tokens, rec.completion_tokens = c.prompt_tokens, c.completion_tokens
        rec.cost_usd, rec.latency_s = c.cost_usd, c.latency_s
        state.meter.add(len(c.content or "") + len(json.dumps(c.tool_calls or [])))
        self._keep(rec)
        return ModelReply(
            content=c.content,
            tool_calls=list(c.tool_calls),
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            cost_usd=c.cost_usd,
            model=c.model,
        )

    def _keep(self, rec: CallRecord) -> None:
        size = len(json.dumps(rec.messages, default=str)) + REFUSED_RECORD_BYTES
        with self._state.cond:
            if self._state.meter.take(size, "model call"):
                self._state.ledger.env_calls.append(rec)


def _scrubbed(text: str, params: dict[str, Any]) -> str:
    """``text`` without the value of any credential in ``params`` (a provider may echo it)."""
    safe = protocol.redact(params)
    for key, value in params.items():
        if safe.get(key) != value and isinstance(value, str) and len(value) >= 4:
            text = text.replace(value, protocol.REDACTED)
    return clip_error(text)
