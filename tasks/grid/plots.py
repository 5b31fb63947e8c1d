"""Pictures of a grid generation run: learning curves (PNG) and greedy-policy rollouts (GIF)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ad.files import atomic_path
from tasks.grid.room import GridVectorEnv


def plot_learning_curves(path: Path, steps: np.ndarray, curves: np.ndarray, optimum: np.ndarray,
                         labels: list[str], room: str = "DarkRoom") -> None:
    """Mean episode return vs env steps per goal, divided by each goal's optimum (``room`` names the family):
    ``steps`` ``(P,)`` env steps per goal at each point, ``curves`` ``(P, G)`` mean return of the episodes finished in
    each bin, ``optimum`` ``(G,)``."""
    from ad.plots import pyplot, save_figure

    ratio = curves / np.maximum(optimum, 1e-9)[None, :]  # (P, G)
    fig, ax = pyplot().subplots(figsize=(7, 4), dpi=120)
    ax.plot(steps, ratio, color="tab:blue", alpha=0.15, linewidth=0.8)
    ax.plot(steps, np.nanmean(ratio, axis=1), color="tab:blue", linewidth=2.0, label=f"mean of {len(labels)} goals")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1.0, label="optimal")
    ax.axhline(0.9, color="gray", linestyle=":", linewidth=1.0, label="90% of optimal")
    ax.set(xlabel="env steps per goal", ylabel="episode return / optimal return", ylim=(0, 1.1),
           title=f"A2C learning curves on {room} (one agent per task)")
    ax.legend(loc="lower right")
    save_figure(fig, path, dpi=120)


def greedy_policy_gif(path: Path, env: GridVectorEnv, greedy: np.ndarray, cell_px: int = 24) -> None:
    """Animate one episode of each goal's greedy policy side by side (green agent, red goal, yellow = reached):
    ``env`` has one sub-env per goal shown, ``greedy`` ``(num_envs, states)`` the greedy action per observation."""
    from PIL import Image

    size, n = env.size, env.num_envs
    obs, _ = env.reset(seed=0)
    panels = [[_frame(size, int(env.goal_cell[i]), int(obs[i]), False)] for i in range(n)]  # (size, size, 3) each
    live = np.ones(n, dtype=bool)
    for _ in range(env.episode_length):
        obs, reward, terminated, truncated, info = env.step(greedy[np.arange(n), obs])
        cell = np.where(info.get("_final_obs", np.zeros(n, bool)), info.get("final_obs", obs), obs)  # before a reset
        for i in np.flatnonzero(live):
            panels[i].append(_frame(size, int(env.goal_cell[i]), int(cell[i]), bool(reward[i])))
        live &= ~terminated
        if not live.any():
            break
    length = max(len(f) for f in panels)
    gap = np.full((size * cell_px, cell_px // 2, 3), 40, dtype=np.uint8)
    images = []
    for i in range(length):
        tiles = []
        for frames in panels:
            frame = frames[min(i, len(frames) - 1)]  # (size, size, 3)
            big = frame.repeat(cell_px, axis=0).repeat(cell_px, axis=1)  # (size*px, size*px, 3)
            big[::cell_px, :] = 200  # grid lines
            big[:, ::cell_px] = 200
            tiles += [big, gap]
        images.append(Image.fromarray(np.concatenate(tiles[:-1], axis=1)))
    with atomic_path(path) as tmp:
        images[0].save(tmp, save_all=True, append_images=images[1:], duration=250, loop=0)


def _frame(size: int, goal: int, cell: int, reached: bool) -> np.ndarray:
    """One picture (size, size, 3) of the room: white floor, red goal, green agent (yellow on the goal, rewarded)."""
    grid = np.full((size, size, 3), 255, dtype=np.uint8)
    grid[divmod(goal, size)] = (255, 0, 0)
    grid[divmod(cell, size)] = (0, 255, 0)
    if reached:
        grid[divmod(goal, size)] = (255, 200, 0)
    return grid
