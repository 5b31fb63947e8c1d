"""The `words` template and its word tokenizer, the truncation rule, and the batched token windows.

Checked against slow references: windows gathered through lookup tables equal the template + tokenizer path
(`encode_window`) token for token, truncation included; the batched truncation rule equals a plain loop.
"""
import warnings

import numpy as np
import pytest
import torch

from ad.errors import UserError
from ad.formats.language import get_template
from ad.formats.rl import load_window_source
from ad.history import HistoryReader
from models.lm.context import encode_transition, encode_window, keep_newest, keep_newest_batch
from models.lm.vocab import dataset_rewards, template_tokenizer, word_tokenizer
from models.lm.windows import TransitionWindows, WordTable

WORDS = get_template("words")


@pytest.fixture
def tokenizer():
    return template_tokenizer(WORDS, 81, 5, [0.0, 1.0])


def test_a_transition_is_three_words_and_four_at_an_episode_start(tokenizer):
    middle = encode_transition(WORDS, tokenizer, {"state": 40, "action": 2, "reward": 1.0, "step": 3})
    start = encode_transition(WORDS, tokenizer, {"state": 7, "action": 4, "reward": 0.0, "step": 0})
    assert (len(middle.prompt), len(middle.action), len(middle.after)) == (1, 1, 1)
    assert len(start) == 4
    assert tokenizer.unk_token_id not in np.concatenate([middle.ids, start.ids])
    assert tokenizer.convert_ids_to_tokens(start.ids.tolist()) == ["|", "s7", "a4", "r0"]


def test_words_render_parse_round_trip():
    rows = {"state": [3, 12, 80], "action": [0, 4, 2], "reward": [0.0, 1.0, 0.5], "step": [0, 1, 2]}
    text = WORDS.render(rows)
    assert text == "| s3 a0 r0\ns12 a4 r1\ns80 a2 r0.5\n"
    assert WORDS.parse(text) == [{"state": s, "action": a, "reward": r}
                                 for s, a, r in zip(rows["state"], rows["action"], rows["reward"])]
    assert WORDS.parse_action(" a3 r0") == 3
    with pytest.raises(ValueError):
        WORDS.parse_action("s3")


def test_grid_template_writes_row_and_column_words():
    grid = get_template("grid9")
    tokenizer = template_tokenizer(grid, 81, 5, [0.0, 1.0])
    rows = {"state": [40, 80], "action": [2, 0], "reward": [0.0, 1.0], "step": [0, 1]}
    text = grid.render(rows)
    assert text == "| x4 y4 a2 r0\nx8 y8 a0 r1\n"
    assert grid.parse(text) == [{"state": 40, "action": 2, "reward": 0.0}, {"state": 80, "action": 0, "reward": 1.0}]
    start = encode_transition(grid, tokenizer, {"state": 7, "action": 4, "reward": 0.0, "step": 0})
    assert tokenizer.convert_ids_to_tokens(start.ids.tolist()) == ["|", "x0", "y7", "a4", "r0"]
    with pytest.raises(UserError, match="3x3 grid"):
        get_template("grid3").vocabulary(81, 5, [0.0])


def test_word_tokenizer_saves_as_a_standard_tokenizer(tmp_path, tokenizer):
    from transformers import AutoTokenizer

    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "| s3 a0 r0\ns12 a4 r1\n"
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert loaded.pad_token_id == tokenizer.pad_token_id == 0
    assert loaded.decode(loaded(text)["input_ids"]) == "| s3 a0 r0 s12 a4 r1"


def test_word_tokenizer_rejects_words_with_spaces():
    with pytest.raises(ValueError):
        word_tokenizer(["s1", "a b"])


def test_too_many_reward_values_is_a_user_error():
    with pytest.raises(UserError, match="distinct rewards"):
        dataset_rewards([np.linspace(0, 1, 100)])


def test_batched_truncation_equals_a_loop():
    rng = np.random.default_rng(0)
    for _ in range(200):
        lengths = rng.integers(1, 6, size=(4, 12))
        budget = int(rng.integers(1, 60))
        expected = []
        for row in lengths:  # the plain rule: drop oldest whole transitions until the rest fits
            start = 0
            while start < len(row) and row[start:].sum() > budget:
                start += 1
            expected.append(start)
        assert keep_newest_batch(lengths, budget).tolist() == expected
        assert [keep_newest(row.tolist(), budget) for row in lengths] == expected
    assert keep_newest([], 5) == 0


@pytest.mark.parametrize("template", ["words", "grid9"])
@pytest.mark.parametrize("max_tokens,subsample", [(400, 1), (37, 1), (400, 3), (16, 2)])
def test_table_windows_equal_template_windows(synthetic_dataset, template, max_tokens, subsample):
    reader = HistoryReader(synthetic_dataset)
    source = load_window_source(reader, reader.tasks(), window=30, stride=7, every=subsample)
    rewards = np.unique(source.columns["rewards"])
    template = get_template(template)
    tokenizer = template_tokenizer(template, 81, 5, rewards)
    fast = TransitionWindows(source, template, tokenizer, max_tokens, pad_id=tokenizer.pad_token_id, num_states=81,
                             num_actions=5)
    slow = TransitionWindows(source, template, tokenizer, max_tokens, pad_id=tokenizer.pad_token_id)
    assert fast.table is not None and slow.table is None
    indices = np.random.default_rng(1).integers(0, len(source), 16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fast.__getitems__(indices)
        want = slow.__getitems__(indices)
    assert len(caught) == (2 if max_tokens < 120 else 0)  # each path warns once that windows lose transitions
    for key in ("input_ids", "labels", "attention_mask"):
        assert torch.equal(got[key], want[key]), key
    for i, index in enumerate(indices):  # and each equals encode_window of that window, unpadded
        item = encode_window(template, tokenizer, fast.rows(int(index)), max_tokens)
        n = len(item["input_ids"])
        assert got["attention_mask"][i].sum() == n
        assert got["input_ids"][i, :n].tolist() == item["input_ids"].tolist()
        assert got["labels"][i, :n].tolist() == item["labels"].tolist()
        assert n <= max_tokens


def test_table_is_none_for_a_multi_token_template(tokenizer):
    from benchmarks.helpers.tiny_lm import char_tokenizer

    assert WordTable.build(get_template("compact"), char_tokenizer(), 81, 5, [0.0, 1.0]) is None
