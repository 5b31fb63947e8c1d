"""DPT's posterior target (``ad train rl --objective dpt --dpt-target posterior``): each action's probability of being
optimal given the window so far, under the family's task distribution. DarkRoom's is checked against brute force
over every goal; the loss, the batches, the options and the refusals of families without it."""
import contextlib
import io

import numpy as np
import pytest
import torch
import yaml

from ad import registry
from ad.cli import main
from ad.config import make_config
from ad.data import RLDataModule
from ad.errors import UserError
from ad.formats.rl import TARGET_PROBS, TARGETS
from models.rl.config import TrainRLConfig
from models.rl.model import masked_classification, masked_soft_classification
from tasks.darkroom.goals import all_goals
from tasks.darkroom.optimal import posterior_action_probs
from tasks.grid.room import NUM_ACTIONS, shortest_path_actions, start_cell, transition_table

TINY = ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--n-ff", "32", "--progress", "false"]


def random_windows(size: int, goals: list[tuple[int, int]], length: int, episode: int, seed: int) -> dict:
    """Windows (B, T) of random walks in a ``size`` room, one goal each, episodes of ``episode`` steps from the
    start, every step onto the goal rewarded; a window may begin mid-episode."""
    rng = np.random.default_rng(seed)
    table = transition_table(size)
    start = start_cell(size)[0] * size + start_cell(size)[1]
    states = np.zeros((len(goals), length), np.int64)
    actions = rng.integers(0, NUM_ACTIONS, (len(goals), length))
    rewards = np.zeros((len(goals), length), np.float32)
    for b, (row, col) in enumerate(goals):
        cell = int(rng.integers(size * size))  # mid-episode
        for t in range(length):
            if t > 0 and (t + b) % episode == 0:
                cell = start
            states[b, t] = cell
            cell = int(table[cell, actions[b, t]])
            rewards[b, t] = float(cell == row * size + col)
    return {"states": states, "actions": actions, "rewards": rewards, "timesteps": np.zeros_like(states)}


def brute_force(size: int, batch: dict) -> np.ndarray:
    """The posterior of the optimal action by enumeration: the goals whose rewards agree with every earlier row."""
    table = transition_table(size)
    goals = [g[0] * size + g[1] for g in all_goals(size)]
    B, T = batch["states"].shape
    out = np.zeros((B, T, NUM_ACTIONS))
    for b in range(B):
        onto = table[batch["states"][b], batch["actions"][b]]
        for t in range(T):
            agree = [g for g in goals if all((onto[k] == g) == (batch["rewards"][b, k] > 0) for k in range(t))]
            for g in agree:
                out[b, t, shortest_path_actions(size, g)[batch["states"][b, t]]] += 1 / len(agree)
    return out


@pytest.mark.parametrize("size", [3, 5])
def test_darkroom_posterior_targets_equal_the_enumerated_posterior(size):
    goals = [g for g in all_goals(size)][:: max(1, size - 2)]
    batch = random_windows(size, goals, length=40, episode=7, seed=size)
    got = posterior_action_probs({"task_spec": {"size": size}}, batch)
    assert got.shape == (len(goals), 40, NUM_ACTIONS) and got.dtype == np.float32
    np.testing.assert_allclose(got, brute_force(size, batch), atol=1e-6)
    assert (batch["rewards"].sum(1) > 0).any()  # some windows find their goal, so both branches are checked


def test_before_any_row_every_goal_counts_and_after_a_find_only_the_found_one():
    size = 5
    batch = random_windows(size, [(0, 0)], length=30, episode=30, seed=3)
    batch["states"][0, 0] = 12  # the centre, with nothing seen yet: the prior's first actions
    got = posterior_action_probs({"task_spec": {"size": size}}, batch)
    prior = np.bincount([shortest_path_actions(size, r * size + c)[12] for r, c in all_goals(size)],
                        minlength=NUM_ACTIONS) / len(all_goals(size))
    np.testing.assert_allclose(got[0, 0], prior, atol=1e-6)  # up, right, down, left: 6/24 each, noop never
    stepped = transition_table(size)[batch["states"][0], batch["actions"][0]]
    for t in range(1, 30):
        if batch["rewards"][0, :t].any():
            assert got[0, t].max() == 1.0
            assert got[0, t].argmax() == shortest_path_actions(size, 0)[batch["states"][0, t]]
        else:
            assert got[0, t].sum() == pytest.approx(1.0) and stepped[0] != 0


