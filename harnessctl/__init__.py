"""harnessctl: harness evolution for LLM agents.

Kept import-light on purpose: ``harnessctl --help`` and pure-data commands must start fast,
so heavy libraries (litellm, docker, git, sqlmodel) are imported inside the modules that use them.
"""

__version__ = "0.1.0.dev0"
