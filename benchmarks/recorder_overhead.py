"""Recorder overhead: Stable-Baselines3 PPO env steps/s with the history callback vs without, on CartPole-v1 and
LunarLander-v3, measured two ways in one process:

- in-run: the recorder runs synchronously inside `learn` (its callback, and closing the unit afterwards), so its cost
  is the time spent there; the run's steps/s is compared with the same run's steps/s less that time (the same work,
  free of run-to-run noise; the headline);
- A/B: separate runs with and without it, same seeds, alternated, the fastest of the repeats each (noisy on a
  shared machine: PPO's updates dominate a run and vary by more than the recorder costs).

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


def one_run(env_id: str, steps: int, record: bool, work: Path, index: int) -> tuple[float, float]:
    """(env steps/s of one PPO learn call, seconds of it spent in the recorder) (the recorder writing a dataset
    under ``work`` if ``record``)."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    from ad.record import HistoryRecorder

    env = gym.make(env_id)
    model = PPO("MlpPolicy", env, seed=0, device="cpu", verbose=0)
    callback, recorder, spent = None, None, [0.0]
    if record:
        recorder = HistoryRecorder(work / f"{env_id}-{index}", task="t", observation_space=env.observation_space,
                                   action_space=env.action_space, value=True, env_id=env_id)
        callback = recorder.sb3_callback()
        on_step = callback._on_step  # the callback's own work, timed around each call

        def timed_step() -> bool:
            begin = time.perf_counter()
            try:
                return on_step()
            finally:
                spent[0] += time.perf_counter() - begin

        callback._on_step = timed_step
    start = time.perf_counter()
    model.learn(steps, callback=callback)
    if recorder is not None:
        begin = time.perf_counter()
        recorder.close()  # committing the unit is part of the recorder's cost
        spent[0] += time.perf_counter() - begin
    return model.num_timesteps / (time.perf_counter() - start), spent[0]


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
            in_run = []  # (steps/s with the recorder, steps/s of the same run less the recorder's time)
            for i in range(repeats):
                for record in (False, True):
                    rate, spent = one_run(env_id, steps, record, Path(tmp), i)
                    best[record] = max(best[record], rate)
                    if record:
                        in_run.append((rate, steps / (steps / rate - spent)))
            rate, without = max(in_run)
            figures.append(figure(f"SB3 PPO env steps/s with the history recorder vs the same run less the recorder's "
                                  f"time, {env_id}, {steps} steps", "steps/s", rate, without,
                                  ">= 0.952 (slowdown <= 1.05x)"))
            figures.append(figure(f"SB3 PPO env steps/s with the history recorder vs separate runs without it, {env_id}, "
                                  f"{steps} steps, fastest of {repeats} (noisy)", "steps/s", best[True], best[False],
                                  "-"))
    if not args.quick:  # the headline: the env where the recorder costs most (in-run)
        worst = min(figures[::2], key=lambda f: f["ratio"])
        worst.update(headline=True, short=f"SB3 PPO env steps/s with the recorder, {worst['figure'].split(', ')[1]}",
                     vs="without it")
    report("recorder_overhead", figures, args.quick, capability="Recording any training run (ad.record)", page="gym",
           config=None if args.quick else "configs/gym/recorder_overhead.yaml")


if __name__ == "__main__":
    main()
