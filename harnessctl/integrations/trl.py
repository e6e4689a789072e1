"""TRL (1.16): GRPO on harnessctl rollouts of the policy being trained, with the rescue.

Importing this module imports torch, not TRL; it follows ``trl/trainer/grpo_trainer.py`` of
TRL 1.16.0 (``GRPOTrainer(rollout_func=...)``, ``_generate``, ``RepeatSampler``), the version
its tests run. examples/trainers/trl_rescue.py has the whole wiring::

    rollouts = HarnessRollouts(pool, rescue=True)          # a verified Pool
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=GRPOConfig(...),
                          train_dataset=Dataset.from_list(task_rows(tasks)),
                          reward_funcs=rollout_reward, rollout_func=rollouts)

- Each dataset row's ``prompt`` is a task as the JSON string :mod:`harnessctl.pool.rows`
  writes (:func:`task_rows`): TRL hands ``rollout_func`` only the prompts, so the prompt *is*
  the task. TRL's ``RepeatSampler`` repeats each prompt ``num_generations`` times in a row,
  so the prompts come in groups of that size (checked: a group's prompts must be equal).
  One process: with several, TRL spreads a group's rows over them, and the rule needs the
  whole group (refused with that message).
- :class:`HarnessRollouts` (the ``rollout_func``) runs one rollout per prompt under the pool's
  base harness, with the trainer's model served by :class:`PolicyServer`: a loopback
  OpenAI-compatible endpoint, in this process, that generates with ``trainer.model`` itself,
  so every rollout samples from the current weights (no copy, no sync). It returns token
  ids and logprobs as vLLM does when asked, and templates a conversation with the exact ids
  it generated for the replies in it, so a multi-turn rollout stitches into one sequence
  (:mod:`harnessctl.pool.tokens`): the first prompt, then every reply (``env_mask`` 1) and
  what the harness added between replies (``env_mask`` 0, TRL's mask for tokens the policy
  did not generate).
- With ``rescue`` on, every group whose base attempts all failed goes through
  :func:`harnessctl.pool.rescue_batch` (Top-k siblings, ``mix``: ``keep-failures`` by default),
  and the rows it replaces carry the sibling rollouts' tokens and rewards. The batch's
  :class:`~harnessctl.pool.RescueMetrics` and the base harness's mean reward (before any
  rescue: the policy's own success under the base, the number to watch) go to TRL's log
  (``harnessctl/rescue_*``, ``harnessctl/base_reward``).
- :func:`rollout_reward` is the reward function: the rollout's reward, as the environment
  scored it on the host (TRL passes ``rollout_func``'s extra fields to reward functions).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch

from ..pool import EndpointPolicy, Pool, RolloutOutput, rescue_batch
from ..pool.rows import decode_task, encode_task, task_columns
from ..pool.sampler import DEFAULT_MIX, check_mix
from ..pool.tokens import NoTokenIds
from .chat_request import BadRequest, ChatRequest, check_chat_request, torch_seed

REWARD = "harnessctl_reward"  # the extra field rollout_reward reads
SERVED_NAME = "trl-policy"


# --- the policy server ----------------------------------------------------------------------


class ReplyIds:
    """Token ids of replies the server generated, by text (bounded): a conversation that
    holds one of its replies is templated with the ids the model generated, not a fresh
    tokenization of the text (which may split it differently), so that every call of a
    rollout extends the previous call's prompt and reply token for token."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._ids: OrderedDict[str, list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, text: str, ids: list[int]) -> None:
        with self._lock:
            self._ids[text] = list(ids)
            self._ids.move_to_end(text)
            while len(self._ids) > self.size:
                self._ids.popitem(last=False)

    def get(self, text: str) -> list[int] | None:
        with self._lock:
            return self._ids.get(text)


