"""llama.cpp's server in this process (:func:`serve`) or as a child process for a ``with``
block (:class:`LocalModel`)."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from ..constants import DEFAULT_LOCAL_MODEL_TIMEOUT_S
from ..errors import ConfigError, InfraError
from .catalogue import CATALOGUE, DEFAULT
from .cores import pick_threads
from .fetch import prepare
from .speed import DEFAULT_MIN_SPEED, Speed, measure

_log = logging.getLogger(__name__)

#: The litellm provider for an OpenAI-compatible server that needs no API key.
PROVIDER = "hosted_vllm"
READY = "harnessctl-local-model-ready"
#: A prompt's cached chunks of at least this many tokens are reused even after a change
#: before them (KV shifting, where the model's cache can shift). A multi-turn rollout's
#: prompt only grows: its prefix is reused without this (``cache_prompt``, on by default);
#: this covers a harness that rewrites its context.
CACHE_REUSE = 256


def serve(
    model: Path,
    *,
    alias: str | None = None,
    port: int = 0,
    threads: int | None = None,
    ctx: int = 8192,
    parallel: int = 1,
    max_reply: int = 512,
    chat_template: str = "",
    min_speed: float = DEFAULT_MIN_SPEED,
) -> None:
    """Run the server in this process until SIGINT or SIGTERM; print the ready line (JSON:
    ``model``, ``api_base``, ``threads``, ``tokens_per_s``) once it listens and has measured
    its speed. ``alias`` (default: the file's stem) is the one model name the server lists
    and answers to. ``threads`` None: the cores free now (:func:`cores.pick_threads`).
    ``parallel`` slots serve that many requests at once, each with ``ctx`` tokens of context
    (llama.cpp splits its context evenly among the slots). ``max_reply`` caps every
    completion's tokens on the server (a small model may never emit its end token:
    unbounded, one reply ran for minutes and held a slot). Slower than ``min_speed``
    tokens/s at start, it warns on stderr (0: never)."""
    try:
        import xllamacpp
    except ImportError:
        raise ConfigError(
            "local model", "xllamacpp is not installed: pip install -e '.[local-model]'"
        ) from None
    alias = alias or model.stem
    chosen = f"{threads} (--threads)" if threads is not None else ""
    if threads is None:
        cores = pick_threads()
        threads, chosen = cores.threads, cores.describe()
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = {alias}  # a set of names: a str would be taken as its letters
    if chat_template:
        params.chat_template = chat_template
    params.n_parallel = parallel
    params.n_ctx = ctx * parallel
    params.n_cache_reuse = CACHE_REUSE
    params.n_predict = max_reply
    params.port = port
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.verbosity = 0
    server = xllamacpp.Server(params)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    address = str(server.listening_address).rstrip("/")
    speed = measure(address)  # before the ready line: no request competes with the probe
    say = sys.stderr
    print(f"threads: {chosen}", file=say, flush=True)
    print(f"speed: {speed.describe()}", file=say, flush=True)
    if min_speed > 0 and speed.below(min_speed):
        print(f"warning: {slow_warning(speed, min_speed, max_reply)}", file=say, flush=True)
    ready = {"model": f"{PROVIDER}/{alias}", "api_base": f"{address}/v1", "threads": threads,
             "tokens_per_s": speed.tokens_per_s}  # fmt: skip
    print(f"{READY} {json.dumps(ready)}", flush=True)
    print(
        f"use it: --policy {ready['model']} --param api_base={ready['api_base']}",
        file=sys.stderr,
        flush=True,
    )
    stop.wait()
    del server  # the server's destructor stops its threads


def slow_warning(speed: Speed, floor: float, max_reply: int) -> str:
    """Why a speed below ``floor`` matters and what to do about it."""
    rate = speed.tokens_per_s or max(speed.tokens, 1) / speed.seconds
    reply = max_reply / rate
    takes = f"{reply:.0f} s" if reply < 120 else f"{reply / 60:.0f} min"
    return (
        f"{speed.describe()} is below the floor of {floor:g} tokens/s (--min-speed): a "
        f"{max_reply}-token reply would take {takes}, and harnessctl gives up a call to a "
        f"model server on this machine after {DEFAULT_LOCAL_MODEL_TIMEOUT_S:g} s unless told "
        "(--model-timeout). Free some cores, use fewer threads or slots, or a smaller model."
    )


class LocalModel:
    """The local model server as a child process for a ``with`` block: ``model`` (the litellm
    model string, ``hosted_vllm/<alias>``) and ``api_base`` are set once it answers
    ``/health``. The model is a catalogue name or a GGUF file, fetched and verified before
    the child starts. ``port`` 0 takes any free port; a fixed one lets a restarted server keep
    the policy's ``api_base``. ``threads`` None: the child picks the cores free at its start.
    Once started, ``threads`` is what it chose and ``tokens_per_s`` what it measured (None:
    too slow to tell); ``slow`` says whether that is below ``min_speed`` (logged as a
    warning)."""

    def __init__(
        self,
        *,
        model: str | Path = DEFAULT,
        threads: int | None = None,
        ctx: int = 8192,
        parallel: int = 1,
        timeout_s: float = 120,
        model_dir: Path | None = None,
        port: int = 0,
        min_speed: float = DEFAULT_MIN_SPEED,
    ) -> None:
        self.spec = model
        self.threads, self.ctx, self.parallel, self.timeout_s = threads, ctx, parallel, timeout_s
        self.port = port
        self.model_dir = model_dir
        self.min_speed = min_speed
        self.model = ""
        self.api_base = ""
        self.tokens_per_s: float | None = None
        self.slow = False
        self._proc: subprocess.Popen[str] | None = None

    @property
    def params(self) -> dict[str, str]:
        """The policy parameters that reach the server (``--param api_base=...``)."""
        return {"api_base": self.api_base}

    def start(self) -> LocalModel:
        served = prepare(self.spec, self.model_dir)  # fetch errors raise here, not in the child
        # the child finds a catalogue model verified by its stamp, with its chat template
        spec = served.alias if str(self.spec) in CATALOGUE else str(served.path.resolve())
        cmd = [sys.executable, "-m", "harnessctl.localmodel", "--model", spec]
        if self.model_dir is not None:
            cmd += ["--model-dir", str(self.model_dir)]
        if self.threads is not None:
            cmd += ["--threads", str(self.threads)]
        cmd += ["--ctx", str(self.ctx), "--port", str(self.port)]
        cmd += ["--parallel", str(self.parallel), "--min-speed", str(self.min_speed)]
        self._proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert self._proc.stdout is not None
        deadline = time.monotonic() + self.timeout_s
        for line in self._proc.stdout:
            if line.startswith(READY):
                ready = json.loads(line[len(READY) :])
                self.model, self.api_base = ready["model"], ready["api_base"]
                self.threads, self.tokens_per_s = ready["threads"], ready["tokens_per_s"]
                break
        if not self.api_base:
            self.close()
            raise InfraError("the local model server exited before it listened")
        rate = self.tokens_per_s
        self.slow = self.min_speed > 0 and (rate is None or rate < self.min_speed)
        if self.slow:
            shown = "under 1" if rate is None else f"{rate:.2f}"
            _log.warning("the local model %s generates %s tokens/s with %s thread(s), below "
                         "the floor of %g (min_speed)", self.model, shown, self.threads,
                         self.min_speed)  # fmt: skip
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.api_base[: -len("/v1")] + "/health", timeout=5):
                    return self
            except OSError:
                time.sleep(0.2)
        self.close()
        raise InfraError(f"the local model server did not answer /health in {self.timeout_s}s")

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> LocalModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
