"""``--executor ray``: one Ray task per rollout; the driver alone writes the store.

Each task runs :func:`harnessctl.executors.node.run_rollout` on whichever node Ray picks
(one CPU each), so the sandbox and its gateway (model calls, budgets, ledger) live on that
node, and the finished :class:`~harnessctl.run.session.RolloutRecord` comes back to the driver.
At most ``workers`` tasks are in flight. Ray's retries are off (``max_retries=0``): a task
lost with its worker or node, or a rollout that ended in ``infra_error``, is recorded as an
attempt and resubmitted by harnessctl, up to ``retries`` times, exactly like the local
executor; results already returned are written at once and are never lost or redone.

Without ``--ray-address`` (nor ``RAY_ADDRESS``) the driver starts a cluster of its own: on
loopback only and with Ray's token authentication (``LOCAL_CLUSTER_ENV``), so that neither
another machine nor another user of this one can submit code to it (Ray listens on every
interface, unauthenticated, by default). A cluster beyond one machine is the user's own
(``ray start --head``, with ``RAY_AUTH_MODE=token`` on every node), joined by address.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from typing import Any

from ..errors import ConfigError, HarnessctlError, InfraError
from ..outcomes import Outcome
from .executor import Pending, Progress, session_options
from .node import HarnessBundle, NodeJob, run_rollout
from .record import Recorder
from .session import check_run_config


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "--executor ray", "Ray is not installed: pip install 'harnessctl[ray]'"
        ) from None
    return ray


LOCAL_CLUSTER_ENV = {
    # Ray's switch for a one-machine cluster (its default on macOS and Windows): the node's
    # address is loopback, so the GCS, raylet, workers and agents listen on 127.0.0.1 only
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    # token authentication (Ray >= 2.52): a process without the token the cluster writes to
    # ~/.ray/auth_token (another user of the machine) cannot submit tasks to it
    "RAY_AUTH_MODE": "token",
}
"""What a local cluster harnessctl starts runs with, unless the environment says otherwise
(another machine's driver would join a cluster ``ray start --head`` made, not this one)."""
_LOOPBACK = ("127.", "::1", "::ffff:127.")


def connect(address: str | None) -> Any:
    """Join the cluster at ``address`` (or ``RAY_ADDRESS``), or start a local one, on
    loopback with token authentication (:data:`LOCAL_CLUSTER_ENV`); reused."""
    local = address == "local" or (not address and not os.environ.get("RAY_ADDRESS"))
    imported = sys.modules.get("ray") is not None  # None: an import that is blocked
    if local and not (imported and sys.modules["ray"].is_initialized()):
        for name, value in LOCAL_CLUSTER_ENV.items():  # before Ray is imported: read then
            os.environ.setdefault(name, value)
    ray = import_ray()
    if address and not local:
        _check_reachable(address)
    if not ray.is_initialized():
        if local and imported:
            _reread_environment()
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = "--ray-address"
            raise ConfigError(where, f"cannot join Ray cluster {address!r}: {exc}") from None
        if local:
            _check_loopback(ray)
    return ray


def _reread_environment() -> None:
    """Ray imported before :data:`LOCAL_CLUSTER_ENV` was set (by the caller's own code) read
    its cluster switch and its configuration then: read again, as Ray itself does when it
    turns token authentication on (else the GCS, a fresh process, would want a token the
    driver never wrote)."""
    from ray import _raylet
    from ray._private import ray_constants

    switch = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "1").lower()
    ray_constants.ENABLE_RAY_CLUSTER = switch in ("1", "true")
    _raylet.Config.initialize("")  # type: ignore[attr-defined]  # compiled, no stub for it
    # the token too: a token Ray found earlier (another HOME, another cluster) is cached, and
    # ray.init would then write none where the GCS looks (~/.ray/auth_token): it dies at start
    loader = getattr(_raylet, "AuthenticationTokenLoader", None)
    if loader is not None:
        loader.instance().reset_cache()


def _check_loopback(ray: Any) -> None:
    """A local cluster asked to be on loopback that is not is stopped, not used."""
    if os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "").lower() not in ("0", "false"):
        return  # the environment chose a reachable local cluster
    node = ray.util.get_node_ip_address()
    if not node.startswith(_LOOPBACK):
        ray.shutdown()
        raise ConfigError(
            "--executor ray",
            f"Ray's local cluster would listen on {node}, not on loopback: start one with "
            "`ray start --head` and pass its address with --ray-address",
        )


def _check_reachable(address: str) -> None:
    """Fail at once on a HOST:PORT nobody answers at: ``ray.init`` would wait for ever."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", "local": Ray resolves and reports these itself
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ConfigError("--ray-address", f"no Ray cluster answers at {address}: {exc}") from None


class RayRunner(Recorder):
    """Runs the pending rollouts as Ray tasks and stores each result as it returns."""

    def run_all(self, pending: list[Pending], progress: Progress | None, done: int, total: int):
        request = self.request
        ray = connect(request.ray_address)
        task = ray.remote(num_cpus=1, max_retries=0, retry_exceptions=False)(run_rollout)
        bundle = ray.put(HarnessBundle.of(request.harness))
        options = session_options(request)
        env_kind, env_options = request.suite.config.env, request.suite.config.env_options
        attempts: dict[str, int] = {}
        queue = list(pending)
        inflight: dict[Any, Pending] = {}
        workers = max(1, request.workers)
        try:
            while queue or inflight:
                while queue and len(inflight) < workers:
                    job = queue.pop(0)
                    attempts[job.cache_key] = attempts.get(job.cache_key, 0) + 1
                    node_job = NodeJob(
                        env_kind,
                        env_options,
                        options,
                        job.task,
                        job.seed,
                        request.policy,
                        self.runtime,
                    )
                    inflight[task.remote(node_job, bundle)] = job
                ready, _ = ray.wait(list(inflight), num_returns=1)
                for ref in ready:
                    job = inflight.pop(ref)
                    attempt = attempts[job.cache_key]
                    row, error, ledger = self._collect(ray, ref, job, attempt)
                    if error is not None:
                        self.record_attempt(job, Outcome.INFRA_ERROR.value, error, ledger)
                        check_run_config(ledger, request.policy)
                        if attempt <= request.retries:
                            queue.insert(0, job)
                            continue
                        row = None
                    done += 1
                    if progress:
                        progress("rollout", done, total)
                    yield job.cache_key, row
        finally:
            for ref in inflight:  # interrupted: nothing left running for a gone driver
                with contextlib.suppress(Exception):  # the original error matters more
                    ray.cancel(ref, force=True)

    def _collect(self, ray, ref, job: Pending, attempt: int) -> tuple[Any, str | None, Any]:
        """Store the task's rollout and return its row, or why it failed on infrastructure
        (with the failed rollout's ledger when it came back: its model calls were made)."""
        try:
            record = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, BaseException) else None
            if isinstance(cause, HarnessctlError) and not isinstance(cause, InfraError):
                raise cause from None  # a configuration problem: retrying cannot help
            failed = cause or exc
            return None, f"ray task failed: {type(failed).__name__}: {_first_line(failed)}", None
        except ray.exceptions.RayError as exc:  # worker or node died, object lost
            return None, f"ray: {type(exc).__name__}: {_first_line(exc)}", None
        if record.outcome == Outcome.INFRA_ERROR:
            return None, record.error or "infrastructure failure", record.ledger
        return self.record(job, record, attempt), None, None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else "no detail"