def template_ids(tokenizer: Any, messages: list[dict], replies: ReplyIds) -> list[int]:
    """The prompt ids of ``messages`` under the tokenizer's chat template (with the
    generation prompt): the rendered text, each assistant message's content replaced by the
    ids generated for it when the server has them (see :class:`ReplyIds`)."""
    text = _render(tokenizer, messages)
    ids: list[int] = []
    at = 0
    for i, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, str) or not content:
            continue
        known = replies.get(content)
        where = _reply_at(tokenizer, messages[:i], text, content, at) if known else -1
        if known is None or where < 0:
            continue
        ids += _encode(tokenizer, text[at:where]) + known
        at = where + len(content)
    return ids + _encode(tokenizer, text[at:])


def _render(tokenizer: Any, messages: list[dict]) -> str:
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def _reply_at(tokenizer: Any, before: list[dict], text: str, content: str, at: int) -> int:
    """Where an assistant message's content starts in the rendered ``text``: right after the
    rendering of the messages before it with the generation prompt (the very prompt the reply
    was generated from), else its first occurrence from ``at`` (a template that renders a
    past turn otherwise); -1 when it is not there."""
    prefix = _render(tokenizer, before) if before else ""
    if at <= len(prefix) and text.startswith(prefix) and text.startswith(content, len(prefix)):
        return len(prefix)
    return text.find(content, at)


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def stop_ids(tokenizer: Any, model: Any) -> set[int]:
    """The tokens that end a reply: the tokenizer's end of sequence, the model's generation
    config's, and the chat template's end of turn (``<|im_end|>``, ``<end_of_turn>``,
    ``<|eot_id|>``) where the vocabulary has one."""
    out: set[int] = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (tokenizer.eos_token_id, configured):
        out.update(value if isinstance(value, list) else [] if value is None else [value])
    vocab = tokenizer.get_vocab()
    out.update(vocab[t] for t in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>") if t in vocab)
    return out


@dataclass(frozen=True)
class Generated:
    prompt_ids: list[int]
    ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str


class PolicyServer:
    """A loopback OpenAI-compatible chat endpoint generating with ``model`` as it is now.

    One generation at a time (a lock): the trainer's model is not shared between threads
    while it samples, and its RNG state is forked per call (the request's ``seed``) so that
    serving never moves the trainer's own random stream. Every request is answered: a value
    its model cannot take (a seed past 64 bits, a NaN ``top_p``) is a 400 naming the field,
    checked before the model sees it (:mod:`.chat_request`), the server's own failure a 500,
    never a dropped connection. Use as a context manager."""

    def __init__(
        self, model: Any, tokenizer: Any, *, name: str = SERVED_NAME, max_new_tokens: int = 64
    ) -> None:
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.max_new_tokens = max_new_tokens
        self.replies = ReplyIds()
        self.stops = stop_ids(tokenizer, model)
        self.calls = 0
        self._lock = threading.Lock()
        self._http: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        if self._http is None:
            raise RuntimeError("the policy server is not started")
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def start(self) -> PolicyServer:
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def generate(self, body: dict | ChatRequest) -> Generated:
        """One reply to an OpenAI chat request's ``messages`` (``temperature``, ``top_p``,
        ``max_tokens``, ``seed`` honoured; ``max_tokens`` capped at ``max_new_tokens``).
        A request body is checked first (:func:`check_chat_request`: ``BadRequest``)."""
        request = body if isinstance(body, ChatRequest) else check_chat_request(body)
        try:
            prompt = template_ids(self.tokenizer, request.messages, self.replies)
        except Exception as exc:  # the chat template refused the harness's messages
            raise BadRequest(f"messages: the chat template cannot render them: {exc}") from exc
        limit = min(request.max_tokens or self.max_new_tokens, self.max_new_tokens)
        temperature = request.temperature
        device = self.model.device
        mask = torch.ones(1, len(prompt), dtype=torch.long, device=device)
        with self._lock, _eval_mode(self.model), torch.random.fork_rng(devices=[]):
            # the request's seed and the prompt's length: each call of a rollout samples its
            # own stream, the same whatever order concurrent rollouts arrive in
            torch.manual_seed(torch_seed(request.seed, len(prompt)))
            self.calls += 1
            out = self.model.generate(
                torch.tensor([prompt], device=device),
                attention_mask=mask,
                max_new_tokens=max(1, limit),
                do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None,
                top_p=request.top_p,
                top_k=0,
                eos_token_id=sorted(self.stops),
                pad_token_id=self.tokenizer.pad_token_id or sorted(self.stops)[0],
                output_logits=True,
                return_dict_in_generate=True,
            )
        ids = out.sequences[0, len(prompt) :].tolist()
        logits = torch.stack(out.logits, dim=1)[0, : len(ids)].float()
        logprobs = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        ended = bool(ids) and ids[-1] in self.stops
        text = self.tokenizer.decode(ids[:-1] if ended else ids, skip_special_tokens=True)
        self.replies.put(text, ids[:-1] if ended else ids)
        reason = "stop" if ended else "length"
        return Generated(prompt, ids, logprobs.tolist(), text, reason)

    def completion(self, body: dict | ChatRequest) -> dict:
        """The response body, shaped as vLLM's with ``return_token_ids`` and ``logprobs``."""
        got = self.generate(body)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": got.text},
            "finish_reason": got.finish_reason,
            "token_ids": got.ids,
            "logprobs": {
                "content": [
                    {"token": f"token_id:{i}", "logprob": lp, "bytes": None, "top_logprobs": []}
                    for i, lp in zip(got.ids, got.logprobs, strict=True)
                ]
            },
        }
        return {
            "id": f"chatcmpl-{self.calls}",
            "object": "chat.completion",
            "created": 0,
            "model": self.name,
            "choices": [choice],
            "prompt_token_ids": got.prompt_ids,
            "usage": {
                "prompt_tokens": len(got.prompt_ids),
                "completion_tokens": len(got.ids),
                "total_tokens": len(got.prompt_ids) + len(got.ids),
            },
        }


