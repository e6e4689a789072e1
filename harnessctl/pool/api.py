"""The Python API a trainer uses: load a verified pool, route, run rollouts.

pool = Pool.load("pools/dbbench-v1")              # verifies every checksum and hash
policy = EndpointPolicy("http://127.0.0.1:8000/v1", "my-checkpoint", {"temperature": 1.0},
                        tokens=True)
names = pool.route(task, failures=["tool_error"], k=2)
out = pool.harness(names[0]).rollout(task, policy, seed=7)
out.reward, out.outcome, out.messages, out.usage, out.tokens().response_ids
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..envs import Environment, Task, get_environment
from ..errors import ConfigError, HarnessctlError, InfraError
from ..harness import HarnessSpec, check_environment, load_harness
from ..policy import Policy
from ..records import ModelCall, Profile, Trajectory
from ..sandbox import Limits
from .identity import manifest_version
from .integrity import KIND_RE, MANIFEST, PoolIntegrityError, check_pool
from .tokens import NoTokenIds, TokenSequence, stitch

#: litellm model prefixes that already say "an OpenAI-compatible server".
_OPENAI_COMPATIBLE = ("openai/", "hosted_vllm/")


@dataclass(frozen=True)
class EndpointPolicy:
    """An OpenAI-compatible inference endpoint (vLLM, SGLang, llama.cpp, a trainer's rollout
    server).

    ``model`` is the name the server serves, as it spells it (``Qwen/Qwen2.5-7B-Instruct``,
    a checkpoint path, an alias): it is always reached as an OpenAI-compatible endpoint, never
    read as a litellm provider prefix. ``seed_upstream`` sends each rollout's seed with its
    calls (servers that honour ``seed`` then sample reproducibly). ``tokens`` asks the server
    for token-level output (``logprobs`` and ``return_token_ids``), so each rollout's calls
    carry token ids and logprobs (:meth:`RolloutOutput.tokens`). ``api_key`` is a credential:
    it reaches the server and nothing else (never a trajectory, the store or a pool).
    """

    base_url: str
    model: str
    params: dict = field(default_factory=dict)
    api_key: str = field(default="EMPTY", repr=False)
    seed_upstream: bool = True
    tokens: bool = False

    def to_policy(self, seed: int | None = None) -> Policy:
        """The litellm policy for one rollout (``seed``: the rollout's, sent upstream when
        ``seed_upstream`` and the params do not fix one)."""
        model = self.model if self.model.startswith(_OPENAI_COMPATIBLE) else f"openai/{self.model}"
        params: dict[str, Any] = {}
        if self.tokens:
            params.update(logprobs=True, return_token_ids=True)
        if self.seed_upstream and seed is not None:
            params["seed"] = seed
        params.update(self.params)
        return Policy(model, {**params, "api_base": self.base_url}, {"api_key": self.api_key})


class RolloutInfraError(InfraError):
    """A pool rollout failed for a reason outside the harness and the task (the endpoint is
    down or refused the configuration, the sandbox died): nothing was learned about the
    task, so it is raised rather than returned as a failed rollout with reward 0."""

    def __init__(self, message: str, output: RolloutOutput) -> None:
        super().__init__(message)
        self.output = output


@dataclass
class RolloutOutput:
    """One rollout under a pool harness.

    ``messages`` is the last call's context and reply (the conversation as the harness last
    built it); ``calls`` every model call with its token-level capture, and
    :meth:`tokens` the trainable token sequence; ``usage`` one summary per call.
    """

    harness: str
    harness_hash: str
    task_id: str
    seed: int
    outcome: str
    reward: float
    messages: list[dict]
    usage: list[dict]
    error: str | None = None
    trajectory: Trajectory | None = field(default=None, repr=False)
    rollout_id: str = ""
    calls: list[ModelCall] = field(default_factory=list, repr=False)

    @property
    def success(self) -> bool:
        return self.outcome == "success"

    @property
    def finish_reason(self) -> str | None:
        """The last answered call's finish reason (``stop``, ``length``, ``tool_calls``)."""
        answered = [c for c in self.calls if c.status == "ok"]
        return answered[-1].finish_reason if answered else None

    def tokens(self) -> TokenSequence:
        """The rollout's token sequence (``harnessctl.pool.tokens``); ``NoTokenIds`` when the
        calls carry none (ask with ``EndpointPolicy(..., tokens=True)``)."""
        return stitch(self.calls)

    def row(self) -> dict[str, Any]:
        """Every per-row field a trainer may need, from this one rollout: identity, outcome,
        reward, messages, usage, and (when the calls carry token ids) the stitched tokens."""
        out: dict[str, Any] = {
            "harness": self.harness,
            "harness_hash": self.harness_hash,
            "rollout_id": self.rollout_id,
            "task_id": self.task_id,
            "seed": self.seed,
            "outcome": self.outcome,
            "success": self.success,
            "reward": self.reward,
            "finish_reason": self.finish_reason,
            "messages": self.messages,
            "usage": self.usage,
        }
        try:
            seq = self.tokens()
        except NoTokenIds:
            return out
        out.update(
            append_only=seq.append_only,
            token_reason=seq.reason,
            prompt_ids=seq.prompt_ids,
            response_ids=seq.response_ids,
            response_mask=seq.response_mask,
            logprobs=seq.logprobs,
            num_turns=seq.num_turns,
        )
        return out


