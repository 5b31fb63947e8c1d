"""The family contract's ``optimal_actions`` (DarkRoom, Key-to-Door, bandits): shortest paths, the key read from the
episode so far, the best arm; and, on real generated histories, that acting on them from a reset reaches the
optimal return in each family's own evaluation env."""
import contextlib
import io

import numpy as np
import pytest

from ad import registry
from ad.config import make_config
from ad.errors import UserError
from ad.evaluate import run_in_context
from ad.history import HistoryReader
from tasks.grid.room import shortest_path_actions, transition_table
from tasks.keydoor.optimal import key_carried

#: tiny `ad generate` options per family (seconds each)
TINY = {"darkroom": {"size": 3, "source": "explorer", "steps_per_goal": 300, "num_envs": 2, "progress": False,
                     "plots": False, "tensorboard": False},
        "keydoor": {"size": 3, "tasks": 6, "steps_per_task": 600, "episode_length": 12, "hidden": 16,
                    "heldout_fraction": 0.34, "progress": False},
        "bandit": {"instances": 12, "pulls": 30, "heldout_fraction": 0.25, "progress": False}}


@pytest.fixture(scope="module", params=sorted(TINY))
def dataset(request, tmp_path_factory):
    family = request.param
    command = registry.get("generate", family)
    out = tmp_path_factory.mktemp(family) / "data"
    with contextlib.redirect_stdout(io.StringIO()):
        command.run(make_config(command.config_cls, {"out": str(out), "seed": 1, **TINY[family]}))
    return family, HistoryReader(out)


def test_shortest_path_actions_reach_the_target_in_manhattan_distance():
    size = 5
    step = transition_table(size)  # (S, A)
    for target in range(size * size):
        action = shortest_path_actions(size, target)
        assert action.shape == (size * size,) and action.dtype == np.int64 and action[target] == 0
        for start in range(size * size):
            cell, moves = start, 0
            while cell != target:
                cell, moves = step[cell, action[cell]], moves + 1
            distance = abs(start // size - target // size) + abs(start % size - target % size)
            assert moves == distance, (start, target)


def test_the_key_is_carried_after_a_reward_earlier_in_the_same_episode():
    stream = {"reward": np.array([0, 1, 0, 0, 1, 0, 0, 1, 0], np.float32),
              "episode": np.array([0, 0, 0, 0, 0, 1, 1, 1, 2])}
    assert key_carried(stream).tolist() == [False, False, True, True, True, False, False, False, False]


def test_keydoor_heads_for_the_key_then_the_door():
    fn = registry.optimal_actions("keydoor")
    # 3x3 room, key (0, 0) = cell 0, door (2, 2) = cell 8; start in the centre (cell 4)
    stream = {"state": np.array([4, 1, 0, 3, 4]), "reward": np.array([0, 1, 0, 0, 0], np.float32),
              "episode": np.array([0, 0, 0, 0, 1]), "action": np.zeros(5, np.int64), "step": np.zeros(5)}
    got = fn({}, "keydoor3-k0-0-d2-2", stream)
    assert got.tolist() == [1, 4, 3, 3, 1]  # up, left (onto the key: rewarded) | carried: down, down | new episode: up


def test_bandit_best_arm_and_darkroom_goal():
    from tasks.bandit.instances import arm_means

    best = int(np.argmax(arm_means("bernoulli", 5, 7)))
    got = registry.optimal_actions("bandit")({}, "bandit-bern5-i00007", {"state": np.zeros(4, np.int64)})
    assert got.tolist() == [best] * 4 and got.dtype == np.int64
    room = registry.optimal_actions("darkroom")({}, "darkroom3-g0-2", {"state": np.array([4, 1, 2, 5])})
    assert room.tolist() == [1, 2, 0, 1]  # centre: up first (rows first), then right, noop on the goal


def test_a_family_without_optimal_actions_is_a_user_error():
    with pytest.raises(UserError, match="does not provide"):
        registry.optimal_actions("no-such-family", "--objective dpt")


class OptimalPolicy:
    """Acts by calling the family's optimal_actions on each env's stream so far (the rows it has seen), the way
    the training windows get their targets."""

    def __init__(self, fn, metadata, tasks, envs_per_task):
        self.fn, self.metadata = fn, metadata
        self.tasks = [t for t in tasks for _ in range(envs_per_task)]

    def reset(self, num_envs):
        self.rows = [{"state": [], "action": [], "reward": [], "episode": [], "step": []} for _ in range(num_envs)]

    def act(self, obs, prev_action, prev_reward, timestep, first):
        actions = []
        for i, rows in enumerate(self.rows):
            if rows["state"]:  # complete the previous row
                rows["action"][-1], rows["reward"][-1] = int(prev_action[i]), float(prev_reward[i])
            new_episode = bool(first[i]) or int(timestep[i]) == 0
            episode = (rows["episode"][-1] + new_episode) if rows["episode"] else 0
            for key, value in (("state", np.asarray(obs[i]).tolist()), ("action", 0), ("reward", 0.0),
                               ("episode", episode), ("step", int(timestep[i]))):
                rows[key].append(value)
            stream = {key: np.asarray(value) for key, value in rows.items()}
            actions.append(int(self.fn(self.metadata, self.tasks[i], stream)[-1]))
        return np.asarray(actions)


def test_optimal_actions_on_real_histories_reach_the_optimal_return(dataset):
    family, reader = dataset
    fn = registry.optimal_actions(family)
    meta = reader.metadata
    for stream in reader.streams():  # the targets of real training windows: one valid action per row
        got = fn(meta, stream.task, stream.columns)
        assert got.shape == (len(stream.columns["state"]),) and got.dtype == np.int64
        assert got.min() >= 0 and got.max() < reader.spec.action.n
    tasks = meta["split"]["heldout"]
    setup = registry.env_factory(family)(meta, tasks, 2)
    episodes = 3
    result = run_in_context(OptimalPolicy(fn, meta, tasks, 2), setup, episodes, seed=0, progress=False)
    if family == "bandit":  # one pull per episode: the best arm every time, zero expected regret
        assert np.allclose(setup.env.regret(), 0.0)
    else:
        assert np.allclose(result.returns, setup.optimal[:, None, None]), result.returns.mean(axis=(1, 2))
