"""Trains the tiny model's byte-level BPE vocabulary.

GLM-5's pre-tokenizer (the GLM-4 split regex, then byte-level mapping) and its
special tokens, with a vocabulary learned from the generator's text. Digits are
removed from the training text, so no merge joins digits: every number is
spelled one digit per token, which is what lets a small model do column
arithmetic and copy values.
"""
import re

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

import data

GLM4_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def train(vocab_size, seed=99, samples=20000):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GLM4_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    g = data.Gen(seed)
    special = re.compile("|".join(re.escape(s) for s in data.SPECIAL_TOKENS))

    def corpus():
        for _ in range(samples):
            t = data.text_of(g.sample())
            yield re.sub(r"[0-9]", "", special.sub(" ", t))
    tr = trainers.BpeTrainer(vocab_size=vocab_size - len(data.SPECIAL_TOKENS), min_frequency=4,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer=tr)
    tok.add_special_tokens(data.SPECIAL_TOKENS)
    return tok
