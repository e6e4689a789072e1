"""The Python API a trainer uses: load a verified pool, route, run rollouts.

pool = Pool.load("pools/dbbench-v1")              # verifies every checksum and hash
policy = EndpointPolicy("http://127.0.0.1:8000/v1", "my-checkpoint", {"temperature": 1.0})
names = pool.route(task, failures=["tool_error"], k=2)
out = pool.harness(names[0]).rollout(task, policy, seed=7)
out.reward, out.outcome, out.messages, out.usage
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..envs import Task, get_environment
from ..errors import HarnessctlError
from ..harness import HarnessSpec, check_environment, load_harness
from ..policy import Policy
from ..records import Profile, Trajectory
from ..sandbox import Limits
from .integrity import MANIFEST, PoolIntegrityError, check_pool


@dataclass(frozen=True)
class EndpointPolicy:
    """An OpenAI-compatible inference endpoint (vLLM, SGLang, a trainer's rollout server)."""

    base_url: str
    model: str
    params: dict = field(default_factory=dict)
    api_key: str = "EMPTY"

    def to_policy(self) -> Policy:
        model = self.model if "/" in self.model.split(":")[0] else f"openai/{self.model}"
        if self.model.startswith(("openai/", "hosted_vllm/")):
            model = self.model
        return Policy(model, {"api_base": self.base_url, "api_key": self.api_key, **self.params})


@dataclass
class RolloutOutput:
    """One rollout under a pool harness."""

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

    @property
    def success(self) -> bool:
        return self.outcome == "success"


def task_from_record(record: dict, task_id: str | None = None, *, env: str) -> Task:
    """A task of environment ``env`` from a raw record (one line of its task file): the
    environment's own ``task_from_record`` when it has one (it checks the record), else a task
    whose category is the record's ``category`` string (or ``task``)."""
    environment = get_environment(env)
    own = getattr(environment, "task_from_record", None)
    if callable(own):
        return own(record, task_id)
    blob = json.dumps(record, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(blob.encode()).hexdigest()
    category = record.get("category")
    return Task(
        id=task_id or f"task-{digest[:10]}",
        env=env,
        category=category if isinstance(category, str) and category else "task",
        record=record,
        content_hash=digest,
        source="<record>",
    )


class PoolHarness:
    def __init__(self, pool: Pool, entry: dict) -> None:
        self.pool = pool
        self.entry = entry
        self.name: str = entry["name"]
        self.role: str = entry["role"]
        self.spec: HarnessSpec = load_harness(pool.root / "harnesses" / self.name)
        if self.spec.hash != entry["hash"]:
            raise PoolIntegrityError(str(self.spec.path), "content hash differs from pool.json")

    def rollout(
        self, task: Task | dict, policy: EndpointPolicy | Policy, *, seed: int = 0
    ) -> RolloutOutput:
        if isinstance(task, dict):
            task = task_from_record(task, env=self.spec.manifest.env)
        real = policy.to_policy() if isinstance(policy, EndpointPolicy) else policy
        check_environment(self.spec, task.env)
        from ..rollout import check_run_config

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
        return RolloutOutput(
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
        )


class Pool:
    """A verified, frozen pool. Use as a context manager (or call ``close``)."""

    def __init__(
        self, root: Path, manifest: dict, *, sandbox: str = "local", limits: Limits | None = None
    ) -> None:
        self.root = root
        self.manifest = manifest
        self.sandbox = sandbox
        self.limits = limits or Limits()
        self._harnesses: dict[str, PoolHarness] = {}
        self._session: Any = None
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls, path: str | Path, *, sandbox: str = "local", limits: Limits | None = None
    ) -> Pool:
        root = Path(path)
        if root.is_file() and root.name.endswith(".tar.gz"):
            root = _unpack(root)
        check_pool(root)
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        pool = cls(root, manifest, sandbox=sandbox, limits=limits)
        for entry in manifest["harnesses"]:
            pool._harnesses[entry["name"]] = PoolHarness(pool, entry)
        return pool

    @property
    def id(self) -> str:
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
        from ..rollout import RolloutSession

        with self._lock:
            if self._session is None:
                env = get_environment(self.base.spec.manifest.env)
                self._session = RolloutSession(
                    env, sandbox=self.sandbox, limits=self.limits
                ).start()
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
