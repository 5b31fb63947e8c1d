"""Pictures of a DarkRoom generation run: learning curves (PNG) and greedy-policy rollouts (GIF)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ad.files import atomic_path
from tasks.darkroom.env import DarkRoomEnv


def plot_learning_curves(path: Path, steps: np.ndarray, curves: np.ndarray, optimum: np.ndarray,
                         labels: list[str]) -> None:
    """Mean episode return vs env steps per goal, divided by each goal's optimum.

    Args:
        steps: ``(P,)`` env steps per goal at each point.
        curves: ``(P, G)`` mean return of the episodes finished in each bin.
        optimum: ``(G,)`` optimal return of each goal.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratio = curves / np.maximum(optimum, 1e-9)[None, :]  # (P, G)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    ax.plot(steps, ratio, color="tab:blue", alpha=0.15, linewidth=0.8)
    ax.plot(steps, np.nanmean(ratio, axis=1), color="tab:blue", linewidth=2.0, label=f"mean of {len(labels)} goals")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1.0, label="optimal")
    ax.axhline(0.9, color="gray", linestyle=":", linewidth=1.0, label="90% of optimal")
    ax.set_xlabel("env steps per goal")
    ax.set_ylabel("episode return / optimal return")
    ax.set_title("A2C learning curves on DarkRoom (one agent per goal)")
    ax.set_ylim(0, 1.1)
    ax.legend(loc="lower right")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp)
    plt.close(fig)


def greedy_policy_gif(path: Path, size: int, goals: list[tuple[int, int]], greedy: np.ndarray,
                      episode_length: int, terminate_on_goal: bool, cell_px: int = 24) -> None:
    """Animate one episode of each goal's greedy policy side by side (green agent, red goal, yellow = reached).

    Args:
        goals: goal cells to show.
        greedy: ``(len(goals), S)`` greedy action per cell for each of those goals.
    """
    from PIL import Image

    panels = []  # per goal: list of (size, size, 3) frames
    for goal, actions in zip(goals, greedy):
        env = DarkRoomEnv(size=size, goal=goal, terminate_on_goal=terminate_on_goal, render_mode="rgb_array")
        obs, _ = env.reset(seed=0)
        frames = [env.render()]
        for _ in range(episode_length):
            obs, reward, terminated, _, _ = env.step(int(actions[obs]))
            frames.append(env.render())
            if reward:
                frames[-1][goal[0], goal[1]] = (255, 200, 0)  # agent on the goal: yellow
            if terminated:
                break
        panels.append(frames)
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
