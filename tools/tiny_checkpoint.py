"""Write a tiny Qwen3-MoE checkpoint with random weights, for serving a real engine on a CPU.

Random weights and a BPE tokenizer trained here with `tokenizers` (nothing from the hub), so a real
vLLM can load, warm up and answer in about a minute. Same seed, same files.

    python tools/tiny_checkpoint.py OUT [--head-dim 64] [--seed 0]

Needs torch, transformers and tokenizers only. `--head-dim 16` makes a model that loads but that
vLLM's CPU attention refuses at the first request.
"""

from __future__ import annotations

import argparse
from pathlib import Path

WORDS = (
    "tensor parallel pipeline node spark model token decode prefill cache memory network fabric latency "
    "throughput request engine server client batch stream answer question the a of to in on is"
).split()
TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)


def tokenizer(out: Path, seed: int):
    import random

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rnd = random.Random(seed)
    corpus = [" ".join(rnd.choice(WORDS) for _ in range(16)) for _ in range(500)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", model_max_length=2048
    )
    fast.chat_template = TEMPLATE
    fast.save_pretrained(out)
    return fast


def model(out: Path, seed: int, head_dim: int, vocab: int, bos: int, eos: int) -> None:
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3MoeConfig(
        vocab_size=vocab,
        hidden_size=128,
        head_dim=head_dim,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=2,
        intermediate_size=256,
        moe_intermediate_size=64,
        num_experts=4,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        max_position_embeddings=2048,
        bos_token_id=bos,
        eos_token_id=eos,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    m = Qwen3MoeForCausalLM(cfg).to(torch.bfloat16)
    m.save_pretrained(out, safe_serialization=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer(a.out, a.seed)
    # the embedding is rounded up so TP ranks split it evenly
    vocab = (len(tok) + 63) // 64 * 64
    model(a.out, a.seed, a.head_dim, vocab, tok.bos_token_id, tok.eos_token_id)
    print(a.out)


if __name__ == "__main__":
    main()
