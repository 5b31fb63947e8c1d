"""`ad train lm --model scratch` on a 3x3 DarkRoom: every weight trains, the run folder is a standard transformers
model + tokenizer, episode selection is the RL format's, held-out return is watched, and bad options are refused."""
import json

import numpy as np
import pytest
import torch

from ad.config import make_config
from ad.errors import UserError
from models.lm.config import TrainLMConfig

torch.set_num_threads(1)

TINY = {"preset": "scratch", "context": 12, "max_tokens": 48, "batch_size": 4, "max_steps": 6, "warmup_steps": 1,
        "n_layer": 1, "n_embd": 16, "n_head": 2, "n_ff": 32, "val_every": 0, "checkpoint_every": 3, "log_every": 2,
        "progress": False, "threads": 1, "subsample": 1}


@pytest.fixture(scope="module")
def darkroom3(tmp_path_factory):
    from tasks.darkroom.config import GenerateConfig
    from tasks.darkroom.generate import generate

    out = tmp_path_factory.mktemp("dr") / "d"
    return generate(make_config(GenerateConfig, {"out": str(out), "size": 3, "steps_per_goal": 400, "hidden": 16,
                                                 "progress": False, "tensorboard": False, "plots": False,
                                                 "terminate_on_goal": False}))


def test_scratch_run_trains_every_weight_and_saves_a_transformers_model(darkroom3, tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ad.history import HistoryReader
    from models.lm.scratch import build_scratch, scratch_tokenizer
    from models.lm.train import train
    from ad.formats.language import get_template

    config = make_config(TrainLMConfig, {**TINY, "data": str(darkroom3), "out": str(tmp_path / "run"),
                                         "watch_every": 3, "watch_episodes": 2})
    folder = train(config)
    info = json.loads((folder / "lm.json").read_text())
    assert info["base_model"] == "scratch" and info["template"] == "grid3" and info["steps"] == 6
    model = AutoModelForCausalLM.from_pretrained(folder / "weights")
    tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer")
    assert len(tokenizer) == model.config.vocab_size == 3 + 1 + 3 + 3 + 5 + 2  # specials, |, x0-2, y0-2, a0-4, r0 r1
    initial = build_scratch(scratch_tokenizer(HistoryReader(darkroom3), get_template("grid3")), 1, 16, 2, 32,
                            max_positions=48, seed=0)
    before, after = dict(initial.named_parameters()), dict(model.named_parameters())
    changed = [n for n in after if not torch.equal(before[n], after[n])]
    assert set(changed) == set(after)  # no frozen part: all weights trained
    out = capsys.readouterr().out
    assert "step 3: held-out return / optimal" in out and "step 6: held-out return / optimal" in out


@pytest.mark.parametrize("selection", [{"subsample": 3}, {"expert_only": True}])
def test_lm_windows_select_the_episodes_the_rl_format_selects(darkroom3, selection):
    from ad.data.datamodule import RLDataModule
    from ad.formats.language import get_template
    from ad.history import HistoryReader
    from models.lm.data import LMDataModule
    from models.lm.scratch import scratch_tokenizer

    reader = HistoryReader(darkroom3)
    lm = LMDataModule(reader, scratch_tokenizer(reader, get_template("words")), "words", window=10, stride=1,
                      max_tokens=64, **selection)
    rl = RLDataModule(darkroom3, window=10, **selection)
    lm.setup()
    rl.setup()
    assert len(lm.train_set) == len(rl.train_set)
    lm_rows = lm.train_set.rows(len(lm.train_set) - 1)
    rl_item = rl.train_set[len(rl.train_set) - 1]
    np.testing.assert_array_equal(lm_rows["state"], rl_item["states"].numpy())
    np.testing.assert_array_equal(lm_rows["action"], rl_item["actions"].numpy())


@pytest.mark.parametrize("bad", [{"n_embd": 30, "n_head": 4}, {"subsample": 0}, {"watch_every": -1},
                                 {"expert_only": True, "subsample": 40}, {"watch_episodes": 0}])
def test_bad_scratch_options_are_refused(bad):
    with pytest.raises(UserError):
        make_config(TrainLMConfig, {**TINY, **bad})


def test_scratch_needs_a_template_with_a_word_vocabulary(synthetic_dataset):
    from ad.history import HistoryReader
    from models.lm.scratch import scratch_tokenizer

    class Text:
        name = "rollout"

    with pytest.raises(UserError, match="no word vocabulary"):
        scratch_tokenizer(HistoryReader(synthetic_dataset), Text())
