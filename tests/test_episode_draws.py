"""One draw per episode (`ad eval --sampling episode`): the inverse-CDF chooser, the draws kept for an episode, the
grid rooms' action order (one draw walks to one goal), the recorded probability of a path, the RL-format policy and
its Box heads, the demo's folders, and the refusals (greedy with it, a language model)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from ad.demo import eval_folder_name
from ad.errors import UserError
from ad.history import HistoryReader
from models.rl.box_actions import BoxActions
from models.rl.config import ADConfig
from models.rl.model import ADTransformer
from models.rl.policy import ADPolicy
from models.sampling import EpisodeDraws, choose_at_draws, draw_bands
from tasks.grid.room import ACTION_DELTAS, ROWS_FIRST_ORDER, shortest_path_actions

torch.set_num_threads(1)


def test_uniform_draws_sample_the_tempered_distribution():
    logits = torch.tensor([1.0, 0.0, -1.0, float("-inf"), 0.5]).expand(40_000, 5)
    draws = torch.rand(40_000, generator=torch.Generator().manual_seed(0))
    for temperature in (0.5, 1.0, 2.0):
        for order in (None, torch.tensor([4, 2, 0, 3, 1])):
            picked = choose_at_draws(logits, draws, temperature, order)
            freq = torch.bincount(picked, minlength=5).double() / len(picked)
            torch.testing.assert_close(freq, torch.softmax(logits[0] / temperature, -1).double(), atol=0.01, rtol=0)
            assert not bool((picked == 3).any())  # -inf: never picked, not even by a draw on its edge


def test_a_draw_picks_the_action_whose_share_it_falls_in_in_the_given_order():
    logits = torch.log(torch.tensor([[0.1, 0.2, 0.3, 0.4]])).expand(5, 4)
    draws = torch.tensor([0.0, 0.39, 0.41, 0.71, 0.999999])
    # in the order 3, 0, 2, 1 the shares are [0, .4) [.4, .5) [.5, .8) [.8, 1)
    assert choose_at_draws(logits, draws, order=torch.tensor([3, 0, 2, 1])).tolist() == [3, 3, 0, 2, 1]
    assert choose_at_draws(logits, draws).tolist() == [0, 2, 2, 3, 3]  # the actions' own order
    edge = torch.log(torch.tensor([[0.5, 0.5, 0.0]]))  # a draw at the rounding edge of 1: the last action with mass
    assert choose_at_draws(edge, torch.tensor([1.0 - 1e-9])).tolist() == [1]


def test_draws_are_kept_for_an_episode_and_renewed_where_one_starts():
    draws = EpisodeDraws(torch.Generator().manual_seed(0))
    first = draws.at(torch.tensor([0, 0, 0])).clone()
    assert torch.equal(draws.at(torch.tensor([1, 1, 1])), first)  # the same episode: the same draws
    renewed = draws.at(torch.tensor([2, 0, 2]))  # the second env starts an episode
    assert renewed[0] == first[0] and renewed[2] == first[2] and renewed[1] != first[1]
    boxed = EpisodeDraws(torch.Generator().manual_seed(0), dims=(3,))
    assert boxed.at(torch.tensor([0, 0])).shape == (2, 3)


def test_the_band_of_a_picked_action_holds_the_draw_that_picked_it():
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(5000, 5, generator=gen) * 3
    logits[::7, 4] = float("-inf")  # zero-mass actions, last in the actions' own order
    draws = torch.rand(5000, generator=gen)
    draws[:50] = 1.0 - 2 ** -24  # the largest draw below 1: past the summed mass when it rounds low
    for order in (None, torch.tensor([1, 4, 0, 2, 3])):
        picked = choose_at_draws(logits, draws, 1.3, order)
        lower, upper = draw_bands(logits, picked, 1.3, order)
        assert bool((lower <= draws).all()) and bool((draws < upper).all())
        widths = sum(torch.subtract(*draw_bands(logits, torch.full((5000,), a), 1.3, order)[::-1]) for a in range(5))
        torch.testing.assert_close(widths, torch.ones(5000), atol=1e-6, rtol=0)  # the bands tile [0, 1)


def test_the_recorded_probabilities_of_an_episode_multiply_to_its_paths_share_of_draws():
    """Actions that depend on the earlier ones (as a context does): each path's summed log-probabilities equal the
    log of the share of a fine grid of draws that walks that path."""
    def logits_after(path: torch.Tensor) -> torch.Tensor:  # (N, t) -> (N, 4), a fixed function of the path so far
        code = (path * torch.arange(1, path.shape[1] + 1)).sum(1) if path.shape[1] else torch.zeros(len(path))
        return torch.stack([torch.sin(code + k) * 2 for k in range(4)], -1)

    n, steps, order = 200_000, 4, torch.tensor([2, 0, 3, 1])
    draws = EpisodeDraws(torch.Generator().manual_seed(0))
    draws.at(torch.zeros(n, dtype=torch.long))  # an episode starts: the intervals are [0, 1)
    u = (torch.arange(n, dtype=torch.float64) + 0.5).div(n).float()  # a fine grid of draws in place of random ones
    path = torch.zeros(n, 0, dtype=torch.long)
    total = torch.zeros(n)
    for t in range(steps):
        logits = logits_after(path)
        actions = choose_at_draws(logits, u, 0.8, order)
        step_logprob = draws.narrow(*draw_bands(logits, actions, 0.8, order))
        assert bool((step_logprob <= 1e-6).all())
        total += step_logprob
        path = torch.cat([path, actions[:, None]], 1)
    keys, index, counts = torch.unique(path, dim=0, return_inverse=True, return_counts=True)
    assert len(keys) >= 6 and int((keys != keys[:, :1]).any(1).sum()) >= 3  # paths that change action mid-episode
    share = counts[index].double() / n
    torch.testing.assert_close(total.double().exp(), share, atol=3.0 / n * 4, rtol=0)
    first = draws.at(torch.zeros(n, dtype=torch.long))  # a new episode: every draw is consistent again
    assert bool((draws.low == 0).all()) and bool((draws.high == 1).all()) and first.shape == (n,)


def belief_probabilities(size: int, goals: list[int], weights: np.ndarray, cell: int) -> torch.Tensor:
    """(A,) probability that each action is optimal in ``cell`` when the goal is one of ``goals`` with ``weights``
    (what DPT's softmax learns to predict): the mass of the goals whose shortest-path step there is that action."""
    probs = torch.zeros(len(ACTION_DELTAS), dtype=torch.float64)
    for goal, weight in zip(goals, weights):
        probs[int(shortest_path_actions(size, goal)[cell])] += float(weight)
    return probs


def walk(size: int, goals: list[int], weights: np.ndarray, draw: float, order) -> int:
    """The cell a policy acting on the belief reaches with one draw for every step (2 * size steps)."""
    row, col = size // 2, size // 2
    for _ in range(2 * size):
        logits = belief_probabilities(size, goals, weights, row * size + col).log()[None]
        action = int(choose_at_draws(logits, torch.tensor([draw]), order=order)[0])
        row = min(max(row + int(ACTION_DELTAS[action][0]), 0), size - 1)
        col = min(max(col + int(ACTION_DELTAS[action][1]), 0), size - 1)
    return row * size + col


def test_one_draw_walks_to_the_goal_its_quantile_names_in_the_rooms_order():
    size, rng = 7, np.random.default_rng(0)
    goals = sorted(rng.choice(size * size, 12, replace=False).tolist())  # cells row by row: the order's goal order
    weights = rng.dirichlet(np.ones(len(goals)))
    edges = np.concatenate([[0.0], np.cumsum(weights)])
    order = torch.tensor(ROWS_FIRST_ORDER)
    for i, goal in enumerate(goals):
        draw = (edges[i] + edges[i + 1]) / 2  # inside goal i's share of the belief
        assert walk(size, goals, weights, draw, order) == goal
    # the actions' own order does not walk to one goal: some draws end elsewhere than their quantile's goal
    missed = [g for i, g in enumerate(goals) if walk(size, goals, weights, (edges[i] + edges[i + 1]) / 2, None) != g]
    assert missed


def tiny_model(**extra) -> ADTransformer:
    cfg = ADConfig(**{**dict(n_layer=1, n_head=2, n_embd=16, n_ff=32, context=12, num_states=9, num_actions=5,
                             episode_length=4), **extra})
    torch.manual_seed(0)
    return ADTransformer(cfg).double()


def run_episodes(policy: ADPolicy, envs: int, steps: int, box: bool = False) -> list[torch.Tensor]:
    """Acts ``steps`` steps in ``envs`` lockstep envs of 4-step episodes; the actions of each step."""
    policy.reset(envs)
    out = []
    prev = torch.zeros(envs, 2, dtype=torch.float64) if box else torch.zeros(envs, dtype=torch.long)
    for t in range(steps):
        step = torch.full((envs,), t % 4)
        actions = policy.act(torch.full((envs,), t % 9), prev, torch.zeros(envs), step,
                             torch.full((envs,), t == 0))
        out.append(actions)
        prev = actions
    return out


def test_the_policy_picks_each_action_of_an_episode_by_that_episodes_draw():
    model = tiny_model()
    order = (1, 4, 0, 2, 3)
    policy = ADPolicy(model, greedy=False, generator=torch.Generator().manual_seed(5), sampling="episode",
                      action_order=order)
    twin = ADPolicy(model, greedy=False)  # the same model's logits, to replay the choice
    twin.reset(6)
    expected_draws = EpisodeDraws(torch.Generator().manual_seed(5))
    acted = run_episodes(policy, 6, 8)
    prev = torch.zeros(6, dtype=torch.long)
    for t, actions in enumerate(acted):
        step = torch.full((6,), t % 4)
        logits = twin.logits(torch.full((6,), t % 9), prev, torch.zeros(6), step, torch.full((6,), t == 0))
        draws = expected_draws.at(step)
        assert torch.equal(actions, choose_at_draws(logits, draws, order=torch.tensor(order)))
        prev = actions
    assert policy.last_logprob.shape == (6,) and bool((policy.last_logprob <= 0).all())
    assert bool((policy.last_logprob > -30).all())  # finite: the probability given the episode's earlier actions
    with pytest.raises(ValueError, match="each of the model's 5 actions"):
        ADPolicy(model, sampling="episode", action_order=(0, 1, 2))
    with pytest.raises(ValueError, match="sampling"):
        ADPolicy(model, sampling="per-token")


def test_box_heads_take_one_draw_per_dimension():
    gaussian = BoxActions([-1.0, -1.0], [1.0, 1.0], "gaussian")
    params = torch.tensor([[0.3, -0.2, -1.0, -0.5]])
    mean, log_std = gaussian.gaussian(params)
    at_median = gaussian.choose(params, False, draws=torch.tensor([[0.5, 0.5]]))
    torch.testing.assert_close(at_median, torch.tanh(mean))  # the normal quantile of 0.5 is 0
    high = gaussian.choose(params, False, draws=torch.tensor([[0.8413447, 0.5]]))  # one std above on dimension 0
    torch.testing.assert_close(high[0, 0], torch.tanh(mean[0, 0] + log_std[0, 0].exp()), atol=1e-5, rtol=0)
    bins = BoxActions([-1.0], [1.0], "bins", bins=3)
    logits = torch.log(torch.tensor([[0.2, 0.3, 0.5]]))
    assert bins.choose(logits, False, draws=torch.tensor([[0.1]])).tolist() == [[-1.0]]
    assert bins.choose(logits, False, draws=torch.tensor([[0.6]])).tolist() == [[1.0]]
    model = tiny_model(num_actions=0, action_dim=2, action_low=[-1.0, -1.0], action_high=[1.0, 1.0],
                       action_head="gaussian")
    acted = run_episodes(ADPolicy(model, greedy=False, sampling="episode"), 3, 8, box=True)
    assert all(a.shape == (3, 2) for a in acted)


def test_demo_folders_of_the_rules_sit_side_by_side():
    assert eval_folder_name() == "eval"
    assert eval_folder_name(sampling="episode") == "eval-sampling-episode"
    assert eval_folder_name(2.0, "episode") == "eval-temperature-2-sampling-episode"
    assert eval_folder_name(2.0) == "eval-temperature-2"


def test_greedy_with_episode_draws_is_refused():
    from ad.commands.evaluate import EvalConfig

    with pytest.raises(UserError, match="--greedy takes no sampling, so --sampling episode"):
        EvalConfig(data="x", greedy=True, sampling="episode")
    done = subprocess.run([sys.executable, "-m", "ad", "eval", "--data", "x", "--sampling", "per-token"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "--sampling" in done.stderr and "Traceback" not in done.stderr


def test_a_language_model_refuses_episode_draws(tmp_path):
    from models.lm.loader import load

    with pytest.raises(UserError, match="language model.*--sampling episode"):
        load(tmp_path, sampling="episode")


def test_ad_eval_gives_the_policy_its_familys_order_and_records_the_rule(tmp_path):
    from ad import registry
    from ad.commands.evaluate import sampling_options
    from ad.config import make_config

    assert sampling_options("step", "darkroom") == {}  # the default: the loaders' options as before the rule
    assert sampling_options("episode", "darkroom") == {"sampling": "episode", "action_order": ROWS_FIRST_ORDER}
    assert sampling_options("episode", "keydoor")["action_order"] == ROWS_FIRST_ORDER
    assert sampling_options("episode", "bandit")["action_order"] is None  # the arms' own order
    generate = registry.get("generate", "darkroom")
    generate.run(make_config(generate.config_cls, dict(
        out=str(tmp_path / "data"), size=3, episode_length=6, steps_per_goal=600, preset="fast",
        heldout_fraction=0.25, progress=False, plots=False, tensorboard=False)))
    train = registry.get("train", "rl")
    train.run(make_config(train.config_cls, dict(
        data=str(tmp_path / "data"), out=str(tmp_path / "dpt"), objective="dpt", context=12, max_steps=10,
        batch_size=4, n_layer=1, n_embd=16, n_ff=32, n_head=2, warmup_steps=2, val_every=0, progress=False,
        threads=1)))
    done = subprocess.run([sys.executable, "-m", "ad", "eval", "--ckpt", str(tmp_path / "dpt"), "--data",
                           str(tmp_path / "data"), "--episodes", "3", "--seeds", "2", "--sampling", "episode",
                           "--progress", "false", "--out", str(tmp_path / "eval"), "--record", str(tmp_path / "own")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert summary["sampling"] == "episode"
    assert np.array(summary["policies"]["AD"]["returns"]).shape == (len(summary["tasks"]), 2, 3)
    for stream in HistoryReader(tmp_path / "own").streams():  # the runs recorded with their paths' probabilities
        logprob = stream.columns["logprob"]
        assert len(logprob) == 3 * 6 and np.isfinite(logprob).all() and (logprob <= 1e-6).all()
