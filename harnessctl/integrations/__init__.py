"""Trainer integrations: a pool's rescue rule (``harnessctl.pool``) where each RL framework
lets a group of rollouts be replaced while its inference servers are still awake.

- ``harnessctl.integrations.verl``: an agent-loop manager and a registered agent loop for
  verl 0.9 (imports verl: its classes subclass verl's).
- ``harnessctl.integrations.skyrl``: ``RescuingGenerator``, a SkyRL generator wrapping the
  trainer's own, installed through ``BasePPOExp.get_generator`` (imports nothing of SkyRL;
  tested against skyrl 0.4.0 in an environment of its own).
- ``harnessctl.integrations.art``: ``rescue_after_each``, an ``after_each`` hook for ART's
  ``gather_trajectory_groups`` (imports nothing of ART).
- ``harnessctl.integrations.agentlightning``: ``HarnessAgent``, a pool harness as an Agent
  Lightning ``LitAgent``, and ``RescueDaemon``, its VERL daemon with the rescue (imports
  Agent Lightning; the daemon, verl 0.5.0).
- ``harnessctl.integrations.trl``: ``HarnessRollouts``, a ``rollout_func`` for TRL's
  ``GRPOTrainer`` that plays harnessctl rollouts of the model being trained (served in
  process) and rescues all-fail groups (imports torch, not TRL).

Each module's docstring names the framework version and files it follows. Importing this
package imports none of them.
"""
