"""The harness engineer's reward (Harness-R1), as a trainer calls it.

An editor model ("harness engineer") is trained on the GRPO records ``export-edits`` writes.
Its reward for a completion is what :func:`harnessctl.evolve.reward.reward_for_record`
realises: the patch is validated, the child of the record's parent is built and re-run on the
record's same-batch (task, seed) pairs with the recorded policy and limits::

    from harnessctl.evolve.engineer import score_patch, score_patches, make_trl_reward

    score_patch(record, completion, suite="path/to/suite")          # -> float
    score_patches(records, completions, suite=..., max_workers=4)  # -> list[float]
    reward_func = make_trl_reward(suite="path/to/suite", timeout_s=600)
    GRPOTrainer(..., reward_funcs=[reward_func], train_dataset=load_dataset(out, "grpo"))

Where the inputs come from: a record of schema 3 carries its parent harness's files, the
direction, the policy and the pairs; the tasks (and their gold labels, which never leave the
host) come from ``suite`` (the suite directory) or ``workspace`` (whose ``suite_path`` the
record names; it also gives the parent harness by hash, and its store). Without a workspace
or ``store``, a scorer keeps its rollouts in a temporary store of its own for its lifetime.

Defined scores: a patch that fails validation earns the recipe's ``invalid_reward``; a
scoring that takes longer than ``timeout_s`` earns ``timeout_reward`` (default: the
recipe's ``invalid_reward``) and is cancelled: it starts no further rollout, and what it had
running finishes into the store (a later score of the same completion reuses it).

Cached: a score is kept by (hash of the recipe, hash of the completion text), so the same
record and completion never re-run (timeouts are not kept); rollouts are also cached by the
store. Parallel: ``score_patches`` scores distinct completions on ``max_workers`` threads;
each scoring runs ``workers`` rollouts at a time.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ..errors import HarnessctlError
from .reward import EditVerdict, RewardRecipe, load_recipe, reward_for_record

__all__ = [
    "DEFAULT_CACHE",
    "PatchScore",
    "PatchScorer",
    "ScoreCache",
    "TRLReward",
    "ValidityReward",
    "completion_text",
    "make_trl_reward",
    "score_patch",
    "score_patches",
]


@dataclass(frozen=True)
class PatchScore:
    """One completion's score and how it came about."""

    reward: float
    status: Literal["rejected", "evaluated", "timeout"]
    """``rejected``: the patch failed validation; ``evaluated``: the child was re-run;
    ``timeout``: scoring took longer than ``timeout_s``."""
    reason: str
    cached: bool = False
    """Served from the score cache (nothing ran)."""
    verdict: EditVerdict | None = None


class ScoreCache:
    """Scores by (recipe, completion) hash: thread-safe, the least recently used dropped
    past ``maxsize``."""

    def __init__(self, maxsize: int = 65536) -> None:
        self.maxsize = maxsize
        self._scores: OrderedDict[str, PatchScore] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(recipe: RewardRecipe, text: str) -> str:
        recipe_hash = hashlib.sha256(recipe.model_dump_json().encode()).hexdigest()
        text_hash = hashlib.sha256(text.encode()).hexdigest()
        return f"{recipe_hash}:{text_hash}"

    def get(self, key: str) -> PatchScore | None:
        with self._lock:
            score = self._scores.get(key)
            if score is not None:
                self._scores.move_to_end(key)
            return score

    def put(self, key: str, score: PatchScore) -> None:
        with self._lock:
            self._scores[key] = score
            self._scores.move_to_end(key)
            while len(self._scores) > self.maxsize:
                self._scores.popitem(last=False)

    def __len__(self) -> int:
        return len(self._scores)

    def clear(self) -> None:
        with self._lock:
            self._scores.clear()


DEFAULT_CACHE = ScoreCache()
"""The cache :func:`score_patch` and :func:`score_patches` share unless given another (or
``cache=None``). A :class:`PatchScorer` gets a cache of its own by default."""


class _Cancelled(HarnessctlError):
    """A timed-out scoring stops at its next rollout."""


