"""Dark Key-to-Door's optimal actions (the family contract's ``optimal_actions``): to the key, then to the door."""
from __future__ import annotations

import numpy as np

from tasks.grid.room import shortest_path_actions
from tasks.keydoor.pairs import parse_task_name


def key_carried(stream: dict) -> np.ndarray:
    """Whether the key is carried before each row's action, (T,) bool: some earlier row of the same episode was
    rewarded (the first reward of an episode is the key's; the door's ends the episode). This is what the agent
    itself can know: it observes its cell only."""
    reward = np.asarray(stream["reward"], dtype=np.float64)
    episode = np.asarray(stream["episode"])
    total = np.cumsum(reward) - reward  # (T,) reward of every earlier row
    starts = np.flatnonzero(np.r_[True, episode[1:] != episode[:-1]])  # (E,) first row of each episode
    lengths = np.diff(np.r_[starts, len(episode)])  # (E,)
    before_episode = np.repeat(total[starts], lengths)  # (T,) reward of the rows before the row's episode
    return total - before_episode > 0


def optimal_actions(metadata: dict, task: str, stream: dict) -> np.ndarray:
    """The optimal action (T,) int64 at each row of one stream of ``task``: a shortest-path step to the key
    until it is carried (noop on the key when the episode starts there: staying picks it up), then to the door.
    ``metadata`` is unused: the task name fixes the room, the key and the door."""
    size, (kr, kc, dr, dc) = parse_task_name(task)
    to_key = shortest_path_actions(size, kr * size + kc)  # (S,)
    to_door = shortest_path_actions(size, dr * size + dc)  # (S,)
    cell = np.asarray(stream["state"], dtype=np.int64)
    return np.where(key_carried(stream), to_door[cell], to_key[cell])
