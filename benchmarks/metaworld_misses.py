"""Meta-World ML1 reach: how close AD's failed episodes come to the goal. An episode succeeds when the fingertips come
within 5 cm of the hidden goal (Meta-World's reach success radius); this runs each seed's trained AD on the held-out
goals exactly as ``ad eval`` does (the same seed, sampled actions, one env a goal) and records, per episode, the
fingertips' closest approach to the goal.

If AD's failed episodes end far from the goal, AD searched in the wrong place; if most come within a few
centimetres of the 5 cm radius, it went back to the right place and missed it by a little. Each failed episode is
also split by whether AD had succeeded on that goal in an earlier episode: a failure after a success is a failed
return to a place AD had found; one without is a goal AD had not found yet.

    python benchmarks/metaworld_misses.py --config configs/metaworld/misses_search_gaussian_36k_history_starts_16_runs.yaml
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import earlier_seed_figures, fail, figure, merge_report, parse_args  # noqa: E402

CAPABILITY = "Meta-World ML1 in context"
#: Meta-World's reach success radius (m): success is the hand within this distance of the goal.
SUCCESS_RADIUS = 0.05
#: A near miss: a failed episode whose closest approach is within this distance (m) of the goal.
NEAR = 0.075


class ClosestApproach:
    """A recorder for :func:`ad.evaluate.run_in_context`: after every counted step, each env's distance from the
    fingertips' centre (Meta-World's ``tcp_center``, what its reach success measures; the observation's hand position
    is the end effector, about 4.5 cm above it) to the goal, kept as the closest of its episode. An episode's last
    step is not seen (the vector env has already reset that sub-env)."""

    def __init__(self, env: Any, num_envs: int, episodes: int):
        self.env = env
        self.closest = np.full((num_envs, episodes), np.inf)  # (E, episodes) metres

    def step(self, live, episode, step, state, actions, rewards, terminated, truncated, logprob) -> None:
        tcp = np.stack([sub.mw_env.tcp_center for sub in self.env.envs])  # (E, 3)
        goal = np.asarray(self.env.expert_observations())[:, -3:]  # (E, 3): the goal, last in the full observation
        distance = np.linalg.norm(tcp - goal, axis=1)  # (E,)
        rows = np.flatnonzero(live)
        self.closest[rows, episode[rows]] = np.minimum(self.closest[rows, episode[rows]], distance[rows])


def run_folder(folder: Path, episodes: int, seed: int) -> dict[str, Any]:
    """AD of one ``ad demo --task metaworld`` run folder on its held-out goals: success and closest approach per goal
    and episode."""
    from ad.commands.evaluate import pick_tasks
    from ad.evaluate import run_in_context
    from ad.history import HistoryReader
    from ad.registry import env_factory, load_policy
    import tasks.metaworld  # noqa: F401  (registers the family)

    reader = HistoryReader(str(folder / "metaworld"))
    tasks = pick_tasks(reader, "heldout", None)
    setup = env_factory(reader.family)(reader.metadata, tasks, 1)
    try:
        record = ClosestApproach(setup.env, setup.env.num_envs, episodes)
        policy = load_policy(str(folder / "ad"), greedy=False, seed=seed)
        result = run_in_context(policy, setup, episodes, seed, "AD", progress=False, record=record)
    finally:
        setup.env.close()
    success = result.extra["success"].reshape(len(tasks), episodes)
    agree = float(np.mean(success == (record.closest <= SUCCESS_RADIUS)))
    return {"tasks": len(tasks), "success": success, "closest": record.closest, "agree": agree}


def found_before(success: np.ndarray) -> np.ndarray:
    """(goals, episodes) bool: whether AD succeeded on the goal in any episode before this one."""
    earlier = np.zeros_like(success, dtype=bool)  # (G, episodes)
    earlier[:, 1:] = np.logical_or.accumulate(success[:, :-1], axis=1)
    return earlier


def miss_summary(closest: np.ndarray, success: np.ndarray, earlier: np.ndarray) -> dict[str, float]:
    """Failed episodes among ``closest`` / ``success`` / ``earlier`` (same shape; ``earlier``: AD had succeeded on
    the goal in an earlier episode): how many, the share within :data:`NEAR` of the goal, the median closest approach
    (cm), and the share that came after an earlier success on their goal."""
    failed = ~success
    missed = closest[failed]
    if not missed.size:
        return {"failed": 0, "near_share": 0.0, "median_cm": 0.0, "after_success_share": 0.0}
    return {"failed": int(missed.size), "near_share": float(np.mean(missed <= NEAR)),
            "median_cm": float(np.median(missed) * 100), "after_success_share": float(np.mean(earlier[failed]))}


def plot(per_seed: dict[int, dict[str, Any]], last: int, path: Path) -> None:
    """Share of AD's episodes whose closest approach is within x cm of the goal, in its first episode and in its
    last ``last``, per seed, with the success radius marked."""
    from ad.plots import finish_rate_panel, pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(per_seed), figsize=(5.2 * len(per_seed), 3.8), squeeze=False)
    grid = np.linspace(0.0, 0.20, 201)
    for ax, (seed, run) in zip(axes[0], per_seed.items()):
        episodes = run["closest"].shape[1]
        for values, label, style in ((run["closest"][:, 0], "episode 1", "--"),
                                     (run["closest"][:, -last:].reshape(-1), f"episodes {episodes - last + 1}-"
                                                                             f"{episodes}", "-")):
            ax.plot(grid * 100, [(values <= g).mean() for g in grid], ls=style, lw=2, label=f"AD, {label}")
        ax.axvline(SUCCESS_RADIUS * 100, color="grey", lw=1, ls=":", label="success radius (5 cm)")
        finish_rate_panel(ax, "closest approach of the fingertips to the goal in an episode (cm)",
                          "share of episodes within it", f"held-out goals, seed {seed}")
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="data/bench-metaworld-ad-search-gaussian-36k-history-starts-16-runs",
                        help="folder of finished metaworld_ad runs of a reach skill (seed<N> each: AD's run in ad/, "
                             "the histories in metaworld/)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="the runs (seed<N> folders) to read")
    parser.add_argument("--episodes", type=int, default=10, help="episodes AD acts in context on each goal")
    parser.add_argument("--last", type=int, default=3, help="the figures: AD's failed episodes among the last N")
    parser.add_argument("--variant", default="search-gaussian-36k-history-starts-16-runs",
                        help="name of the runs in the figures and the plot")
    args = parse_args(parser)
    if not 1 <= args.last <= args.episodes:
        fail(f"--last must be in 1..--episodes ({args.episodes}), got {args.last}")
    for seed in args.seeds:
        for part in ("ad", "metaworld"):
            if not (Path(args.work) / f"seed{seed}" / part).is_dir():
                fail(f"{Path(args.work) / f'seed{seed}' / part} does not exist: run the metaworld_ad config whose runs "
                     "--work names first")
    per_seed = {seed: run_folder(Path(args.work) / f"seed{seed}", args.episodes, seed) for seed in args.seeds}
    figures = []
    for seed, run in per_seed.items():
        earlier = found_before(run["success"])[:, -args.last:]
        success, closest = run["success"][:, -args.last:], run["closest"][:, -args.last:]
        misses = miss_summary(closest, success, earlier)
        never = int((~run["success"].any(axis=1)).sum())
        print(f"seed {seed}: AD succeeds in {success.mean():.2f} of episodes {args.episodes - args.last + 1}-"
              f"{args.episodes} ({run['agree']:.3f} of all its episodes agree with closest approach <= 5 cm); of its "
              f"{misses['failed']} failed ones {misses['near_share']:.2f} came within {NEAR * 100:.1f} cm, median "
              f"closest approach {misses['median_cm']:.1f} cm, {misses['after_success_share']:.2f} after an earlier "
              f"success on their goal; {never} of {run['tasks']} goals never reached in {args.episodes} episodes",
              flush=True)
        fig = figure(f"Meta-World ML1 reach ({args.variant}), seed {seed}: share of AD's failed episodes "
                     f"{args.episodes - args.last + 1}-{args.episodes} on {run['tasks']} held-out goals whose closest "
                     f"approach to the goal is within {NEAR * 100:.1f} cm (the success radius is 5 cm)",
                     "share of failed episodes", misses["near_share"], None, "diagnostic (no goal)")
        fig.update(seed=seed, variant=args.variant, failed_episodes=misses["failed"],
                   median_closest_cm=misses["median_cm"], success=float(success.mean()),
                   failed_after_success_share=misses["after_success_share"], goals_never_reached=never,
                   success_agrees_with_distance=run["agree"],
                   closest_m=[[round(float(v), 4) for v in row] for row in run["closest"]])  # (goals, episodes)
        figures.append(fig)
    kept = earlier_seed_figures("metaworld_misses", False, args.variant, args.seeds)
    for fig in kept:  # seeds run before, on their own, stay (in the plot too, where their distances were kept)
        if "closest_m" in fig:
            per_seed[fig["seed"]] = {"closest": np.asarray(fig["closest_m"])}
    figures = sorted(figures + kept, key=lambda f: f["seed"])
    per_seed = dict(sorted(per_seed.items()))
    plot(per_seed, args.last, Path(__file__).resolve().parent / "results" / f"metaworld_misses_{args.variant}.png")
    merge_report("metaworld_misses", False, args.variant, figures, page="metaworld", capability=CAPABILITY)


if __name__ == "__main__":
    main()
