"""DarkRoom's optimal actions (the family contract's ``optimal_actions``): a shortest-path action to the goal; and
their expectation over the goals a window of history allows (the contract's ``posterior_action_probs``)."""
from __future__ import annotations

import functools

import numpy as np

from tasks.darkroom.goals import parse_task_name
from tasks.grid.room import NUM_ACTIONS, shortest_path_actions, start_cell, transition_table


def optimal_actions(metadata: dict, task: str, stream: dict) -> np.ndarray:
    """The optimal action (T,) int64 at each row of one stream of ``task``: a step on a shortest path from the
    row's cell to the goal, noop on the goal itself (staying there is rewarded every step, or ends the episode
    with ``terminate_on_goal``). ``metadata`` is unused: the task name fixes the room and the goal."""
    size, (row, col) = parse_task_name(task)
    table = shortest_path_actions(size, row * size + col)  # (S,)
    return table[np.asarray(stream["state"], dtype=np.int64)]


@functools.lru_cache(maxsize=8)
def first_step_table(size: int) -> np.ndarray:
    """``table[s, g]`` (S, S) int64: :func:`tasks.grid.room.shortest_path_actions`' action from cell ``s`` towards
    cell ``g`` (noop where ``s == g``). Cached: read-only."""
    table = np.stack([shortest_path_actions(size, g) for g in range(size * size)], axis=1)
    table.setflags(write=False)
    return table


def posterior_action_probs(metadata: dict, batch: dict) -> np.ndarray:
    """The probability (B, T, A) float32 that each action is optimal at each row of a batch of windows, the goal
    drawn uniformly from the family's goals (every cell but the centre) and conditioned on the window's rows before
    it: once a row before it was rewarded, the goal is the cell that row stepped onto, and the shortest-path action to
    it has probability 1; before that, the goal is any cell no earlier row of the window stepped onto, each equally
    likely, and an action's probability is the share of those cells whose shortest path from the row's cell starts
    with it (:func:`tasks.grid.room.shortest_path_actions`). The window's own goal is never read: this is the
    expectation of :func:`optimal_actions` over every goal the window allows. ``metadata`` is the dataset's (its
    ``task_spec`` gives the room's side); ``batch`` holds the windows' ``states``, ``actions``, ``rewards`` (B, T)."""
    size = int(metadata["task_spec"]["size"])
    cells = size * size
    states = np.asarray(batch["states"], dtype=np.int64)  # (B, T)
    actions = np.asarray(batch["actions"], dtype=np.int64)  # (B, T)
    rewarded = np.asarray(batch["rewards"]) > 0  # (B, T)
    B, T = states.shape
    stepped = transition_table(size)[states, actions]  # (B, T): the cell each row stepped onto
    # cells stepped onto by the rows before each row (B, T, S): an inclusive running OR, shifted by one row
    onto = np.zeros((B, T, cells), dtype=bool)
    onto[np.arange(B)[:, None], np.arange(T)[None, :], stepped] = True
    before = np.zeros_like(onto)
    before[:, 1:] = np.logical_or.accumulate(onto, axis=1)[:, :-1]
    prior = np.ones(cells, dtype=bool)
    prior[np.ravel_multi_index(start_cell(size), (size, size))] = False  # the family's goals: every cell but the start
    candidates = prior[None, None, :] & ~before  # (B, T, S)
    first_steps = first_step_table(size)  # (S from, S goal)
    step = first_steps[states]  # (B, T, S): the first action from each row's cell towards each goal cell
    probs = np.stack([(candidates & (step == a)).sum(-1) for a in range(NUM_ACTIONS)], axis=-1).astype(np.float32)
    probs /= np.maximum(probs.sum(-1, keepdims=True), 1.0)  # (B, T, A); a window that excludes every goal: all 0
    # rows after a rewarded row: the goal is the cell that row stepped onto
    last = np.maximum.accumulate(np.where(rewarded, np.arange(T)[None, :], -1), axis=1)  # (B, T) inclusive
    found = np.full((B, T), -1, dtype=np.int64)
    found[:, 1:] = last[:, :-1]  # (B, T): the last rewarded row before each row, -1 if none
    known = found >= 0
    goal = np.take_along_axis(stepped, np.maximum(found, 0), axis=1)  # (B, T)
    probs[known] = np.eye(NUM_ACTIONS, dtype=np.float32)[first_steps[states[known], goal[known]]]
    return probs