def known_environment(kind: str) -> Environment:
    """The environment of a kind a pool names, resolved only through the registry's known
    names (built-ins, this process's registrations, installed entry points): a pool is data,
    and a ``module:attr`` in it is never imported."""
    from ..envs import known_environments

    known = known_environments()
    if kind not in known:
        raise ConfigError(
            "env",
            f"{kind!r} is not a known environment kind (known: {', '.join(known)}); pools "
            "and records name kinds, never import paths (install the kind's package)",
        )
    return get_environment(kind)


def task_from_record(record: dict, task_id: str | None = None, *, env: str) -> Task:
    """A task of environment ``env`` (a known kind, see :func:`known_environment`) from a raw
    record (one line of its task file), made by the environment's ``task_from_record``
    (which may check the record)."""
    return known_environment(env).task_from_record(record, task_id)


class PoolHarness:
    def __init__(self, pool: Pool, entry: dict) -> None:
        self.pool = pool
        self.entry = entry
        self.name: str = entry["name"]  # a plain name: check_pool refused anything else
        self.role: str = entry["role"]
        self.spec: HarnessSpec = load_harness(pool.root / "harnesses" / self.name)
        where = str(self.spec.path / "harness.yaml")
        if self.spec.hash != entry["hash"]:
            raise PoolIntegrityError(str(self.spec.path), "content hash differs from pool.json")
        if self.spec.name != self.name:
            raise PoolIntegrityError(where, f"name {self.spec.name!r} is not {self.name!r}")
        kind = self.spec.manifest.env
        if not KIND_RE.match(kind) or kind != entry.get("env", kind):
            raise PoolIntegrityError(
                where,
                f"env {kind!r} is not the plain kind name pool.json gives "
                f"({entry.get('env')!r}); a pool names kinds, never import paths",
            )

    @property
    def reproduction(self) -> dict | None:
        """Its edit's claimed rescues re-tested (``claimed``, ``tested``, ``reproduced``,
        ``null``, ``verdict``), as the pool recorded it; None for the base and older pools."""
        found = self.entry.get("reproduction")
        return found if isinstance(found, dict) else None

    def rollout(
        self, task: Task | dict, policy: EndpointPolicy | Policy, *, seed: int = 0
    ) -> RolloutOutput:
        """One rollout of ``task`` under this harness. An endpoint policy sends ``seed``
        upstream (see :class:`EndpointPolicy`). A refused configuration raises ``ConfigError``
        and any other infrastructure failure :class:`RolloutInfraError`: neither is a
        failed task."""
        if isinstance(task, dict):
            task = task_from_record(task, env=self.spec.manifest.env)
        real = policy.to_policy(seed) if isinstance(policy, EndpointPolicy) else policy
        check_environment(self.spec, task.env)
        from ..run.session import check_run_config

        rec = self.pool.session().run(self.spec, task, seed, real)
        check_run_config(rec.ledger, real)  # a refused configuration is no task failure
        calls = rec.trajectory.calls
        messages: list[dict] = []
        if calls:
            messages = list(calls[-1].messages)
            if calls[-1].reply is not None:
                messages.append({"role": "assistant", "content": calls[-1].reply})
        usage = [
            {
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "cost_usd": c.cost_usd,
                "latency_s": c.latency_s,
                "status": c.status,
            }
            for c in calls
        ]
        out = RolloutOutput(
            harness=self.name,
            harness_hash=self.spec.hash,
            task_id=task.id,
            seed=seed,
            outcome=rec.outcome.value,
            reward=rec.reward,
            messages=messages,
            usage=usage,
            error=rec.error,
            trajectory=rec.trajectory,
            rollout_id=rec.rollout_id,
            calls=list(calls),
        )
        if out.outcome == "infra_error":
            raise RolloutInfraError(
                f"rollout of {task.id} under {self.name} (seed {seed}) failed outside the "
                f"harness: {rec.error}",
                out,
            )
        return out


