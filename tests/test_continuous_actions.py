"""Box (continuous) actions in the RL-format model: the two heads, training, cached acting, `ad eval`, bad input."""
from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from ad.history import HistoryReader, HistoryWriter
from ad.record import env_spec, recording_spec
from benchmarks.helpers.references import ADPolicyReference
from cli_run import run_cli
from models.rl.box_actions import BoxActions
from models.rl.config import ADConfig
from models.rl.model import ADTransformer
from models.rl.policy import ADPolicy

torch.set_num_threads(1)
LOW, HIGH = [-2.0, 0.0], [2.0, 0.5]


def tiny(layout="transition", head="gaussian", **kw) -> ADConfig:
    values = dict(layout=layout, n_layer=1, n_head=2, n_embd=16, n_ff=32, context=10, state_dim=3, action_dim=2,
                  action_low=LOW, action_high=HIGH, action_head=head, action_bins=7, episode_length=5,
                  reward_kind="continuous", logprob_weight=0.1)
    values.update(kw)
    return ADConfig(**values)


def box_window(B=3, T=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    actions = torch.tensor(LOW) + torch.rand(B, T, 2, generator=g) * (torch.tensor(HIGH) - torch.tensor(LOW))
    return (torch.randn(B, T, 3, generator=g), actions, torch.randn(B, T, generator=g),
            (torch.arange(T) % 5).expand(B, T))


def test_gaussian_log_prob_is_the_squashed_and_rescaled_normal():
    from torch.distributions import AffineTransform, Independent, Normal, TanhTransform, TransformedDistribution

    box = BoxActions(LOW, HIGH, "gaussian")
    params = torch.randn(4, 5, 4, generator=torch.Generator().manual_seed(1))
    actions = box_window(4, 5, seed=2)[1]
    mean, log_std = box.gaussian(params)
    low, high = torch.tensor(LOW), torch.tensor(HIGH)
    reference = TransformedDistribution(Independent(Normal(mean, log_std.exp()), 1),
                                        [TanhTransform(), AffineTransform((low + high) / 2, (high - low) / 2,
                                                                          event_dim=1)])
    torch.testing.assert_close(box.log_prob(params, actions), reference.log_prob(actions), atol=1e-4, rtol=1e-4)
    # the loss is its negative; greedy = the squashed mean
    nll, _ = box.loss(params, actions)
    torch.testing.assert_close(nll, -reference.log_prob(actions), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(box.choose(params, greedy=True), low + (torch.tanh(mean) + 1) / 2 * (high - low))


def test_bins_round_trip_within_half_a_bin():
    box = BoxActions(LOW, HIGH, "bins", bins=7)
    actions = box_window(50, 10)[1]
    back = box.from_bins(box.to_bins(actions))
    half = (torch.tensor(HIGH) - torch.tensor(LOW)) / (7 - 1) / 2
    assert bool(((back - actions).abs() <= half + 1e-6).all())
    assert box.to_bins(torch.tensor([LOW, HIGH])).tolist() == [[0, 0], [6, 6]]  # the bounds are bins
    params = torch.randn(6, 2 * 7)
    sampled = box.choose(params, greedy=False, generator=torch.Generator().manual_seed(0))
    assert bool(((sampled >= torch.tensor(LOW)) & (sampled <= torch.tensor(HIGH))).all())


@pytest.mark.parametrize("layout", ["transition", "separate"])
@pytest.mark.parametrize("head", ["gaussian", "bins"])
def test_a_train_step_with_box_actions_changes_every_trained_parameter(layout, head):
    torch.manual_seed(0)
    model = ADTransformer(tiny(layout, head))
    states, actions, rewards, timesteps = box_window()
    batch = dict(states=states, actions=actions, rewards=rewards, timesteps=timesteps,
                 mask=torch.ones(3, 10, dtype=torch.bool), logprobs=torch.randn(3, 10))
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    loss, metrics = model.compute_loss(batch)
    assert torch.isfinite(loss) and set(metrics) >= {"action_nll", "action_mse", "state_loss", "reward_loss"}
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    unchanged = {k for k, v in model.named_parameters() if torch.equal(v, before[k])}
    expected = {"action_start", "reward_start"} if layout == "separate" else set()  # no START token there
    assert unchanged == expected
    assert model.action_head.out_features == (4 if head == "gaussian" else 14)


@pytest.mark.parametrize("layout", ["transition", "separate"])
@pytest.mark.parametrize("head", ["gaussian", "bins"])
def test_cached_policy_equals_full_recompute_with_box_actions(layout, head):
    torch.manual_seed(0)
    model = ADTransformer(tiny(layout, head, context=6)).double()
    results = []
    for cls in (ADPolicy, ADPolicyReference):
        policy = cls(model, greedy=True)
        policy.reset(2)
        obs, prev_a, prev_r = torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 2), torch.zeros(2)
        actions, logits = [], []
        for step in range(25):  # past two window shifts
            t = torch.full((2,), step % 5)
            lg = policy.logits(obs, prev_a, prev_r, t, torch.full((2,), step == 0))
            a = model.box.choose(lg, greedy=True)
            actions.append(a)
            logits.append(lg)
            obs = torch.cat([obs[:, 1:], a[:, :1]], 1) + 0.1
            prev_a, prev_r = a, -a.pow(2).sum(-1)
        results.append((torch.stack(actions), torch.stack(logits)))
    torch.testing.assert_close(results[0][1], results[1][1], atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(results[0][0], results[1][0], atol=1e-10, rtol=1e-10)
    assert results[0][0].std(0).max() > 0  # actions vary: the test is not vacuous
    sampled = ADPolicy(model, greedy=False, generator=torch.Generator().manual_seed(0))
    sampled.reset(2)
    a = sampled.act(torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 2), torch.zeros(2),
                    torch.zeros(2, dtype=torch.long), torch.ones(2, dtype=torch.bool))
    assert a.shape == (2, 2) and bool(((a >= torch.tensor(LOW)) & (a <= torch.tensor(HIGH))).all())


def test_a_discrete_model_saved_before_box_actions_still_loads(tmp_path):
    cfg = ADConfig(n_layer=1, n_head=2, n_embd=16, n_ff=32, context=6, num_states=4, num_actions=3, episode_length=5)
    model = ADTransformer(cfg).eval()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    for key in ("action_dim", "action_low", "action_high", "action_head", "action_bins"):
        config.pop(key)  # what an older checkpoint's config.json holds
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = ADTransformer.from_pretrained(tmp_path).eval()
    x = (torch.randint(0, 4, (2, 6)), torch.randint(0, 3, (2, 6)), torch.randint(0, 2, (2, 6)).float(),
         torch.arange(6).expand(2, 6) % 5)
    torch.testing.assert_close(loaded(*x)["action"], model(*x)["action"], atol=0, rtol=0)


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    """A tiny Pendulum dataset (8-step episodes, three tasks of which one is held out), recorded with SAC."""
    root = tmp_path_factory.mktemp("pendulum")
    tasks = root / "tasks.yaml"
    tasks.write_text("tasks:\n  - {g: 9.0, max_episode_steps: 8}\n  - {g: 10.0, max_episode_steps: 8}\n"
                     "  - {g: 11.0, max_episode_steps: 8}\n")
    from ad import cli

    assert cli.run(["generate", "gym", "--env", "Pendulum-v1", "--tasks", str(tasks), "--algo", "sb3:SAC",
                    "--algo-kwargs", '{"learning_starts": 16, "batch_size": 8, "policy_kwargs": {"net_arch": [8]}}',
                    "--steps", "32", "--heldout-fraction", "0.34", "--out", str(root / "d"), "--no-progress"]) == 0
    return root / "d"


TRAIN = ["--max-steps", "3", "--context", "8", "--batch-size", "2", "--n-layer", "1", "--n-embd", "16",
         "--n-head", "2", "--n-ff", "32", "--reward-kind", "continuous", "--val-every", "0", "--progress", "false"]


@pytest.mark.parametrize("head", ["gaussian", "bins"])
def test_train_and_eval_on_a_continuous_gym_dataset(pendulum, tmp_path, capsys, head):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", "rl", "--data", str(pendulum), "--out", str(run), "--action-head", head,
                   *TRAIN)[0] == 0
    config = json.loads((run / "model" / "config.json").read_text())
    assert (config["action_dim"], config["action_low"], config["action_high"]) == (1, [-2.0], [2.0])
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(run), "--data", str(pendulum), "--episodes", "3",
                           "--seeds", "2", "--no-progress")
    assert code == 0, err
    summary = json.loads((run / "eval" / "eval.json").read_text())
    heldout = HistoryReader(pendulum).metadata["split"]["heldout"]
    assert summary["tasks"] == heldout and set(summary["policies"]) == {"AD", "random", "source"}
    for name in ("AD", "random"):
        returns = np.asarray(summary["policies"][name]["returns"])
        assert returns.shape == (1, 2, 3) and np.isfinite(returns).all() and (returns < 0).all()


