"""Runs inside a contract environment: trains a small byte-level BPE tokenizer with `tokenizers` (nothing
from the hub) and saves it where transformers' AutoTokenizer and the benchmark clients load it.

    python make_tokenizer.py DIR
"""

import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

WORDS = (
    "tensor parallel pipeline node spark model token decode prefill cache memory network fabric latency "
    "throughput request engine server client batch stream answer question the a of to in on is"
).split()


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    corpus = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(16)) for i in range(500)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=800, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "model_max_length": 32768,
            },
            f,
        )
    print(tok.get_vocab_size())


if __name__ == "__main__":
    main(sys.argv[1])
