"""What the harness engineer's tests share: the edit records of DBBench's session world exported
as training data, and tiny models made here (a tokenizer trained on those records, a
randomly initialised Qwen2 of a few hundred thousand weights): nothing comes from a hub."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

NOTE_PATCH = (
    "prompts/notes.md\n<<<<<<< SEARCH\n=======\nReply in the exact action format.\n"
    ">>>>>>> REPLACE\n"
)
"""A patch valid for every base harness whose direction allows ``prompts/*`` (it creates a
prompt file no hook reads: a no-op the gate judges like any edit). Short, so a tiny model
learns to write it in a few dozen steps."""


@dataclass(frozen=True)
class EngineerData:
    ws: Path
    """A copy of the DBBench world's workspace (its store holds the edits)."""
    data: Path
    """``export-edits --test-fraction 0 --max-digests 0``: every record on train."""
    base: Path
    """A tiny random model directory (``--base DIR``)."""

    def to_json(self) -> dict:
        return {"ws": str(self.ws), "data": str(self.data), "base": str(self.base)}

    @classmethod
    def from_json(cls, data: dict) -> EngineerData:
        return cls(Path(data["ws"]), Path(data["data"]), Path(data["base"]))


def tiny_base(path: Path, corpus: list[str], *, hidden: int = 64, seed: int = 0) -> Path:
    """A tokenizer trained on ``corpus`` and a two-layer Qwen2 of width ``hidden``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    from tests.helpers.tiny_model import make_tokenizer_dir

    make_tokenizer_dir(path, corpus, vocab_size=2000)
    tok = AutoTokenizer.from_pretrained(str(path))
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=16384,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
        architectures=["Qwen2ForCausalLM"],
    )
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(config).save_pretrained(str(path))
    return path


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def with_completion(src: Path, dst: Path, patch: str) -> Path:
    """A copy of the export ``src`` whose SFT completions are all ``patch``."""
    shutil.copytree(src, dst)
    path = dst / "sft_prompt_completion" / "train.jsonl"
    rows = records(path)
    for row in rows:
        row["completion"] = [{"role": "assistant", "content": patch}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dst


def make_engineer_data(where: Path, world_root: Path) -> EngineerData:
    """The world's workspace copied to ``where/ws``, its edits exported to ``where/data``,
    a tiny model trained on their text in ``where/base``."""
    from harnessctl.evolve.dataset import export_edits
    from harnessctl.workspace import load_workspace

    ws = where / "ws"
    shutil.copytree(world_root, ws, symlinks=True)
    workspace = load_workspace(ws)
    store = workspace.open_store()
    try:
        export_edits(
            store.edits(), where / "data", test_fraction=0.0, max_digests=0, store=store,
            workspace=workspace,
        )  # fmt: skip
    finally:
        store.close()
    rows = records(where / "data" / "sft_prompt_completion" / "train.jsonl")
    corpus = [m["content"] for r in rows for m in r["prompt"] + r["completion"]]
    tiny_base(where / "base", corpus + [NOTE_PATCH] * 20)
    return EngineerData(ws, where / "data", where / "base")
