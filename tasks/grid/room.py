"""The dark room both grid families walk: its moves, start cell, shortest paths, the seeded task split, and a
natively vectorised env over (tasks x parallel envs) whose reward and task draw each family supplies.

The agent sees only its cell index ``row * size + col``. Actions: 0 noop, 1 up (row-1), 2 right (col+1), 3 down
(row+1), 4 left (col-1); moves are clipped at the walls. Episodes start in the centre, or in a uniformly random cell.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ad.errors import UserError
from tasks import sub_env_generators

#: (row, col) offset of each action: 0 noop, 1 up, 2 right, 3 down, 4 left.
ACTION_DELTAS = np.array([[0, 0], [-1, 0], [0, 1], [1, 0], [0, -1]], dtype=np.int64)
NUM_ACTIONS = len(ACTION_DELTAS)
ACTION_NAMES = ("noop", "up", "right", "down", "left")
#: Largest supported room side: tasks grow as size^2 and each agent's tables as size^2 too.
MAX_SIZE = 32


def check_size(size: int, room: str = "DarkRoom") -> None:
    """UserError unless ``size`` is a usable grid size (2 .. MAX_SIZE), naming the family's ``room``."""
    if int(size) < 2:
        raise UserError(f"{room} --size must be at least 2 (a {size}x{size} grid has no goal besides the start); "
                        "pass --size 2 or more")
    if int(size) > MAX_SIZE:
        raise UserError(f"{room} --size {size} is too large: at most {MAX_SIZE} (a {size}x{size} room has "
                        f"{int(size) ** 2 - 1} goals, each trained by its own agent); pass --size {MAX_SIZE} or less")


def start_cell(size: int) -> tuple[int, int]:
    """The fixed start cell: the centre (size//2, size//2)."""
    return size // 2, size // 2


def split_goals(goals: list[tuple[int, ...]], heldout_fraction: float, seed: int
                ) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Deterministic train / held-out split of a family's tasks: a seeded permutation, the first ``round(f * n)``
    held out (at least one task stays in train); both lists in the input order."""
    n = len(goals)
    n_heldout = min(int(round(heldout_fraction * n)), n - 1) if n > 1 else 0
    order = np.random.default_rng(seed).permutation(n)
    held = set(order[:n_heldout].tolist())
    return [g for i, g in enumerate(goals) if i not in held], [g for i, g in enumerate(goals) if i in held]


def transition_table(size: int) -> np.ndarray:
    """``next_cell[s, a]``: the cell index reached from cell ``s`` with action ``a`` (moves clipped at walls)."""
    rows, cols = np.divmod(np.arange(size * size), size)  # (S,), (S,)
    new_rows = np.clip(rows[:, None] + ACTION_DELTAS[None, :, 0], 0, size - 1)  # (S, A)
    new_cols = np.clip(cols[:, None] + ACTION_DELTAS[None, :, 1], 0, size - 1)  # (S, A)
    return new_rows * size + new_cols


def shortest_path_actions(size: int, target_cell: int) -> np.ndarray:
    """``action[s]`` ``(size * size,)`` int64: an action on a shortest (Manhattan: no walls inside) path from cell ``s``
    to ``target_cell``, rows first, then columns; noop on the target itself."""
    rows, cols = np.divmod(np.arange(size * size), size)  # (S,), (S,)
    t_row, t_col = divmod(int(target_cell), size)
    action = np.zeros(size * size, dtype=np.int64)  # noop on the target
    action[cols < t_col] = 2  # right
    action[cols > t_col] = 4  # left
    action[rows < t_row] = 3  # down
    action[rows > t_row] = 1  # up
    return action


#: The actions in the order in which :func:`shortest_path_actions` lists the target cells: a target in an earlier row
#: is reached by going up, then in the same row by going left, the cell itself by noop, then right, then (later
#: rows) down. Cells taken row by row, and a policy's probabilities of the optimal action summed in this order, agree:
#: one uniform draw falls in the same cell's share at every step of the walk to it (``ad eval --sampling episode``).
ROWS_FIRST_ORDER = (1, 4, 0, 2, 3)


class GridEnv(gym.Env):
    """One task in the room (gymnasium ``Env``): the walk, the start cell and the picture's floor; the episode length
    comes from gymnasium's ``TimeLimit``. A family supplies its task draw (:meth:`_new_episode`), its reward
    (:meth:`_reward`) and its cells in the picture (:meth:`_paint`)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, size: int, random_start: bool = False, render_mode: str | None = None):
        self.size = int(size)
        self.random_start = bool(random_start)
        self.render_mode = render_mode
        self.observation_space = spaces.Discrete(self.size * self.size)
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        self._next_cell = transition_table(self.size)  # (S, A)
        self.cell = -1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._new_episode()
        if self.random_start:
            row, col = self.np_random.integers(0, self.size, size=2)
        else:
            row, col = start_cell(self.size)
        self.cell = int(row) * self.size + int(col)
        return self.cell, self._info()

    def step(self, action):
        assert self.cell >= 0, "call reset() before step()"
        self.cell = int(self._next_cell[self.cell, int(action)])
        reward, terminated = self._reward()
        return self.cell, reward, terminated, False, self._info()

    def render(self):
        """An RGB image (size, size, 3): white floor, the family's cells, green agent."""
        if self.render_mode != "rgb_array":
            return None
        grid = np.full((self.size, self.size, 3), 255, dtype=np.uint8)
        self._paint(grid)
        row, col = divmod(self.cell, self.size)
        grid[row, col] = (0, 255, 0)
        return grid

    # ------------------------------------------------------------------ the family's hooks
    def _new_episode(self) -> None:
        """Before the start cell is drawn: draw the task where none is fixed (from ``self.np_random``)."""

    def _reward(self) -> tuple[float, bool]:
        """Reward and termination of the move just made (``self.cell`` is new)."""
        raise NotImplementedError

    def _info(self) -> dict[str, Any]:
        return {}

    def _paint(self, grid: np.ndarray) -> None:
        """Draw the task's cells on the (size, size, 3) floor."""