def _write(path, action_space, actions):
    """A one-stream dataset of 12 transitions in 3-step episodes with the given Box actions (12, D)."""
    obs_space = gym.spaces.Box(-1.0, 1.0, (2,))
    meta = {"task_spec": {**env_spec(obs_space, action_space, "Hand-v0"), "episode_length": 3}}
    writer = HistoryWriter(path, recording_spec(obs_space, action_space), "handmade", meta)
    unit = writer.open_unit("t0", 0)
    n = len(actions)
    unit.append({"stream": np.zeros(n, np.int32), "update": np.zeros(n, np.int64),
                 "episode": (np.arange(n) // 3).astype(np.int32), "step": (np.arange(n) % 3).astype(np.int32),
                 "state": np.zeros((n, 2), np.float32), "action": np.asarray(actions, np.float32),
                 "reward": np.ones(n, np.float32), "terminated": np.arange(n) % 3 == 2,
                 "truncated": np.zeros(n, bool), "logprob": np.zeros(n, np.float32)})
    unit.commit()
    writer.close()
    return path


def test_infinite_bounds_with_bins_is_one_error_line(tmp_path, capsys):
    data = _write(tmp_path / "d", gym.spaces.Box(-np.inf, np.inf, (2,)), np.zeros((12, 2)))
    code, err, _ = run_cli(capsys, "train", "rl", "--data", str(data), "--out", str(tmp_path / "r"),
                           "--action-head", "bins", *TRAIN, "--context", "4")
    assert code == 2 and "infinite bounds" in err and "Box(low=[-inf, -inf]" in err
    assert not (tmp_path / "r").exists()


def test_non_finite_actions_in_the_data_are_one_error_line(tmp_path, capsys):
    actions = np.zeros((12, 1))
    actions[5] = np.nan
    data = _write(tmp_path / "d", gym.spaces.Box(-1.0, 1.0, (1,)), actions)
    code, err, _ = run_cli(capsys, "train", "rl", "--data", str(data), "--out", str(tmp_path / "r"), *TRAIN,
                           "--context", "4")
    assert code == 2 and "non-finite action" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("bad, match", [
    (dict(action_head="beta"), "--action-head"),
    (dict(action_bins=1), "--action-bins"),
    (dict(num_actions=4), "not both"),
    (dict(action_low=[-1.0], action_high=[1.0]), "one bound per action dimension"),
    (dict(action_low=[1.0, 0.0], action_high=[-1.0, 1.0]), "low < high"),
])
def test_bad_box_options_are_user_errors(bad, match):
    from ad.errors import UserError

    with pytest.raises(UserError, match=match):
        tiny(**bad)


def test_vector_template_round_trips_box_transitions():
    from ad.formats import get_template

    template = get_template("vector")
    rows = {"state": np.array([[0.123, -0.5, 1.0], [0.2, 0.3, -0.4]], np.float32),
            "action": np.array([[-1.254], [2.0]], np.float32), "reward": np.array([-3.2149, 0.5]),
            "step": np.array([0, 1])}
    text = template.render(rows)
    assert text == "|\ns +0.12 -0.50 +1.00 a -1.25 r -3.21\ns +0.20 +0.30 -0.40 a +2.00 r +0.50\n"
    parsed = template.parse(text)
    assert len(parsed) == 2
    for i, row in enumerate(parsed):
        assert np.allclose(row["state"], rows["state"][i], atol=0.005)
        assert np.allclose(row["action"], rows["action"][i], atol=0.005)
        assert abs(row["reward"] - rows["reward"][i]) <= 0.005
    assert np.allclose(template.parse_action(" -1.25 +0.50 r +1.00\n"), [-1.25, 0.5])
    with pytest.raises(ValueError, match="no action numbers"):
        template.parse_action(" r 1")
