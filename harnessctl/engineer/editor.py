"""The trained engineer as an editor: ``harnessctl evolve --editor engineer:DIR``.

It sends itself exactly what the LLM editor sends a model (the editor's system prompt, the
direction brief, the files in scope, the failure digests, and after a rejection the
rejection as a user turn) and answers in SEARCH/REPLACE blocks, so its patches go through the
same validation, gate and edit records as any editor's. The model is loaded with
transformers on first use (its adapter on its base) and generates on a GPU when there is
one. ``DIR`` may also be a base model (a catalogue name, a model directory): the untrained
model through the same prompt and decoding, the baseline a trained engineer is compared to.

Parameters (``--editor-param``): ``max_new_tokens`` (1024), ``temperature`` (0: greedy),
``top_p`` (1.0), ``seed`` (0; a sampled proposal is seeded by it and the prompt, so a rerun
proposes the same), ``max_digests`` (the engineer's training prompt format by default).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..evolve.editors import SYSTEM, EditContext, Proposal, render_parts, retry_turn
from ..store.calls import HostCall
from .base import is_engineer, resolve_base
from .records import EngineerManifest

PARAMS = ("model", "max_new_tokens", "temperature", "top_p", "seed", "max_digests", "dtype")


def engineer_editor(*, workspace: Path | None = None, family: str, params: dict | None = None):
    """The ``engineer`` editor (registry factory): ``params["model"]`` is the engineer
    directory (``--editor engineer:DIR``, or ``--editor-param model=DIR``)."""
    params = dict(params or {})
    model = params.pop("model", None)
    if not model:
        raise ConfigError("--editor", "engineer needs its directory: --editor engineer:DIR")
    path = Path(str(model)).expanduser()
    if workspace is not None and not path.is_absolute() and not path.exists():
        path = Path(workspace) / path
    return EngineerEditor(str(path) if path.exists() else str(model), params)


class EngineerEditor:
    """A trained engineer (or a base model) proposing patches with transformers."""

    def __init__(self, model: str, params: dict | None = None) -> None:
        params = dict(params or {})
        unknown = sorted(set(params) - set(PARAMS))
        if unknown:
            raise ConfigError("--editor-param", f"unknown engineer parameter(s) {unknown}")
        self.source = model
        self.manifest: EngineerManifest | None = None
        if is_engineer(model):
            self.manifest = EngineerManifest.load(Path(model))
            who = f"{self.manifest.id}"
            default_digests = self.manifest.data.max_digests
        else:
            base = resolve_base(model)  # refuses what is no model, before evolve starts
            who = f"{base.name}@{(base.sha256 or '')[:12]}".rstrip("@")
            default_digests = None
        self.max_new_tokens = int(params.get("max_new_tokens", 1024))
        self.temperature = float(params.get("temperature", 0.0))
        self.top_p = float(params.get("top_p", 1.0))
        self.seed = int(params.get("seed", 0))
        digests = params.get("max_digests", default_digests)
        self.max_digests = None if digests in (None, "", "none") else int(digests)
        self.dtype = str(params.get("dtype", "auto"))
        self.name = f"engineer:{who}"
        self.params = {k: v for k, v in params.items() if k != "model"}
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        """The weights and the decoding: another engineer, or other settings, is a new run."""
        settings = [self.max_new_tokens, self.temperature, self.top_p, self.seed, self.max_digests]
        return json.dumps([self.name, settings])

    def messages(self, ctx: EditContext) -> list[dict[str, str]]:
        digests = [dg.render() for dg in ctx.digests]
        if self.max_digests is not None:
            digests = digests[: self.max_digests]
        return [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": render_parts(ctx.direction, ctx.files, digests)},
        ]

    def propose(self, ctx: EditContext, feedback: str | None) -> Proposal | None:
        if not ctx.history:
            ctx.history = self.messages(ctx)
        if feedback is not None:
            ctx.history.append(retry_turn(feedback))
        started = time.time()
        text, prompt_tokens, completion_tokens = self.generate(list(ctx.history))
        ctx.history.append({"role": "assistant", "content": text})
        prompt = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in ctx.history[:-1])
        call = HostCall(
            model=self.name,
            status="ok",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=time.time() - started,
            reply=text,
            params=dict(self.params),
            started_at=started,
        )
        return Proposal(self.name, prompt, text, prompt_tokens, completion_tokens, 0.0, [call])

    def generate(
        self, messages: list[dict[str, str]], seed: int | None = None
    ) -> tuple[str, int, int]:
        """The model's reply to ``messages``: text, prompt tokens, completion tokens
        (``seed``: another sample of a sampling editor, for several proposals)."""
        import torch

        model, tokenizer = self.load()
        ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
        inputs = torch.tensor([ids], device=model.device)
        sample = self.temperature > 0
        settings: dict[str, Any] = dict(max_new_tokens=self.max_new_tokens, do_sample=sample)
        if sample:
            settings |= dict(temperature=self.temperature, top_p=self.top_p)
            blob = json.dumps([self.seed if seed is None else seed, messages]).encode()
            torch.manual_seed(int(hashlib.sha256(blob).hexdigest()[:8], 16))
        with self._lock, torch.no_grad():
            output = model.generate(
                inputs, attention_mask=torch.ones_like(inputs), **settings
            )  # fmt: skip
        new = output[0, inputs.shape[1] :]
        return tokenizer.decode(new, skip_special_tokens=True), len(ids), int(new.shape[0])

    def load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._loaded is None:
                import torch

                from .base import load_base, load_engineer

                if self.manifest is not None:
                    model, tokenizer, _ = load_engineer(Path(self.source), self.dtype)
                    if hasattr(model, "merge_and_unload"):  # an adapter: faster merged
                        model = model.merge_and_unload()
                else:
                    model, tokenizer = load_base(resolve_base(self.source), self.dtype)
                if torch.cuda.is_available():
                    model = model.to("cuda")
                model.eval()
                self._loaded = (model, tokenizer)
            return self._loaded