def completion_text(completion: Any) -> str:
    """The text of a completion as trainers pass it: a string, a message
    (``{"role": "assistant", "content": ...}``) or a list of them (TRL's conversational
    form; the assistant messages' text, joined), content as a string or a list of parts."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, list | tuple):
        raise TypeError(f"a completion is a string or a list of messages, not {completion!r}")
    texts = []
    for message in completion:
        if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        texts.append(content or "")
    return "\n".join(texts)


class PatchScorer:
    """Scores completions for GRPO records with one set of inputs (see the module doc):
    ``workspace``, ``suite``, ``store``, ``policy`` (to give a credential in code),
    ``sandbox`` and ``workers`` as :func:`reward_for_record` takes them; ``timeout_s`` and
    ``timeout_reward`` per completion; ``cache`` (a new one by default; None: no cache).

    Use it as a context manager or call :meth:`close`: it owns the store it opened and its
    temporary directory (kept until cancelled scorings have stopped)."""

    def __init__(
        self,
        *,
        workspace: Any = None,
        suite: Any = None,
        store: Any = None,
        policy: Any = None,
        sandbox: str | None = None,
        workers: int | None = None,
        timeout_s: float | None = None,
        timeout_reward: float | None = None,
        cache: ScoreCache | None | Literal["new"] = "new",
    ) -> None:
        from ..store import Store
        from ..suite import Suite, load_suite
        from ..workspace import Workspace, load_workspace

        if workspace is None and suite is None:
            raise HarnessctlError("pass suite= (the suite directory) or workspace=")
        self.workspace = (
            workspace
            if workspace is None or isinstance(workspace, Workspace)
            else load_workspace(Path(workspace))
        )
        many = isinstance(suite, list | tuple)
        suites = [s if isinstance(s, Suite) else load_suite(s) for s in (suite if many else [])]
        # several environments' records: each recipe names its suite by id
        self.suite = None if many else suite
        if self.suite is not None and not isinstance(self.suite, Suite):
            self.suite = load_suite(self.suite)
        self.suites: dict[str, Any] = {s.id: s for s in suites}
        for one in [self.suite, *suites]:
            if one is not None:  # computed once here, not by threads racing for it
                _ = one.id, one.environment
        self.policy, self.sandbox, self.workers = policy, sandbox, workers
        self.timeout_s, self.timeout_reward = timeout_s, timeout_reward
        self.cache = ScoreCache() if cache == "new" else cache
        self._scratch = Path(tempfile.mkdtemp(prefix="hxscore-"))
        self._owned_store = None
        if store is None:
            if self.workspace is not None:
                store = self.workspace.open_store()
            else:
                store = Store(f"sqlite:///{self._scratch / 'store.db'}", self._scratch / "traj")
            self._owned_store = store
        self.store = store
        self._parents: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._active = 0
        self._closed = False
        self._idle = threading.Condition(self._lock)

    # --- scoring ---------------------------------------------------------------------
    def score(self, record: Any, completion: Any) -> float:
        """The reward of ``completion`` for ``record`` (a GRPO record or its recipe)."""
        return self.assess(record, completion).reward

    def assess(self, record: Any, completion: Any) -> PatchScore:
        """Like :meth:`score`, with the verdict and whether it came from the cache."""
        recipe, text = load_recipe(record), completion_text(completion)
        key = ScoreCache.key(recipe, text)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return replace(hit, cached=True)
        score = self._run(recipe, text)
        if self.cache is not None and score.status != "timeout":
            self.cache.put(key, score)
        return score

    def score_many(
        self, records: Sequence[Any], completions: Sequence[Any], max_workers: int = 4
    ) -> list[float]:
        """Rewards of ``completions[i]`` for ``records[i]``, distinct ones scored in parallel
        on ``max_workers`` threads (a repeated pair is scored once)."""
        return [s.reward for s in self.assess_many(records, completions, max_workers)]

    def assess_many(
        self, records: Sequence[Any], completions: Sequence[Any], max_workers: int = 4
    ) -> list[PatchScore]:
        if len(records) != len(completions):
            raise ValueError(f"{len(records)} records for {len(completions)} completions")
        pairs = zip(records, completions, strict=True)
        items = [(load_recipe(r), completion_text(c)) for r, c in pairs]
        keys = [ScoreCache.key(recipe, text) for recipe, text in items]
        first = dict(zip(keys, items, strict=True))
        with ThreadPoolExecutor(max(1, max_workers), thread_name_prefix="score") as pool:
            futures = {key: pool.submit(self.assess, *item) for key, item in first.items()}
            scores = {key: future.result() for key, future in futures.items()}
        return [scores[key] for key in keys]

    def _run(self, recipe: RewardRecipe, text: str) -> PatchScore:
        with self._lock:
            if self._closed:
                raise HarnessctlError("this PatchScorer is closed")
            self._active += 1
        cancel = threading.Event()
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["verdict"] = self._judge(recipe, text, cancel)
            except BaseException as exc:  # handed to the caller, or dropped once timed out
                box["error"] = exc
            finally:
                self._done()

        if self.timeout_s is None:
            work()
        else:
            thread = threading.Thread(target=work, name="score-patch", daemon=True)
            thread.start()
            thread.join(self.timeout_s)
            if thread.is_alive():
                cancel.set()
                reward = self.timeout_reward
                return PatchScore(
                    recipe.invalid_reward if reward is None else reward,
                    "timeout",
                    f"scoring took longer than {self.timeout_s:g} s",
                )
        if "error" in box:
            raise box["error"]
        verdict: EditVerdict = box["verdict"]
        return PatchScore(verdict.reward, verdict.status, verdict.reason, verdict=verdict)

    def _judge(self, recipe: RewardRecipe, text: str, cancel: threading.Event) -> EditVerdict:
        def progress(event: str, done: int, total: int) -> None:
            if event == "rollout" and cancel.is_set():
                raise _Cancelled("scoring cancelled: it timed out")

        guarded = self._guard(recipe, text)
        if guarded is not None:
            return guarded

        return reward_for_record(
            recipe,
            text,
            workspace=self.workspace,
            suite=self._suite_of(recipe),
            store=self.store,
            policy=self.policy,
            sandbox=self.sandbox,
            workers=self.workers,
            progress=progress,
            parent=self._parent(recipe),
        )

    def _suite_of(self, recipe: RewardRecipe) -> Any:
        """The suite to re-run the recipe's tasks from: the one given, else the one of the
        given suites with the recipe's id (None: the workspace's)."""
        if not self.suites:
            return self.suite
        if recipe.suite not in self.suites:
            known = ", ".join(sorted(self.suites))
            raise HarnessctlError(f"no suite {recipe.suite} among the scorer's ({known})")
        return self.suites[recipe.suite]

    def _guard(self, recipe: RewardRecipe, text: str) -> EditVerdict | None:
        """A verdict of ``rejected`` for a patch that games the scorer (:mod:`.guards`),
        before anything is built or run; None for any other (parsed or not: validation
        then says what is wrong with it)."""
        from .directions import Direction
        from .guards import gaming_paths
        from .patch import PatchError, parse_patch

        if recipe.direction is None:
            return None
        try:
            blocks = parse_patch(text)
        except PatchError:
            return None
        tree = recipe.parent_tree
        existing = {f.path for f in tree.files} if tree is not None else set()
        why = gaming_paths(Direction.model_validate(recipe.direction), blocks, existing)
        if why is None:
            return None
        return EditVerdict(
            status="rejected",
            accepted=False,
            reward=recipe.invalid_reward,
            reason="games_the_scorer",
            detail=why,
            batch_size=len(recipe.batch),
            control_size=len(recipe.control),
        )

    def _parent(self, recipe: RewardRecipe):
        """The recipe's parent written once per scorer from its tree (None: let
        :func:`reward_for_record` find it in the workspace)."""
        tree = recipe.parent_tree
        if tree is None or tree.hash != recipe.parent_hash:
            return None
        with self._lock:
            if tree.hash not in self._parents:
                self._parents[tree.hash] = tree.materialize(self._scratch / tree.hash[:16])
            return self._parents[tree.hash]

    # --- lifetime ----------------------------------------------------------------------
    def _done(self) -> None:
        with self._lock:
            self._active -= 1
            self._idle.notify_all()
            if self._closed and self._active == 0:
                self._release()

    def _release(self) -> None:
        if self._owned_store is not None:
            self._owned_store.close()
            self._owned_store = None
        shutil.rmtree(self._scratch, ignore_errors=True)

    def close(self, wait_s: float = 0.0) -> None:
        """Stop taking work; release the store and the temporary directory now, or when the
        last cancelled scoring stops (waiting up to ``wait_s`` for it)."""
        with self._lock:
            self._closed = True
            self._idle.wait_for(lambda: self._active == 0, timeout=wait_s)
            if self._active == 0:
                self._release()

    def __enter__(self) -> PatchScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def score_patch(
    record: Any,
    completion: Any,
    *,
    workspace: Any = None,
    suite: Any = None,
    store: Any = None,
    policy: Any = None,
    sandbox: str | None = None,
    workers: int | None = None,
    timeout_s: float | None = None,
    timeout_reward: float | None = None,
    cache: ScoreCache | None = DEFAULT_CACHE,
) -> float:
    """The realised reward of ``completion`` (a string or TRL's message list) for a GRPO
    record (its model, dict or JSON line, or its ``reward`` recipe); see :class:`PatchScorer`
    for the arguments."""
    if cache is not None:  # a hit needs no store, suite or workspace opened
        hit = cache.get(ScoreCache.key(load_recipe(record), completion_text(completion)))
        if hit is not None:
            return hit.reward
    with PatchScorer(
        workspace=workspace,
        suite=suite,
        store=store,
        policy=policy,
        sandbox=sandbox,
        workers=workers,
        timeout_s=timeout_s,
        timeout_reward=timeout_reward,
        cache=cache,
    ) as scorer:
        return scorer.score(record, completion)


def score_patches(
    records: Sequence[Any],
    completions: Sequence[Any],
    *,
    max_workers: int = 4,
    timeout_s: float | None = None,
    cache: ScoreCache | None = DEFAULT_CACHE,
    **inputs: Any,
) -> list[float]:
    """:func:`score_patch` over a batch, distinct completions in parallel on
    ``max_workers`` threads; ``inputs`` are :class:`PatchScorer`'s."""
    with PatchScorer(timeout_s=timeout_s, cache=cache, **inputs) as scorer:
        return scorer.score_many(records, completions, max_workers=max_workers)


class TRLReward:
    """A reward function for TRL's ``GRPOTrainer`` (``reward_funcs=[...]``) over a
    :class:`PatchScorer`.

    TRL calls it as ``reward_func(prompts=..., completions=..., completion_ids=...,
    **columns)``: every dataset column but ``prompt`` arrives as a list, one item per
    completion, so the GRPO record's recipe is ``reward``; ``completions`` are strings or
    ``[{"role": "assistant", "content": ...}]``. It returns one float per completion and,
    when TRL passes ``log_extra``, logs each verdict in the completions table. ``__name__``
    names it in TRL's logs."""

    def __init__(self, scorer: PatchScorer, *, max_workers: int, name: str) -> None:
        self.scorer = scorer
        self.max_workers = max_workers
        self.__name__ = name

    def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        completion_ids: Any = None,
        *,
        reward: Sequence[Any] | None = None,
        log_extra: Callable[[str, list], None] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        **columns: Any,
    ) -> list[float]:
        if completions is None:
            raise TypeError(f"{self.__name__}: no completions given")
        if reward is None:
            raise HarnessctlError(
                f"{self.__name__}: the dataset has no 'reward' column (train on the GRPO "
                "records of harnessctl export-edits)"
            )
        scores = self.scorer.assess_many(list(reward), list(completions), self.max_workers)
        if callable(log_extra):
            log_extra("harness_verdict", [f"{s.status}: {s.reason}" for s in scores])
        if callable(log_metric) and scores:
            valid = sum(1 for s in scores if s.status == "evaluated") / len(scores)
            log_metric(f"{self.__name__}/valid_fraction", valid)
        return [s.reward for s in scores]

    def close(self) -> None:
        self.scorer.close()


