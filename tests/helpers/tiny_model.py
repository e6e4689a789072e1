"""A tiny causal LM made here, for tests that run a trainer's real code (verl's agent-loop
worker, TRL's GRPOTrainer): a byte-level BPE tokenizer trained on a few lines of text, a chat
template, and a randomly initialised two-layer Qwen2 config (weights only when asked).
Nothing is downloaded from a model hub."""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"]
CORPUS = [
    "How many games were played? Action: Operation SELECT COUNT(*) FROM `Game Schedule`",
    'Action: Answer Final Answer: ["1.0"] the table has one row',
    "You are a helpful assistant. Answer with a number between zero and nine.",
    "zero one two three four five six seven eight nine ten 0 1 2 3 4 5 6 7 8 9",
]


def make_tokenizer_dir(path: Path, corpus: list[str] | None = None, vocab_size: int = 300) -> Path:
    """A Hugging Face tokenizer directory (``AutoTokenizer.from_pretrained(path)`` loads it),
    trained on ``corpus`` (default: a few lines)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS * 4 + list(corpus or []), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|end|>", bos_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(path))
    return path


def make_model_dir(
    path: Path,
    *,
    weights: bool = False,
    seed: int = 0,
    corpus: list[str] | None = None,
    vocab_size: int = 300,
    max_positions: int = 512,
) -> Path:
    """A tokenizer plus a tiny Qwen2 config (and random weights when ``weights``)."""
    from transformers import AutoTokenizer, Qwen2Config

    make_tokenizer_dir(path, corpus, vocab_size)
    tok = AutoTokenizer.from_pretrained(str(path))
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
        architectures=["Qwen2ForCausalLM"],
    )
    if weights:
        import torch
        from transformers import AutoModelForCausalLM

        torch.manual_seed(seed)
        AutoModelForCausalLM.from_config(config).save_pretrained(str(path))
    else:
        config.save_pretrained(str(path))
    json.loads((path / "config.json").read_text())  # written and readable
    return path