@contextlib.contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    """``model`` in eval mode and without gradients while it generates: a trainer's model is
    in train mode, where gradient checkpointing turns the key-value cache off (each new
    token would recompute the whole sequence). The trainer waits on the rollouts meanwhile,
    so nothing trains while the mode is switched."""
    training = bool(model.training)
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(training)


def _handler(server: PolicyServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # the trainer's log is elsewhere
            pass

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": server.name}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            # every request gets an answer: a dropped connection is read as the host failing
            try:
                try:
                    size = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(size))
                except ValueError as exc:
                    raise BadRequest(f"the body is not JSON: {exc}") from None
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, _error("not_found", f"no route {self.path}"))
                    return
                if isinstance(body, dict) and body.get("stream"):
                    raise BadRequest("streaming is not served")
                reply = server.completion(check_chat_request(body))
            except BadRequest as exc:  # the request's own fault
                self._send(400, _error("invalid_request_error", str(exc)))
            except Exception as exc:  # the server's: a 500 the gateway reads as infra_error
                self._send(500, _error("server_error", f"{type(exc).__name__}: {exc}"))
            else:
                self._send(200, reply)

    return Handler


def _error(kind: str, message: str) -> dict:
    return {"error": {"type": kind, "message": message[:2000]}}


# --- rollouts as TRL rows -------------------------------------------------------------------


def task_rows(tasks: Sequence[Any]) -> list[dict[str, Any]]:
    """Dataset rows for TRL: ``prompt`` is the task's JSON string (:func:`encode_task`),
    beside the typed columns of :func:`task_columns`."""
    return [{"prompt": encode_task(task), **task_columns(task, i)} for i, task in enumerate(tasks)]


def prompt_groups(prompts: Sequence[Any], size: int) -> list[Any]:
    """The task of each group of ``size`` consecutive prompts (TRL's ``RepeatSampler`` order);
    ``ValueError`` when the prompts do not come in such groups."""
    if size < 1 or len(prompts) % size:
        raise ValueError(f"{len(prompts)} prompts do not make groups of {size} (num_generations)")
    tasks = []
    for start in range(0, len(prompts), size):
        group = prompts[start : start + size]
        if any(p != group[0] for p in group):
            raise ValueError(
                f"prompts {start}..{start + size - 1} are not one task repeated: TRL's sampler "
                "repeats each prompt num_generations times in a row"
            )
        tasks.append(decode_task(group[0]))
    return tasks


