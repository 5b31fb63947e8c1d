"""DPT on the DPT paper's DarkRoom contexts: independent transitions, each from a uniformly drawn cell with a uniformly
drawn action (`ad generate darkroom --source random --random-start --episode-length 1`), a model that does not embed
time steps (`ad train rl --time-embedding false`) acting in the evaluation's 20-step episodes, and the demo's
`--dpt-data transitions` (refused where a family's states are not all single steps from drawn cells)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

from models.rl.config import ADConfig
from models.rl.model import ADTransformer
from tasks.grid.room import transition_table
from tests.cli_run import run_cli
from tests.test_noise_source import QUIET, _meta, _read

#: chi-square values exceeded with probability 0.001 under independence / uniformity, by degrees of freedom
CHI2_999 = {4: 18.47, 16: 39.25, 24: 51.18, 96: 144.57}
TINY = ["--n-embd", "16", "--n-head", "2", "--n-ff", "32", "--warmup-steps", "1", "--batch-size", "2", "--max-steps",
        "2", "--val-every", "0", "--progress", "false"]


def chi_square(table: np.ndarray) -> float:
    """Pearson's statistic of a contingency table (rows x columns) against independence (a 1-D table: uniformity)."""
    table = np.atleast_2d(table).astype(float)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    return float(((table - expected) ** 2 / expected).sum())


def generate(capsys, out, *extra: str) -> dict[str, np.ndarray]:
    code, err, _ = run_cli(capsys, "generate", "darkroom", "--source", "random", "--random-start", "--size", "5",
                           "--steps-per-goal", "400", "--num-envs", "2", "--seed", "1", *extra, *QUIET,
                           "--out", str(out))
    assert code == 0, err
    return _read(out)


def consecutive_rows(rows: dict[str, np.ndarray], size: int) -> np.ndarray:
    """Contingency table (size x size) of the room row of each state against the next state's in the same stream."""
    same = (rows["task"][1:] == rows["task"][:-1]) & (rows["stream"][1:] == rows["stream"][:-1])
    table = np.zeros((size, size))
    np.add.at(table, (rows["state"][:-1][same] // size, rows["state"][1:][same] // size), 1)
    return table


def test_transitions_are_independent_single_steps_from_uniform_cells_and_actions(tmp_path, capsys):
    rows = generate(capsys, tmp_path / "t", "--episode-length", "1")
    meta = _meta(tmp_path / "t")
    assert meta["task_spec"]["episode_length"] == 1 and meta["task_spec"]["random_start"] is True
    assert len(rows["state"]) == 24 * 400 and (rows["step"] == 0).all()
    assert (rows["truncated"] | rows["terminated"]).all()  # every transition ends its episode
    keys = {(t, s, e) for t, s, e in zip(rows["task"], rows["stream"], rows["episode"])}
    assert len(keys) == len(rows["state"])  # every episode is one transition
    assert chi_square(np.bincount(rows["state"], minlength=25)) < CHI2_999[24]  # uniform cells
    assert chi_square(np.bincount(rows["action"], minlength=5)) < CHI2_999[4]  # uniform actions
    joint = np.zeros((25, 5))
    np.add.at(joint, (rows["state"], rows["action"]), 1)
    assert chi_square(joint) < CHI2_999[96]  # the action does not depend on the cell
    assert chi_square(consecutive_rows(rows, 5)) < CHI2_999[16]  # nor a cell on the stream's previous one
    # the next state is implied by the grid: reward 1 exactly where the move lands on the goal
    goal = np.array([int(t.split("-g")[1].split("-")[0]) * 5 + int(t.split("-")[-1]) for t in rows["task"]])
    landed = transition_table(5)[rows["state"], rows["action"]]
    assert ((landed == goal) == (rows["reward"] > 0)).all() and rows["reward"].any()


def test_the_independence_check_tells_random_walks_apart(tmp_path, capsys):
    rows = generate(capsys, tmp_path / "walk", "--episode-length", "20")  # the random-walk contexts
    assert chi_square(consecutive_rows(rows, 5)) > 10 * CHI2_999[16]


def test_a_model_without_time_embedding_ignores_time_steps():
    config = ADConfig(num_states=9, num_actions=5, episode_length=1, grid_size=3, time_embedding=False)
    model = ADTransformer(config).eval()
    assert not any("time_emb" in name for name, _ in model.named_parameters())
    states, actions = torch.randint(0, 9, (2, 6)), torch.randint(0, 5, (2, 6))
    rewards = torch.zeros(2, 6)
    with torch.no_grad():
        a = model(states, actions, rewards, torch.zeros(2, 6, dtype=torch.long))["action"]
        b = model(states, actions, rewards, torch.arange(6).expand(2, 6) * 7)["action"]
    assert torch.equal(a, b)


def test_dpt_trained_on_transitions_acts_in_twenty_step_episodes(tmp_path, capsys, monkeypatch):
    from models.rl.policy import ADPolicy

    generate(capsys, tmp_path / "trans", "--episode-length", "1")
    generate(capsys, tmp_path / "eval20", "--episode-length", "20", "--terminate-on-goal", "false")  # 20 steps each
    assert _meta(tmp_path / "trans")["split"] == _meta(tmp_path / "eval20")["split"]
    for name, extra in (("dpt", ["--time-embedding", "false"]), ("timed", [])):
        code, err, _ = run_cli(capsys, "train", "rl", "--objective", "dpt", "--data", str(tmp_path / "trans"),
                               "--context", "30", *TINY, *extra, "--out", str(tmp_path / name))
        assert code == 0, err
    seen: list[int] = []
    act = ADPolicy.act
    monkeypatch.setattr(ADPolicy, "act", lambda self, obs, a, r, t, f: (seen.append(int(t.max())),
                                                                         act(self, obs, a, r, t, f))[1])
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(tmp_path / "dpt"), "--data", str(tmp_path / "eval20"),
                           "--episodes", "2", "--seeds", "1", "--max-tasks", "2", "--progress", "false",
                           "--out", str(tmp_path / "ev"))
    assert code == 0, err
    assert max(seen) == 19 and len(seen) == 2 * 20  # two whole 20-step episodes
    summary = json.loads((tmp_path / "ev" / "eval.json").read_text())
    assert np.shape(summary["policies"]["AD"]["returns"])[-1] == 2
    # the same model with the time-step embedding only knows 1-step episodes: refused
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(tmp_path / "timed"), "--data", str(tmp_path / "eval20"),
                           "--episodes", "2", "--seeds", "1", "--out", str(tmp_path / "ev2"))
    assert code == 2 and "knows episodes of up to 1 steps" in err


