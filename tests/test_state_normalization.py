"""--normalize-states: vector states standardised by the training windows' statistics, stored with the model."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ad.errors import UserError
from ad.history import HistoryReader
from cli_run import run_cli
from models.rl.config import ADConfig
from models.rl.model import ADTransformer
from test_continuous_actions import TRAIN, box_window, pendulum, tiny  # noqa: F401  (pendulum: the fixture)

torch.set_num_threads(1)


def test_normalised_model_sees_only_the_standardised_states():
    """A model with statistics (m, s) on states x acts exactly as the same weights with (0, 1) on (x - m) / s."""
    mean, std = [5.0, -3.0, 0.5], [10.0, 0.01, 2.0]
    torch.manual_seed(0)
    normalised = ADTransformer(tiny(normalize_states=True, state_mean=mean, state_std=std))
    plain = ADTransformer(tiny())
    plain.load_state_dict(normalised.state_dict())  # the statistics are not weights: the same state dict fits both
    states, actions, rewards, steps = box_window()
    raw = states * torch.tensor(std) + torch.tensor(mean)
    torch.testing.assert_close(normalised(raw, actions, rewards, steps)["action"],
                               plain(states, actions, rewards, steps)["action"], atol=1e-5, rtol=1e-5)
    assert "state_mean" not in normalised.state_dict()


def test_statistics_survive_save_and_load(tmp_path):
    model = ADTransformer(tiny(normalize_states=True, state_mean=[1.0, 2.0, 3.0], state_std=[0.5, 1.0, 4.0]))
    loaded = ADTransformer.from_pretrained(model.save_pretrained(tmp_path / "m"))
    x = box_window()
    torch.testing.assert_close(loaded(*x)["action"], model(*x)["action"], atol=0, rtol=0)
    assert loaded.config.state_std == [0.5, 1.0, 4.0]


def test_training_stores_the_training_windows_statistics(pendulum, tmp_path, capsys):  # noqa: F811
    run = tmp_path / "run"
    code, err, _ = run_cli(capsys, "train", "rl", "--data", str(pendulum), "--out", str(run), "--action-head",
                           "gaussian", "--normalize-states", "true", *TRAIN)
    assert code == 0, err
    config = json.loads((run / "model" / "config.json").read_text())
    reader = HistoryReader(pendulum)
    train_tasks = reader.metadata["split"]["train"]
    states = np.concatenate([s.columns["state"] for s in reader.streams(tasks=train_tasks)]).astype(np.float64)
    np.testing.assert_allclose(config["state_mean"], states.mean(0), rtol=1e-9)
    np.testing.assert_allclose(config["state_std"], states.std(0), rtol=1e-9)
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(run), "--data", str(pendulum), "--episodes", "2",
                           "--no-progress")
    assert code == 0, err


@pytest.mark.parametrize("bad, match", [
    (dict(state_mean=[0.0, 0.0, 0.0], state_std=[1.0, 1.0]), "one value per state dimension"),
    (dict(state_mean=[0.0, 0.0, 0.0], state_std=[1.0, 0.0, 1.0]), "std > 0"),
    (dict(state_mean=[0.0, float("nan"), 0.0], state_std=[1.0, 1.0, 1.0]), "finite"),
])
def test_bad_statistics_are_user_errors(bad, match):
    with pytest.raises(UserError, match=match):
        tiny(normalize_states=True, **bad)


def test_statistics_without_normalisation_are_refused():
    with pytest.raises(UserError, match="only with --normalize-states"):
        tiny(state_mean=[0.0, 0.0, 0.0], state_std=[1.0, 1.0, 1.0])


def test_a_normalised_model_config_without_statistics_cannot_build():
    with pytest.raises(UserError, match="state_mean and state_std"):
        ADTransformer(tiny(normalize_states=True))


def test_discrete_states_refuse_normalisation(tmp_path, capsys):
    from ad import cli

    data = tmp_path / "bandit"
    assert cli.run(["generate", "bandit", "--arms", "3", "--instances", "4", "--pulls", "20", "--heldout-fraction", "0.25", "--out", str(data),
                    "--no-progress"]) == 0
    code, err, _ = run_cli(capsys, "train", "rl", "--data", str(data), "--out", str(tmp_path / "r"),
                           "--normalize-states", "true", "--max-steps", "1", "--context", "4", "--batch-size", "2",
                           "--val-every", "0", "--progress", "false")
    assert code == 2 and "discrete states" in err, err
    assert not (tmp_path / "r").exists()