class ValidityReward(TRLReward):
    """A shaping reward over the same scorer (and cache) as a :class:`TRLReward`: 1.0 for a
    completion whose patch passed validation and was re-run, 0.0 otherwise. TRL logs it
    apart from the realised reward (``rewards/patch_validity/mean``); its weight is the
    trainer's ``reward_weights``. Scoring twice costs nothing: the second is a cache hit."""

    def __call__(self, prompts=None, completions=None, completion_ids=None, *, reward=None,
                 log_extra=None, log_metric=None, **columns: Any) -> list[float]:  # fmt: skip
        if completions is None or reward is None:
            raise TypeError(f"{self.__name__}: needs completions and the 'reward' column")
        scores = self.scorer.assess_many(list(reward), list(completions), self.max_workers)
        return [1.0 if s.status == "evaluated" else 0.0 for s in scores]


def make_trl_reward(
    *,
    max_workers: int = 4,
    name: str = "harness_engineer_reward",
    **inputs: Any,
) -> TRLReward:
    """A TRL ``GRPOTrainer`` reward function scoring completions with :class:`PatchScorer`
    (``inputs``: ``workspace`` or ``suite``, and ``store``, ``policy``, ``sandbox``,
    ``workers``, ``timeout_s``, ``timeout_reward``, ``cache``); ``max_workers`` completions
    of a batch are scored at a time."""
    return TRLReward(PatchScorer(**inputs), max_workers=max_workers, name=name)