def test_darkroom_demo_trains_dpt_on_transitions_without_time_embedding(tmp_path, capsys):
    out = tmp_path / "demo"
    code, err, _ = run_cli(capsys, "demo", "--task", "darkroom", "--methods", "dpt", "--dpt-data", "transitions",
                           "--out", str(out), "--size", "3", "--streams", "2", "--steps-per-goal", "400",
                           "--dpt-steps", "2", "--episodes", "2", "--seeds", "1", "--context", "20",
                           "--train-overrides", json.dumps({"n_embd": 16, "n_head": 2, "n_ff": 32, "warmup_steps": 1,
                                                            "progress": False, "batch_size": 2}))
    assert code == 0, err
    own, trans = (_meta(out / name) for name in ("darkroom", "darkroom-transitions"))
    assert trans["split"] == own["split"] and trans["task_spec"]["episode_length"] == 1
    assert trans["task_spec"]["random_start"] is True and own["task_spec"]["episode_length"] == 20
    dpt = yaml.safe_load((out / "dpt" / "config.yaml").read_text())
    assert dpt["data"] == str(out / "darkroom-transitions") and dpt["time_embedding"] is False
    summary = json.loads((out / "eval" / "eval.json").read_text())
    assert summary["tasks"] == own["split"]["heldout"] and "DPT" in summary["policies"]


@pytest.mark.parametrize("argv,message", [
    (["--task", "keydoor"], "--dpt-data transitions: a Key-to-Door state includes whether the key is carried"),
    (["--task", "bandit"], "--dpt-data transitions: k-armed bandits has no independent-transition contexts"),
    (["--task", "darkroom", "--streams", "10", "--steps-per-goal", "1000"], "fewer than the --context of 200")])
def test_demo_refuses_transitions_where_they_do_not_fit(tmp_path, capsys, argv, message):
    out = tmp_path / "bad"
    code, err, _ = run_cli(capsys, "demo", *argv, "--methods", "dpt", "--dpt-data", "transitions", "--out", str(out))
    assert code == 2 and message in err, err
    assert not out.exists()
