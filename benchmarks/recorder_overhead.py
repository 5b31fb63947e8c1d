"""Recorder overhead: Stable-Baselines3 PPO env steps/s with the history callback vs without, same process,
same seeds, runs alternated (fastest of the repeats each), on CartPole-v1 and LunarLander-v3.

    python benchmarks/recorder_overhead.py            # 20k steps a run, 3 repeats
    python benchmarks/recorder_overhead.py --quick    # 4k steps, 2 repeats, under a minute
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402

ENVS = ("CartPole-v1", "LunarLander-v3")


def one_run(env_id: str, steps: int, record: bool, work: Path, index: int) -> float:
    """Env steps/s of one PPO learn call (with the recorder writing a dataset under ``work`` if ``record``)."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    from ad.record import HistoryRecorder

    env = gym.make(env_id)
    model = PPO("MlpPolicy", env, seed=0, device="cpu", verbose=0)
    callback, recorder = None, None
    if record:
        recorder = HistoryRecorder(work / f"{env_id}-{index}", task="t", observation_space=env.observation_space,
                                   action_space=env.action_space, value=True, env_id=env_id)
        callback = recorder.sb3_callback()
    start = time.perf_counter()
    model.learn(steps, callback=callback)
    if recorder is not None:
        recorder.close()  # committing the unit is part of the recorder's cost
    return model.num_timesteps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4k steps a run, 2 repeats")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps of each PPO run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each variant (alternated); the fastest counts")
    args = parse_args(parser)
    steps, repeats = (4096, 2) if args.quick else (args.steps, args.repeats)
    import torch

    torch.set_num_threads(1)
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for env_id in ENVS:
            best = {True: 0.0, False: 0.0}
            for i in range(repeats):
                for record in (False, True):
                    best[record] = max(best[record], one_run(env_id, steps, record, Path(tmp), i))
            figures.append(figure(f"SB3 PPO env steps/s with the history recorder vs without, {env_id}, {steps} steps, "
                                  f"fastest of {repeats}", "steps/s", best[True], best[False],
                                  ">= 0.952 (slowdown <= 1.05x)"))
    if not args.quick:  # the headline: the env where the recorder costs most
        worst = min(figures, key=lambda f: f["ratio"])
        worst.update(headline=True, short=f"SB3 PPO env steps/s with the recorder, {worst['figure'].split(', ')[1]}",
                     vs="without it")
    report("recorder_overhead", figures, args.quick, capability="Recording any training run (ad.record)", page="gym",
           config=None if args.quick else "configs/gym/recorder_overhead.yaml")


if __name__ == "__main__":
    main()
