"""A stand-in for the parts of verl 0.9.1 that harnessctl.integrations.verl uses, written
from verl's sources (volcengine/verl, PyPI wheel verl-0.9.1: verl/protocol.py and
verl/experimental/agent_loop/agent_loop.py) for tests on machines where verl (torch, ray,
transformers) does not install. Names, signatures and field semantics follow those files;
tensors are numpy arrays, Ray actors are plain objects whose ``.remote`` is a coroutine."""
