"""Language-format templates for Box states (LunarLander's 8 numbers) and the from-scratch LM on them: signed log
bins, the ``bins<L>`` / ``pairs<L>`` word templates and the character-level ``vector`` text, their tokenizers (no
unknown token on any state, tokens per transition), and `ad train lm --model scratch` -> `ad eval` on a real
LunarLander dataset."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ad.config import make_config
from ad.errors import UserError
from ad.formats.language import get_template, log_bin_edges, log_bins, tokenize_segments
from ad.history import HistoryReader
from models.lm.scratch import scratch_tokenizer
from models.lm.vocab import box_tokenizer
from tests.cli_run import run_cli

#: LunarLander-like states: positions, velocities, angle, angular velocity, legs; with values beyond the bins' range
STATES = np.array([[0.013, 1.41, -0.35, 0.2, -0.05, 0.9, 0.0, 1.0],
                   [-2.5, 0.0, 10.0, -10.0, 6.28, -0.004, 1.0, 0.0],
                   [1e-6, -1e-3, 0.01, -0.01, 123.0, -55.5, 0.0, 0.0]], np.float32)


def test_log_bins_are_signed_geometric_and_refuse_non_finite():
    edges = log_bin_edges(4, 0.01, 10.0)  # 0.01, 0.1, 1, 10
    np.testing.assert_allclose(edges, [0.01, 0.1, 1.0, 10.0])
    got = log_bins([0.0, 0.005, 0.01, -0.05, 0.5, -1.0, 9.99, 10.0, -1e9], edges)
    assert got.tolist() == [0, 0, 1, -1, 2, -3, 3, 4, -4]
    with pytest.raises(ValueError, match="non-finite"):
        log_bins([0.1, float("nan")], edges)


@pytest.mark.parametrize("name, per_transition", [("bins8", 10), ("pairs8", 6)])
def test_word_templates_write_every_state_in_known_words(name, per_transition):
    template = get_template(name)
    tokenizer = box_tokenizer(template, 8, 4)
    unk = tokenizer.unk_token_id
    for i, state in enumerate(STATES):
        row = {"state": state, "action": i, "reward": [-100.0, 0.0, 2.5][i], "step": 1}
        ids = tokenize_segments(tokenizer, template.row_segments(row))
        assert unk not in ids.input_ids.tolist()
        assert len(ids.input_ids) == per_transition and ids.action_mask.sum() == 1
        # parsing gives each bin's representative value back, and it re-renders to the same text
        text = template.render({k: [v] for k, v in row.items()})
        back = template.parse(text)[0]
        assert back["action"] == i
        assert template.render({k: [v] for k, v in {**back, "step": 1}.items()}) == text
    first = tokenize_segments(tokenizer, template.row_segments({"state": STATES[0], "action": 0, "reward": 0.0,
                                                                "step": 0}))
    assert len(first.input_ids) == per_transition + 1  # the episode boundary


def test_pairs_bin_both_numbers_of_a_pair_and_an_odd_last_dimension_with_itself():
    template = get_template("pairs4")
    words = template.state_words(np.array([0.5, -0.05, 3.0]))
    edges = template.edges
    a, b, c = log_bins([0.5, -0.05, 3.0], edges)
    assert words == [f"p0{a:+d}{b:+d}", f"p1{c:+d}{c:+d}"]
    assert set(words) <= set(template.box_vocabulary(3, 2))


def test_vector_text_is_read_one_character_a_token():
    template = get_template("vector")
    tokenizer = box_tokenizer(template, 8, 4)
    row = {"state": STATES[0], "action": 2, "reward": -2.37, "step": 1}
    ids = tokenize_segments(tokenizer, template.row_segments(row))
    text = template.render({k: [v] for k, v in row.items()})
    assert len(ids.input_ids) == len(text.replace(" ", "").replace("\n", ""))  # one token per character
    assert tokenizer.unk_token_id not in ids.input_ids.tolist()
    assert tokenizer.convert_ids_to_tokens(ids.input_ids[ids.action_mask].tolist()) == ["2"]


def test_bad_template_names_and_vocabularies_are_user_errors():
    with pytest.raises(UserError, match="bins<L>"):
        get_template("bins")
    with pytest.raises(UserError, match="at least 1 bin level"):
        get_template("bins0")
    with pytest.raises(UserError, match="bins<L>, pairs<L> or vector"):
        box_tokenizer(get_template("words"), 8, 4)
    with pytest.raises(UserError, match="writes Box .vector. states"):
        get_template("bins8").vocabulary(81, 5, [0.0, 1.0])  # a discrete dataset (DarkRoom) with a Box template


@pytest.fixture(scope="module")
def lunarlander(tmp_path_factory):
    from tasks.lunarlander.config import GenerateConfig
    from tasks.lunarlander.generate import generate

    out = tmp_path_factory.mktemp("ll") / "data"
    generate(make_config(GenerateConfig, {"tasks": 3, "steps": 128, "streams": 2, "rollout": 32, "epochs": 1,
                                          "minibatches": 2, "hidden": 8, "progress": False, "heldout_fraction": 0.34,
                                          "out": str(out)}))
    return out


def test_scratch_tokenizer_of_a_box_dataset_needs_a_box_template(lunarlander):
    reader = HistoryReader(lunarlander)
    assert len(scratch_tokenizer(reader, get_template("bins4"))) == 3 + 1 + 8 * 9 + 4 + 9
    with pytest.raises(UserError, match="no vocabulary for Box states"):
        scratch_tokenizer(reader, get_template("grid3"))


@pytest.mark.parametrize("template", ["pairs4", "vector"])
def test_scratch_lm_trains_and_acts_in_context_on_lunarlander(capsys, tmp_path, lunarlander, template):
    run = tmp_path / "lm"
    code, _, err = run_cli(capsys, "train", "lm", "--model", "scratch", "--template", template, "--data",
                           str(lunarlander), "--out", str(run), "--n-layer", "1", "--n-embd", "16", "--n-head", "2",
                           "--n-ff", "32", "--context", "8", "--max-tokens", "128", "--batch-size", "2",
                           "--max-steps", "2", "--val-every", "0", "--no-progress")
    assert code == 0, err
    assert json.loads((run / "model" / "lm.json").read_text())["template"] == template
    code, _, err = run_cli(capsys, "eval", "--ckpt", str(run), "--data", str(lunarlander), "--episodes", "1",
                           "--seeds", "1", "--name", "LM", "--out", str(tmp_path / "eval"), "--no-progress")
    assert code == 0, err
    result = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert result["tasks"] == ["lunarlander-t0002"]
    assert np.isfinite(result["policies"]["LM"]["mean"]).all()