class GridVectorEnv(VectorEnv):
    """``len(goals) * envs_per_goal`` sub-envs of one room, goal-major (sub-env i -> goal i // envs_per_goal).

    Gymnasium ``VectorEnv`` conventions: batched spaces, ``SAME_STEP`` autoreset (a finished sub-env's last observation
    is in ``infos["final_obs"]``), ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i``. One step is a table lookup for
    all sub-envs; with ``goals=None`` every sub-env draws its task at every reset (:meth:`_draw_tasks`). A family
    supplies its reward (:meth:`_rewards`) and task draw, and may extend :meth:`_observe` and :meth:`_restart`.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
    #: The family's room, named in a bad --size's message.
    room = "DarkRoom"

    def __init__(self, goals: Sequence[tuple[int, int]] | None, envs_per_goal: int = 1, size: int = 9,
                 episode_length: int = 20, random_start: bool = False, terminate_on_goal: bool = False):
        """``goals=None``: ``envs_per_goal`` sub-envs, each drawing its goal at every reset."""
        check_size(size, self.room)
        self.size = int(size)
        self.random_goals = goals is None
        if self.random_goals:  # one row per sub-env, filled at every reset
            goals, envs_per_goal = np.zeros((int(envs_per_goal), 2), dtype=np.int64), 1
        self.goals = np.asarray(goals, dtype=np.int64).reshape(-1, 2)  # (G, 2)
        self.envs_per_goal = int(envs_per_goal)
        self.num_envs = len(self.goals) * self.envs_per_goal
        self.episode_length = int(episode_length)
        self.random_start = bool(random_start)
        self.terminate_on_goal = bool(terminate_on_goal)

        self.single_observation_space = spaces.Discrete(self.size * self.size)
        self.single_action_space = spaces.Discrete(NUM_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        self._next_cell = transition_table(self.size)  # (S, A)
        goal_cells = self.goals[:, 0] * self.size + self.goals[:, 1]  # (G,)
        self.goal_cell = np.repeat(goal_cells, self.envs_per_goal)  # (E,)
        row, col = start_cell(self.size)
        self._start = row * self.size + col
        self.cell = np.full(self.num_envs, self._start, dtype=np.int64)  # (E,) current observation
        self.elapsed = np.zeros(self.num_envs, dtype=np.int64)  # (E,) steps taken in the current episode
        self.episode = np.zeros(self.num_envs, dtype=np.int64)  # (E,) index of the current episode
        self._rngs: list[np.random.Generator] | None = None

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env; episode counters restart at 0."""
        if seed is not None or self._rngs is None:
            self._rngs = sub_env_generators(seed, self.num_envs)
        self.elapsed[:] = 0
        self.episode[:] = 0
        self._restart(np.arange(self.num_envs))
        return self._observe(), {}

    def step(self, actions):
        """Move every sub-env; finished ones are reset in the same call (SAME_STEP autoreset)."""
        actions = np.asarray(actions, dtype=np.int64)
        self.cell = self._next_cell[self.cell, actions]  # (E,)
        rewards, terminations = self._rewards()  # (E,), (E,)
        self.elapsed += 1
        truncations = self.elapsed >= self.episode_length  # (E,) like TimeLimit: may be True with terminated
        done = terminations | truncations
        infos: dict[str, Any] = {}
        if done.any():
            infos["final_obs"] = self._observe()
            infos["_final_obs"] = done
            idx = np.flatnonzero(done)
            self._restart(idx)
            self.elapsed[idx] = 0
            self.episode[idx] += 1
        return self._observe(), rewards, terminations, truncations, infos

    # ------------------------------------------------------------------ the family's hooks
    def _rewards(self) -> tuple[np.ndarray, np.ndarray]:
        """Rewards ``(E,)`` float32 and terminations ``(E,)`` bool of the move just made (``self.cell`` is new)."""
        raise NotImplementedError

    def _draw_tasks(self, idx: np.ndarray) -> None:
        """New tasks for the sub-envs ``idx`` (``goals=None``), each drawn as the family's single env draws it."""
        raise NotImplementedError

    def _observe(self) -> np.ndarray:
        """The observation of every sub-env ``(E,)`` (a copy): its cell."""
        return self.cell.copy()

    def _restart(self, idx: np.ndarray) -> None:
        """Put the sub-envs ``idx`` at the start of a new episode: the centre, or a cell drawn from each sub-env's own
        generator (cells only; counters are the caller's)."""
        if self.random_goals:
            self._draw_tasks(idx)
        if not self.random_start:
            self.cell[idx] = self._start
            return
        for i in idx:  # one draw per finished sub-env
            row, col = self._rngs[i].integers(0, self.size, size=2)
            self.cell[i] = int(row) * self.size + int(col)


def room_tasks(metadata: dict[str, Any], tasks: Sequence[str],
               parse: Callable[[str], tuple[int, Any]]) -> tuple[dict[str, Any], int, list[Any]]:
    """(task_spec, room size, each task's parameter) of a grid dataset's tasks, ``parse(name) -> (size, parameter)``
    reading a task id; a UserError for a task of another room size than the dataset's."""
    spec = metadata.get("task_spec", {})
    size = int(spec.get("size", 9))
    params = []
    for name in tasks:
        task_size, param = parse(name)
        if task_size != size:
            raise UserError(f"task {name} is for a {task_size}x{task_size} room but the dataset's is {size}x{size}")
        params.append(param)
    return spec, size, params
