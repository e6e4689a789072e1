"""The ``local`` executor: rollouts on worker threads of this process, one warm
:class:`~harnessctl.run.session.RolloutSession` (gateway + sandbox) for the run."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from ..outcomes import Outcome
from .executor import Pending, Progress, session_options
from .record import Recorder
from .session import RolloutSession, check_run_config


class LocalRunner(Recorder):
    """Runs the pending rollouts on worker threads of this process and stores each."""

    def run_all(self, pending: list[Pending], progress: Progress | None, done: int, total: int):
        session = RolloutSession(self.request.suite.environment, **session_options(self.request))
        with session:
            self.session = session
            workers = max(1, self.request.workers)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout") as pool:
                queue = list(pending)
                futures: dict[Future, Pending] = {}
                while queue or futures:
                    while queue and len(futures) < workers:
                        job = queue.pop(0)
                        futures[pool.submit(self.run_with_retries, job)] = job
                    finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        job = futures.pop(fut)
                        done += 1
                        if progress:
                            progress("rollout", done, total)
                        yield job.cache_key, fut.result()

    def run_with_retries(self, job: Pending):
        for attempt in range(1, self.request.retries + 2):
            record = self.session.run(self.request.harness, job.task, job.seed, self.request.policy)
            if record.outcome != Outcome.INFRA_ERROR:
                return self.record(job, record, attempt)
            self.record_attempt(job, record.outcome.value, record.error or "", record.ledger)
            check_run_config(record.ledger, self.request.policy)
        return None
