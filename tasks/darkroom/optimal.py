"""DarkRoom's optimal actions (the family contract's ``optimal_actions``): a shortest-path action to the goal."""
from __future__ import annotations

import numpy as np

from tasks.darkroom.goals import parse_task_name
from tasks.grid.room import shortest_path_actions


def optimal_actions(metadata: dict, task: str, stream: dict) -> np.ndarray:
    """The optimal action (T,) int64 at each row of one stream of ``task``: a step on a shortest path from the
    row's cell to the goal, noop on the goal itself (staying there is rewarded every step, or ends the episode
    with ``terminate_on_goal``). ``metadata`` is unused: the task name fixes the room and the goal."""
    size, (row, col) = parse_task_name(task)
    table = shortest_path_actions(size, row * size + col)  # (S,)
    return table[np.asarray(stream["state"], dtype=np.int64)]
