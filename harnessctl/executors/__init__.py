"""Executors: where an evaluation's rollouts run, chosen by name from ``EXECUTORS``.

``local`` (the default) runs them on threads of this process, one warm sandbox per worker.
``ray`` runs one Ray task per rollout on a Ray cluster (``pip install 'harnessctl[ray]'``):
each task runs the configured sandbox backend with its own gateway on the node it lands on,
and returns the finished rollout to the driver, which alone writes the store. Ray's own
retries are off: harnessctl classifies a lost worker or node as an infrastructure failure,
records the attempt and retries it itself, as it does for a dead sandbox. Other executors
register under the ``harnessctl.executors`` entry point group (see ``base``).
"""

from .base import EXECUTORS, Pending, Progress

__all__ = ["EXECUTORS", "Pending", "Progress"]
