"""Meta-World ML1 noise source, measured (not timed): the scripted experts' steps to success on every ML1 goal of
reach, push and pick-place (what the default episode length rests on), and the noisy source's success rate per
episode over a history on two seeds (``ad generate metaworld`` with its defaults on a subset of goals), with a plot.

    python benchmarks/metaworld_noise_curve.py --config configs/metaworld/noise_curve.yaml
    python benchmarks/metaworld_noise_curve.py --quick    # 2 + 2 goals, 4 episodes of 30 steps
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, parse_args, report  # noqa: E402


def expert_steps(skill: str, goals: int, horizon: int, ml1_seed: int) -> np.ndarray:
    """Steps the noise-free scripted expert needs to reach success on the first ``goals`` train and test goals (0:
    not within ``horizon``)."""
    from tasks.metaworld.generate import expert_rollouts
    from tasks.metaworld.skills import expert_policy
    from tasks.metaworld.vector_env import MetaWorldVectorEnv

    every = [(split, g) for split in ("train", "test") for g in range(goals)]
    env = MetaWorldVectorEnv(skill, every[:min(25, len(every))], episode_length=horizon, ml1_seed=ml1_seed)
    steps = expert_rollouts(env, every, expert_policy(skill))["steps_to_success"]
    env.close()
    return steps


def noisy_curve(skill: str, goals: int, episodes: int, length: int, seed: int, work: Path) -> dict:
    """``ad generate metaworld`` on the first ``goals`` train and test goals with ``--seed seed``: its summary."""
    from ad.config import make_config
    from tasks.metaworld.config import GenerateConfig
    from tasks.metaworld.generate import generate

    out = work / f"{skill}-seed{seed}"
    generate(make_config(GenerateConfig, {"out": str(out), "skill": skill, "train_goals": f"0-{goals - 1}",
                                          "heldout_goals": f"0-{goals - 1}", "episodes": episodes,
                                          "episode_length": length, "seed": seed, "progress": False}))
    import json

    return json.loads((out / "_run" / "summary.json").read_text())


def plot(curves: dict[int, dict], skill: str, out: Path) -> None:
    """Success rate per episode of each seed's histories, with the noise scale on a second axis."""
    from ad.plots import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for seed, summary in curves.items():
        ax.plot(np.arange(1, len(summary["success_per_episode"]) + 1), summary["success_per_episode"],
                marker="o", ms=3, label=f"seed {seed} ({summary['histories']} histories)")
    ax.set_xlabel("episode of the history")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    noise = next(iter(curves.values()))["noise"]
    twin = ax.twinx()
    twin.plot(np.arange(1, len(noise) + 1), noise, color="grey", ls="--", label="noise std")
    twin.set_yscale("log")
    twin.set_ylabel("noise std (dashed)")
    ax.legend(loc="center right", fontsize=8)
    ax.set_title(f"Noisy scripted expert, ML1 {skill}")
    save_figure(fig, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 + 2 goals, 4 episodes of 30 steps")
    parser.add_argument("--skills", nargs="+", default=["reach-v3", "push-v3", "pick-place-v3"],
                        help="skills whose expert is measured")
    parser.add_argument("--expert-goals", type=int, default=50, help="train and test goals each for the expert")
    parser.add_argument("--horizon", type=int, default=500, help="most steps the expert gets (Meta-World's own)")
    parser.add_argument("--curve-skill", default="reach-v3", help="skill of the noisy-source curve")
    parser.add_argument("--curve-goals", type=int, default=10, help="train and test goals each for the curve")
    parser.add_argument("--episodes", type=int, default=40, help="episodes per history")
    parser.add_argument("--episode-length", type=int, default=100, help="steps per episode")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="noise seeds")
    args = parse_args(parser)
    if args.quick:
        args.skills, args.expert_goals, args.horizon = args.skills[:1], 2, 150
        args.curve_goals, args.episodes, args.episode_length = 2, 4, 30
    from tasks.metaworld.vector_env import DEFAULT_EPISODE_LENGTH

    warnings.filterwarnings("ignore", message="Constant\\(s\\) may be too high")
    figures = []
    for skill in args.skills:
        steps = expert_steps(skill, args.expert_goals, args.horizon, 0)
        reached = steps[steps > 0]
        fig = figure(f"Meta-World ML1 {skill}: steps the scripted expert needs to succeed, most over "
                     f"{len(steps)} goals (train + test, ML1 seed 0)", "steps", float(reached.max()) if len(reached)
                     else float("nan"), None, f"<= {DEFAULT_EPISODE_LENGTH} (the default episode length)",
                     higher_is_better=False)
        fig.update(median=float(np.median(reached)) if len(reached) else None, failed=int((steps == 0).sum()),
                   steps=steps.tolist(), current=not args.quick)
        figures.append(fig)
    curves = {}
    with tempfile.TemporaryDirectory() as work:
        for seed in args.seeds:
            curves[seed] = summary = noisy_curve(args.curve_skill, args.curve_goals, args.episodes,
                                                 args.episode_length, seed, Path(work))
            curve = np.asarray(summary["success_per_episode"])
            head, tail = curve[:5].mean(), curve[-5:].mean()
            fig = figure(f"Meta-World ML1 {args.curve_skill} noisy expert, seed {seed}: success rate of the last 5 "
                         f"episodes of {args.episodes} vs the first 5 ({summary['histories']} histories, "
                         f"{args.curve_goals} train + {args.curve_goals} test goals)", "success rate", float(tail),
                         float(head), ">= 0.9 (the last episodes succeed; the first mostly fail)")
            fig.update(success_per_episode=summary["success_per_episode"],
                       by_split=summary["success_per_episode_by_split"], noise=summary["noise"])
            figures.append(fig)
    if not args.quick:  # the headline: the first seed's curve
        figures[len(args.skills)].update(headline=True, vs="its first 5 episodes",
                                         short=f"Noisy-expert ML1 {args.curve_skill} histories: success in the last "
                                               f"5 of {args.episodes} episodes")
    png = RESULTS / f"metaworld_noise_curve{'_quick' if args.quick else ''}.png"
    plot(curves, args.curve_skill, png)
    report("metaworld_noise_curve", figures, args.quick, capability="Meta-World ML1 source", page="metaworld",
           config=None if args.quick else "configs/metaworld/noise_curve.yaml")


if __name__ == "__main__":
    main()