def test_the_soft_loss_is_the_hard_one_on_one_hot_targets_and_reads_probabilities():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 5)
    targets = torch.randint(0, 5, (2, 4))
    mask = torch.ones(2, 4, dtype=torch.bool)
    mask[1, 3] = False
    hard = masked_classification(logits, targets, mask)
    soft = masked_soft_classification(logits, torch.nn.functional.one_hot(targets, 5).float(), mask)
    assert float(soft[0]) == pytest.approx(float(hard[0])) and float(soft[1]) == pytest.approx(float(hard[1]))
    uniform = masked_soft_classification(logits, torch.full((2, 4, 5), 0.2), mask)
    expected = -torch.log_softmax(logits, -1).mean(-1)[mask].mean()
    assert float(uniform[0]) == pytest.approx(float(expected)) and float(uniform[1]) == pytest.approx(0.2)


@pytest.fixture(scope="module")
def darkroom_data(tmp_path_factory):
    command = registry.get("generate", "darkroom")
    out = tmp_path_factory.mktemp("darkroom") / "data"
    with contextlib.redirect_stdout(io.StringIO()):
        command.run(make_config(command.config_cls, {"out": str(out), "size": 3, "source": "explorer",
                                                     "steps_per_goal": 2000, "num_envs": 2, "progress": False}))
    return out


def test_batches_carry_the_posterior_of_the_dataset_s_room_instead_of_the_task_s_action(darkroom_data):
    data = RLDataModule(darkroom_data, window=20, batch_size=4, posterior_targets=True)
    data.setup()
    batch = next(iter(data.train_dataloader()))
    assert TARGETS not in batch and batch[TARGET_PROBS].shape == (4, 20, NUM_ACTIONS)
    np.testing.assert_allclose(batch[TARGET_PROBS].sum(-1).numpy(), 1.0, atol=1e-6)
    numpy_batch = {key: batch[key].numpy() for key in ("states", "actions", "rewards")}
    np.testing.assert_allclose(batch[TARGET_PROBS].numpy(), brute_force(3, numpy_batch), atol=1e-6)


def test_the_two_dpt_targets_are_asked_for_one_at_a_time(darkroom_data):
    with pytest.raises(ValueError, match="ask for one"):
        RLDataModule(darkroom_data, window=20, batch_size=4, optimal_targets=True, posterior_targets=True)


def test_ad_train_rl_with_posterior_targets_trains_and_records_them(darkroom_data, tmp_path):
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exit_info:
        main(["train", "rl", "--data", str(darkroom_data), "--out", str(tmp_path / "dpt"), "--objective", "dpt",
              "--dpt-target", "posterior", "--context", "20", "--batch-size", "2", "--max-steps", "3",
              "--warmup-steps", "1", "--val-every", "0", *TINY])
    assert exit_info.value.code == 0
    saved = yaml.safe_load((tmp_path / "dpt" / "config.yaml").read_text())
    assert saved["objective"] == "dpt" and saved["dpt_target"] == "posterior"


def test_posterior_target_needs_objective_dpt():
    with pytest.raises(UserError, match="--objective dpt"):
        make_config(TrainRLConfig, {"dpt_target": "posterior"})
    with pytest.raises(UserError, match="--dpt-target.*one of optimal, posterior"):
        make_config(TrainRLConfig, {"objective": "dpt", "dpt_target": "mean"})


def test_a_family_without_posterior_targets_exits_2_before_writing(tmp_path, capsys):
    command = registry.get("generate", "bandit")
    data = tmp_path / "bandit"
    with contextlib.redirect_stdout(io.StringIO()):
        command.run(make_config(command.config_cls, {"out": str(data), "instances": 4, "pulls": 12,
                                                     "progress": False}))
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "rl", "--data", str(data), "--out", str(tmp_path / "r"), "--objective", "dpt",
              "--dpt-target", "posterior", "--context", "6", *TINY])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "does not provide" in err and "'bandit'" in err and "darkroom" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--task", "keydoor", "--methods", "dpt", "--dpt-target", "posterior",
              "--out", str(tmp_path / "demo")])
    assert exit_info.value.code == 2 and "--dpt-target posterior needs" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()


def test_the_darkroom_demo_passes_the_target_to_dpt_only(tmp_path):
    command = registry.get_demo("darkroom", "rl")
    config = make_config(command.config_cls, {"methods": "ad,dpt", "dpt_target": "posterior",
                                              "out": str(tmp_path / "demo")})
    runs = {run.label: run.options for run in config.train_runs()}
    assert runs["DPT"]["objective"] == "dpt" and runs["DPT"]["dpt_target"] == "posterior"
    assert runs["AD"]["objective"] == "ad" and "dpt_target" not in runs["AD"]
