"""A word-level tokenizer built from a template's own vocabulary (``words`` template: one token per field).

Saved and loaded like any Hugging Face tokenizer (``save_pretrained`` / ``AutoTokenizer.from_pretrained``), so a
model trained from scratch on it is a standard ``transformers`` model folder.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ad.errors import UserError

SPECIALS = ("<pad>", "<unk>", "<eos>")


def word_tokenizer(words: Sequence[str], character_level: bool = False) -> Any:
    """A ``PreTrainedTokenizerFast`` with one token per word (split on whitespace) plus ``<pad>, <unk>, <eos>``;
    ``character_level``: one token per character of ``words`` (whitespace only separates)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for word in (*SPECIALS, *words):
        if not word or any(ch.isspace() for ch in word):
            raise ValueError(f"vocabulary words must be non-empty and without spaces, got {word!r}")
        vocab.setdefault(word, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if character_level:
        if any(len(word) != 1 for word in words):
            raise ValueError("a character-level vocabulary holds single characters")
        core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                      pre_tokenizers.Split(Regex("."), behavior="isolated")])
    core.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")


def dataset_rewards(reward_columns: Sequence[np.ndarray], limit: int = 64) -> list[float]:
    """The distinct reward values of a dataset's columns (a word vocabulary needs few of them)."""
    values = np.unique(np.concatenate([np.unique(np.asarray(c, dtype=np.float64)) for c in reward_columns]))
    if len(values) > limit:
        raise UserError(f"the dataset has {len(values)} distinct rewards (more than {limit}): the 'words' template "
                        "writes one word per reward value; use --template compact with a pretrained tokenizer")
    return values.tolist()


def box_tokenizer(template: Any, state_dim: int, num_actions: int) -> Any:
    """The tokenizer of a Box-state template (``bins<L>``, ``pairs<L>``: one token a word; ``vector``: one a
    character) for states of ``state_dim`` numbers and ``num_actions`` discrete actions."""
    if not hasattr(template, "box_vocabulary"):
        raise UserError(f"template {template.name!r} has no vocabulary for Box states; a model trained from scratch "
                        "on them needs --template bins<L>, pairs<L> or vector")
    return word_tokenizer(template.box_vocabulary(state_dim, num_actions), template.character_level)


def template_tokenizer(template: Any, num_states: int, num_actions: int, rewards: Sequence[float]) -> Any:
    """The word tokenizer of ``template`` (which must have a ``vocabulary``) for these spaces and rewards."""
    if not hasattr(template, "vocabulary"):
        raise UserError(f"template {template.name!r} has no word vocabulary; a model trained from scratch needs "
                        "--template words")
    return word_tokenizer(template.vocabulary(num_states, num_actions, rewards))