class Pool:
    """A verified, frozen pool. Use as a context manager (or call ``close``).

    Rollouts run under ``limits`` and the call and token budgets ``max_calls`` and
    ``max_tokens`` (None: the environment's own defaults, as ``harnessctl eval`` uses)."""

    def __init__(
        self,
        root: Path,
        manifest: dict,
        *,
        sandbox: str | None = "local",
        limits: Limits | None = None,
        max_calls: int | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.root = root
        self.manifest = manifest
        self.sandbox = sandbox or "local"
        self.limits = limits or Limits()
        self.max_calls, self.max_tokens = max_calls, max_tokens
        self._harnesses: dict[str, PoolHarness] = {}
        self._session: Any = None
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        sandbox: str | None = "local",
        limits: Limits | None = None,
        max_calls: int | None = None,
        max_tokens: int | None = None,
    ) -> Pool:
        root = Path(path)
        if root.is_file() and root.name.endswith(".tar.gz"):
            root = _unpack(root)
        check_pool(root)
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        manifest_version(manifest, str(root / MANIFEST))
        budgets = {"max_calls": max_calls, "max_tokens": max_tokens}
        pool = cls(root, manifest, sandbox=sandbox, limits=limits, **budgets)
        for entry in manifest["harnesses"]:
            pool._harnesses[entry["name"]] = PoolHarness(pool, entry)
        return pool

    @property
    def id(self) -> str:
        """The pool's id: of its harness trees and (manifest version 3 on) each frozen
        profile's split and content (:func:`harnessctl.pool.identity.pool_id`)."""
        return self.manifest["pool_id"]

    @property
    def names(self) -> list[str]:
        return list(self._harnesses)

    @property
    def base(self) -> PoolHarness:
        return next(h for h in self._harnesses.values() if h.role == "base")

    def harness(self, name: str) -> PoolHarness:
        try:
            return self._harnesses[name]
        except KeyError:
            raise HarnessctlError(
                f"no harness {name!r} in pool {self.id} (has: {', '.join(self.names)})"
            ) from None

    def profiles(self) -> dict[str, Profile]:
        """The profile of each harness that has one, validated (a ConfigError names a
        malformed or newer-version file)."""
        out = {}
        for name in self.names:
            path = self.root / "profiles" / f"{name}.json"
            if path.is_file():
                data = json.loads(path.read_text(encoding="utf-8"))
                out[name] = Profile.load(data, where=str(path))
        return out

    def route(self, task: Task | dict, failures: list, k: int = 2) -> list[str]:
        """The Top-k auxiliary harnesses for a failed task (names, best first)."""
        if isinstance(task, dict):
            task = task_from_record(task, env=self.base.spec.manifest.env)
        outcomes = [getattr(f, "outcome", f) for f in failures]
        aux = [h.name for h in self._harnesses.values() if h.role == "aux"]
        profiles = {n: p for n, p in self.profiles().items() if n in aux}
        if len(profiles) < len(aux):  # no evidence for some: keep manifest order
            return aux[:k]
        from ..profiles.router import route

        result = route(
            profiles,
            task_id=task.id,
            category=task.category,
            failure_outcomes=[str(o) for o in outcomes],
            k=k,
        )
        return [c.name for c in result.top]

    def session(self):
        from ..run.session import RolloutSession

        with self._lock:
            if self._session is None:
                env = known_environment(self.base.spec.manifest.env)
                # None: the environment's budgets, resolved by the session as eval does
                self._session = RolloutSession(
                    env, sandbox=self.sandbox, limits=self.limits, max_calls=self.max_calls,
                    max_tokens=self.max_tokens,
                ).start()  # fmt: skip
            return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unpack(archive: Path) -> Path:
    import tarfile
    import tempfile

    dest = Path(tempfile.mkdtemp(prefix="hxpool-"))
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    (inner,) = [p for p in dest.iterdir() if p.is_dir()]
    return inner


_loaded: dict[str, Pool] = {}
_loaded_lock = threading.Lock()


def load_pool(path: str) -> Pool:
    """The pool at ``path``, loaded (and verified) once per process: a trainer's workers ask
    for the same pool at every batch."""
    with _loaded_lock:
        if path not in _loaded:
            _loaded[path] = Pool.load(path)
        return _loaded[path]
