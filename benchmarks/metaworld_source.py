"""Meta-World source generation speed: env steps/s of the vectorised noise source (every goal in one
MetaWorldVectorEnv, each step's expert actions, noise and log-densities as arrays) vs Meta-World one env at a time
(the ML1 README loop: one env per goal, ``set_task``, ``reset``, ``step``, the same noisy expert per step), on the
same goals, episodes and noise draws. Env construction (a MuJoCo model per env, ML1's goal draws) is left out of both.

    python benchmarks/metaworld_source.py --config configs/metaworld/source.yaml
    python benchmarks/metaworld_source.py --quick    # 2 goals, 2 episodes of 20 steps: a correctness check
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402


def ours(cfg, goals: list[tuple[str, int]], workers: int = 1) -> tuple[float, list[dict]]:
    """(seconds, histories) of the vectorised source on ``goals`` (run 0): one vector env over all of them, or
    ``workers`` processes each stepping a vector env over its share."""
    import dataclasses

    from tasks.metaworld.generate import block_histories
    from tasks.metaworld.skills import expert_policy
    from tasks.metaworld.vector_env import MetaWorldVectorEnv

    width = -(-len(goals) // workers)
    cfg = dataclasses.replace(cfg, workers=workers, batch=width)
    env = MetaWorldVectorEnv(cfg.skill, goals[:width], episode_length=cfg.episode_length, ml1_seed=cfg.ml1_seed)
    policy = expert_policy(cfg.skill)
    start = time.perf_counter()
    histories = [h for _, block in block_histories(cfg, env, [(s, g, 0) for s, g in goals], policy) for h in block]
    seconds = time.perf_counter() - start
    env.close()
    return seconds, histories


def one_at_a_time(cfg, goals: list[tuple[str, int]]) -> tuple[float, list[dict]]:
    """(seconds, histories) of the same recipe with Meta-World's own env, one goal after another, one step at a
    time (the expert reads the goal-visible observation; the recorded state hides the goal)."""
    from tasks.metaworld.generate import unit_seed
    from tasks.metaworld.noise import clipped_gaussian_logprob, noise_schedule
    from tasks.metaworld.skills import benchmark, expert_policy, ml1_task, observable_task

    envs = []
    for split, goal in goals:
        env = benchmark(cfg.skill, cfg.ml1_seed).train_classes[cfg.skill]()
        env.set_task(observable_task(ml1_task(cfg.skill, split, goal, cfg.ml1_seed)))
        envs.append(env)
    policy = expert_policy(cfg.skill)
    sigmas = noise_schedule(cfg.episodes, cfg.noise_max, cfg.noise_min)
    out = []
    start = time.perf_counter()
    for (split, goal), env in zip(goals, envs):
        rng = np.random.default_rng(unit_seed(cfg, split, goal, 0))
        rows = {"state": [], "action": [], "reward": [], "logprob": [], "success": []}
        for e in range(cfg.episodes):
            obs, _ = env.reset()
            sigma = np.array([sigmas[e]])
            for _ in range(cfg.episode_length):
                mean = policy.get_action(obs).astype(np.float64)[None]
                action = np.clip(mean + sigma[:, None] * rng.standard_normal((1, 4)), -1.0, 1.0)
                hidden = obs.copy()
                hidden[-3:] = 0.0
                rows["state"].append(hidden)
                rows["action"].append(action[0])
                rows["logprob"].append(clipped_gaussian_logprob(action, mean, sigma)[0])
                obs, reward, _, _, info = env.step(action[0].astype(np.float32))
                rows["reward"].append(reward)
                rows["success"].append(bool(info["success"]))
        out.append({k: np.asarray(v) for k, v in rows.items()})
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 goals, 2 episodes of 20 steps (a correctness check)")
    parser.add_argument("--skill", default="reach-v3", help="ML1 skill")
    parser.add_argument("--goals", type=int, default=25, help="ML1 training goals stepped together (0 .. goals-1)")
    parser.add_argument("--episodes", type=int, default=4, help="episodes per goal")
    parser.add_argument("--episode-length", type=int, default=100, help="steps per episode")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each (alternated); the fastest counts")
    parser.add_argument("--workers", type=int, default=2, help="processes of the second figure (--workers of "
                                                               "ad generate metaworld; at least 2)")
    args = parse_args(parser)
    goals_n, episodes, length, repeats = (2, 2, 20, 1) if args.quick else (
        args.goals, args.episodes, args.episode_length, args.repeats)

    from ad.config import make_config
    from tasks.metaworld.config import GenerateConfig

    warnings.filterwarnings("ignore", message="Constant\\(s\\) may be too high")
    cfg = make_config(GenerateConfig, {"skill": args.skill, "episodes": episodes, "episode_length": length,
                                       "train_goals": f"0-{goals_n - 1}", "heldout_goals": ""})
    goals = [("train", g) for g in range(goals_n)]
    steps = goals_n * episodes * length
    workers = max(2, args.workers)
    best = {"ours": 0.0, "workers": 0.0, "reference": 0.0}
    for _ in range(repeats):
        for key, run in (("ours", lambda: ours(cfg, goals)), ("workers", lambda: ours(cfg, goals, workers)),
                         ("reference", lambda: one_at_a_time(cfg, goals))):
            seconds, histories = run()
            best[key] = max(best[key], steps / seconds)
            if key == "ours":
                first = histories
                continue
            for a, b in zip(first, histories):  # the same work: the same histories, step for step
                np.testing.assert_allclose(a["action"], b["action"], rtol=1e-6, atol=1e-6)
                np.testing.assert_allclose(a["state"], b["state"], rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(a["reward"], b["reward"], rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(a["logprob"], b["logprob"], rtol=1e-4, atol=1e-4)
                assert (a["success"] == b["success"]).all()
    work = f"{goals_n} goals x {episodes} episodes of {length} steps, fastest of {repeats}"
    figures = [figure(f"Meta-World ML1 {args.skill} noise-source env steps/s, one vectorised env vs Meta-World one "
                      f"env at a time ({work})", "steps/s", best["ours"], best["reference"], ">= 1.0x"),
               figure(f"Meta-World ML1 {args.skill} noise-source env steps/s, {workers} processes each stepping a "
                      f"vectorised env (--workers {workers}) vs Meta-World one env at a time ({work})", "steps/s",
                      best["workers"], best["reference"], ">= 1.0x")]
    if not args.quick:
        figures[1].update(headline=True, short=f"Meta-World ML1 {args.skill} source env steps/s, --workers {workers}",
                          vs="Meta-World one env at a time")
    report("metaworld_source", figures, args.quick, capability="Meta-World ML1 source speed", page="metaworld",
           config=None if args.quick else "configs/metaworld/source.yaml")


if __name__ == "__main__":
    main()
