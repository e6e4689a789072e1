"""Helpers the tests share, in one place: a test module imports from here (and from
``tests.conftest``'s fixtures), never from another test module.

- ``cli``: the CLI in-process (``invoke``, ``cli``, ``cli_json``, ``eval_json``...)
- ``workspaces``: isolated workspaces for module- and session-scoped fixtures
- ``worlds``: the session worlds (each environment's README evolve, run once per session)
- ``evals``, ``ray``, ``gateway``, ``docker``: requests, stores and fixtures of those tests
- ``agentbench_os``: AgentBench v0.2's OS judge, written from its behaviour (the verdict
  agreement's reference); ``miniwob_world``: MiniWoB++'s session world; ``engineer``: the
  harness-engineer tests' corpus
- ``ci``, ``openai_stub``, ``os_env``, ``pools``, ``profiles``, ``stores``, ``evolve``,
  ``tiny_model``: as their docstrings say
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root."""
EXAMPLE_SUITE = ROOT / "examples" / "dbbench"
BASE_HARNESS = ROOT / "harnesses" / "dbbench-base"