@dataclass(frozen=True)
class Row:
    """One TRL row, every field from one rollout. ``unstitched`` says why the rollout's calls
    are not one token sequence (empty when they are): such a row holds its last answered
    call only, and a rollout with no tokens at all a one-token row that trains nothing."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    reward: float
    unstitched: str = ""


def trl_row(output: RolloutOutput, *, max_completion_length: int | None, pad_id: int) -> Row:
    """``output`` as one TRL row (see :class:`Row`); the completion is cut at
    ``max_completion_length`` tokens, as TRL cuts its own."""
    reward = float(output.reward)
    try:
        seq = output.tokens()
    except NoTokenIds as exc:
        return Row([pad_id], [pad_id], [0], [0.0], reward, str(exc))
    if seq.append_only:
        prompt, ids, mask = seq.prompt_ids, seq.response_ids, seq.response_mask
        logprobs, why = seq.logprobs, ""
    else:
        last = seq.samples[-1]
        prompt, ids, mask = last.prompt_ids, last.response_ids, [1] * len(last.response_ids)
        logprobs, why = last.logprobs, seq.reason
    if not ids:
        return Row(prompt or [pad_id], [pad_id], [0], [0.0], reward, why or "empty reply")
    cut = len(ids) if max_completion_length is None else max_completion_length
    values = list(logprobs) if logprobs is not None else [0.0] * len(ids)
    return Row(list(prompt), ids[:cut], mask[:cut], values[:cut], reward, why)


@dataclass
class StepRecord:
    """What one generation step did: the base harness's rollouts (the policy's own success
    under the base, before any rescue) and what was trained on."""

    step: int
    base_rewards: list[float]
    trained_rewards: list[float]
    rescue: dict[str, float] = field(default_factory=dict)
    unstitched: int = 0
    #: outcome -> count, of the base rollouts and of the rescue's sibling rollouts (all of
    #: them, kept or not)
    base_outcomes: dict[str, int] = field(default_factory=dict)
    sibling_outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def base_reward(self) -> float:
        return statistics.fmean(self.base_rewards) if self.base_rewards else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "base_reward": self.base_reward}


class HarnessRollouts:
    """TRL's ``rollout_func``: harnessctl rollouts of the policy being trained (module doc).

    ``rescue``: rescue all-fail groups through the pool (Top-``k`` siblings, ``mix``); off,
    the same rollouts train the policy alone. ``params`` are the sampling parameters of every
    call (``temperature``, ``max_tokens``); ``max_new_tokens`` caps a reply. Seeds: base
    rollouts of step ``s``, group ``g``, row ``r`` use ``seed + 100_003 * s + 1000 * g + r``
    and the rescue ``seed + 100_003 * s + 50_000 + 1000 * n``, so two arms with the same
    weights sample the same base rollouts. ``records`` holds one :class:`StepRecord` per call.
    """

    __name__ = "harnessctl_rollouts"

    def __init__(
        self,
        pool: Pool,
        *,
        rescue: bool = True,
        k: int = 2,
        mix: str = DEFAULT_MIX,
        params: dict | None = None,
        max_new_tokens: int = 64,
        max_workers: int = 2,
        seed: int = 0,
    ) -> None:
        self.pool, self.rescue, self.k, self.mix = pool, rescue, k, check_mix(mix)
        self.params = {"temperature": 1.0, "max_tokens": max_new_tokens, **(params or {})}
        self.max_new_tokens, self.max_workers, self.seed = max_new_tokens, max_workers, seed
        self.server: PolicyServer | None = None
        self.records: list[StepRecord] = []

    def serve(self, model: Any, tokenizer: Any) -> PolicyServer:
        """The policy server for ``model`` (started on first use; :meth:`close` stops it)."""
        if self.server is None or self.server.model is not model:
            self.close()
            self.server = PolicyServer(model, tokenizer, max_new_tokens=self.max_new_tokens)
            self.server.start()
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def policy(self) -> EndpointPolicy:
        assert self.server is not None
        return EndpointPolicy(self.server.base_url, self.server.name, self.params, tokens=True)

    def base_samples(self, tasks: list[Any], size: int, step: int) -> list[dict[str, Any]]:
        """One rollout per row under the pool's base harness, as rescue_batch's samples."""
        jobs = [(g, r) for g in range(len(tasks)) for r in range(size)]
        policy, start = self.policy(), self.seed + 100_003 * step

        def one(job: tuple[int, int]) -> RolloutOutput:
            g, r = job
            return self.pool.base.rollout(tasks[g], policy, seed=start + 1000 * g + r)

        with ThreadPoolExecutor(max_workers=max(1, self.max_workers)) as ex:
            outputs = list(ex.map(one, jobs))
        return [
            {
                "uid": g,
                "task": tasks[g],
                "output": out,
                "reward": out.reward,
                "outcome": out.outcome,
            }
            for (g, _), out in zip(jobs, outputs, strict=True)
        ]

    def rescued(self, samples: list[dict[str, Any]], record: StepRecord) -> list[dict[str, Any]]:
        """``samples`` after the pool's rescue of its all-fail groups (the metrics and the
        sibling rollouts' outcomes go to ``record``)."""
        batch = rescue_batch(
            self.pool,
            samples,
            self.policy(),
            task_of=lambda s: s["task"],
            convert=lambda out, s: {**s, "output": out, "reward": out.reward, "rescued": True},
            k=self.k,
            seed=self.seed + 100_003 * record.step + 50_000,
            max_workers=max(1, self.max_workers),
            mix=self.mix,
        )
        record.rescue = batch.metrics.as_dict()
        tried = [out for result in batch.results.values() for out in result.attempted]
        record.sibling_outcomes = dict(Counter(out.outcome for out in tried))
        return list(batch.samples)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        processes = int(getattr(getattr(trainer, "accelerator", None), "num_processes", 1))
        if processes > 1:  # TRL then spreads a group's rows over the processes
            raise RuntimeError(
                f"HarnessRollouts needs every group on one process, and TRL runs {processes}: "
                "train on one process (the rollouts, not the trainer, are the parallel part)"
            )
        training = bool(trainer.model.training)
        size = trainer.num_generations if training else trainer.num_generations_eval
        tokenizer = getattr(trainer, "_tokenizer", None) or trainer.processing_class
        self.serve(trainer.model, tokenizer)
        step = int(trainer.state.global_step)
        samples = self.base_samples(prompt_groups(prompts, size), size, step)
        record = StepRecord(step, [float(s["reward"]) for s in samples], [])
        record.base_outcomes = dict(Counter(s["outcome"] for s in samples))
        if self.rescue and training:
            samples = self.rescued(samples, record)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        limit = getattr(trainer, "max_completion_length", None)
        rows = [trl_row(s["output"], max_completion_length=limit, pad_id=pad) for s in samples]
        record.trained_rewards = [r.reward for r in rows]
        record.unstitched = sum(bool(r.unstitched) for r in rows)
        self.records.append(record)
        log_record(trainer, record, "train" if training else "eval")
        return {
            "prompt_ids": [r.prompt_ids for r in rows],
            "completion_ids": [r.completion_ids for r in rows],
            "logprobs": [r.logprobs for r in rows],
            "env_mask": [r.env_mask for r in rows],
            REWARD: [r.reward for r in rows],
        }


def log_record(trainer: Any, record: StepRecord, mode: str) -> None:
    """The step's numbers in TRL's log: TRL averages each ``_metrics[mode]`` list into the
    next logged entry (``trainer.state.log_history``), as it does its own reward metrics."""
    metrics = getattr(trainer, "_metrics", None)
    if metrics is None:
        return
    values = {
        "harnessctl/base_reward": record.base_reward,
        "harnessctl/unstitched_rows": float(record.unstitched),
        **record.rescue,
    }
    for key, value in values.items():
        metrics[mode][key].append(float(value))


def rollout_reward(completions: list, **kwargs: Any) -> list[float]:
    """TRL reward function: each row's rollout reward (``rollout_func``'s extra field)."""
    rewards = kwargs.get(REWARD)
    if rewards is None:
        raise ValueError(
            f"no {REWARD!r} among the reward function's arguments: use it with "
            "HarnessRollouts as the trainer's rollout_func"
        )
    return [float(r) for r in rewards]
