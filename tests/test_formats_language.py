"""Templates: serialise -> parse round trips, tokenised action masks, the language dataset."""
from __future__ import annotations

import pytest

from ad.data import LanguageTrajectoryDataset, pad_collate
from ad.errors import UserError
from ad.formats import get_template, tokenize_segments


class CharTokenizer:
    """A tiny offline tokenizer (one id per character) with the HF call convention."""

    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [[ord(c) for c in text] for text in texts]}


def test_compact_roundtrip():
    template = get_template("compact")
    rows = {"state": [40, 41, 31], "action": [2, 1, 0], "reward": [0.0, 1.0, 0.5], "step": [0, 1, 0]}
    text = template.render(rows)
    assert text.startswith("|\ns40 a2 r0\n")
    parsed = template.parse(text)
    assert [p["state"] for p in parsed] == rows["state"]
    assert [p["action"] for p in parsed] == rows["action"]
    assert [p["reward"] for p in parsed] == rows["reward"]
    assert template.parse_action(" 3 r0") == 3
    with pytest.raises(ValueError):
        template.parse_action("x")


def test_rollout_template_is_seed_001_format():
    template = get_template("rollout")
    rows = {"state": ["Dan went down to the shops."], "action": ["He smiled as he walked - the sun was shining."],
            "reward": [0.9975]}
    text = template.render(rows)
    assert text == ("prompt: Dan went down to the shops.\ncompletion: He smiled as he walked - the sun was shining."
                    "\nreward: 0.9975\n###\n")
    assert template.parse(text) == [{"state": rows["state"][0], "action": rows["action"][0], "reward": 0.9975}]
    assert template.parse_action("A happy day.\nreward: 1") == "A happy day."


def test_unknown_template_is_a_clear_error():
    with pytest.raises(UserError, match="unknown template 'nope'"):
        get_template("nope")


def test_action_mask_covers_exactly_the_actions():
    template = get_template("compact")
    rows = {"state": [40, 41], "action": [2, 4], "reward": [0, 0], "step": [0, 1]}
    tokens = tokenize_segments(CharTokenizer(), template.segments(rows))
    action_chars = "".join(chr(i) for i, m in zip(tokens.input_ids, tokens.action_mask) if m)
    assert action_chars == "24"
    assert "".join(chr(i) for i in tokens.input_ids) == template.render(rows)


def test_language_dataset_labels_only_actions(synthetic_dataset):
    ds = LanguageTrajectoryDataset(synthetic_dataset, CharTokenizer(), window=5, max_tokens=4096)
    item = ds[0]
    labelled = item["labels"][item["labels"] != -100]
    assert len(labelled) == 5 and all(chr(int(c)).isdigit() for c in labelled)
    batch = pad_collate([ds[0], ds[1]])
    assert batch["input_ids"].shape[0] == 2
    all_tokens = LanguageTrajectoryDataset(synthetic_dataset, CharTokenizer(), window=5, loss_on="all")[0]
    assert (all_tokens["labels"] != -100).all()


def test_language_dataset_truncates_oldest_with_warning(synthetic_dataset):
    ds = LanguageTrajectoryDataset(synthetic_dataset, CharTokenizer(), window=20, max_tokens=30)
    with pytest.warns(UserWarning, match="oldest"):
        item = ds[0]
    assert len(item["input_ids"]) == 30
    full = "".join(get_template("compact").render(ds.rows(0)))
    assert "".join(chr(int(i)) for i in item["input_ids"]) == full[-30:]
