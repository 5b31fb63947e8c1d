"""Recorder overhead: SB3 PPO env steps/s with the history recorder vs without it (CartPole-v1, LunarLander-v3).

Stable-Baselines3 PPO with the history callback vs without, on CartPole-v1 and LunarLander-v3, two seeds, measured
three ways in one process:

- in-run: the recorder runs synchronously inside `learn` (its callback's hooks: every step, every rollout's end, and
  closing the unit afterwards), so its cost is the time spent there; the run's steps/s is compared with the same
  run's steps/s less that time (the same work, free of run-to-run noise; the headline);
- interleaved: two runs of the same seed in one process, one with the recorder and one without, advanced one
  rollout at a time in turn, each run's steps/s over its median rollout (the whole recorder, whatever it costs
  outside its hooks, against a plain run, with the machine's slow spells falling on both alike);
- A/B: separate runs with and without it, same seed, alternated (each repeat runs the two in the other order
  from the one before), the fastest of the repeats each (noisy with few repeats on a shared machine: PPO's updates
  dominate a run and vary from run to run by more than the recorder costs).

Each figure is the mean over the seeds, with each seed's figures (``per_seed``) and the range of their ratios
(``spread``).

    python benchmarks/recorder_overhead.py --config configs/gym/recorder_overhead.yaml  # 20k steps, 2 seeds
    python benchmarks/recorder_overhead.py --quick    # 4k steps, 1 repeat, about two minutes
    python benchmarks/recorder_overhead.py --profile CartPole-v1   # where the recorder's time goes (cProfile)
    python benchmarks/recorder_overhead.py --plain    # HistoryRecorder.step alone, microseconds a call
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402

ENVS = ("CartPole-v1", "LunarLander-v3")
HOOKS = ("_on_training_start", "_on_rollout_start", "_on_step", "_on_rollout_end", "_on_training_end")


def one_run(env_id: str, steps: int, record: bool, work: Path, index: int, seed: int = 0) -> tuple[float, float]:
    """(env steps/s of one PPO learn call, seconds of it spent in the recorder) (the recorder writing a dataset
    under ``work`` if ``record``)."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    from ad.record import HistoryRecorder

    env = gym.make(env_id)
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0)
    callback, recorder, spent = None, None, [0.0]
    if record:
        recorder = HistoryRecorder(work / f"{env_id}-{seed}-{index}", task="t", observation_space=env.observation_space,
                                   action_space=env.action_space, value=True, env_id=env_id)
        callback = recorder.sb3_callback()
        for name in HOOKS:  # the callback's own work, timed around each call
            setattr(callback, name, _timed(getattr(callback, name), spent))
    start = time.perf_counter()
    model.learn(steps, callback=callback)
    if recorder is not None:
        begin = time.perf_counter()
        recorder.close()  # committing the unit is part of the recorder's cost
        spent[0] += time.perf_counter() - begin
    return model.num_timesteps / (time.perf_counter() - start), spent[0]


def interleaved_runs(env_id: str, steps: int, work: Path, seed: int) -> tuple[float, float]:
    """(env steps/s with the recorder, without it) of two PPO runs of the same seed in one process, one with the
    recorder and one without, advanced one rollout at a time in turn (``learn(n_steps, reset_num_timesteps=False)``,
    each turn in the other order from the one before), after a first, untimed rollout each, for ``steps`` env steps
    (rounded up to whole rollouts). Each run's steps/s is over its median rollout (the recorder's closing spread
    over its rollouts): the machine's slow spells, which last a few seconds and make one rollout take up to twice as
    long as another, fall on both runs' rollouts of a turn alike and on neither median. Each run keeps its own state
    of the global random generators, so both do what a run alone does, the same work (their final weights are
    checked equal)."""
    import statistics

    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO

    from ad.record import HistoryRecorder

    models, callbacks, rng, times = {}, {}, {}, {False: [], True: []}
    recorder = None
    for record in (False, True):
        env = gym.make(env_id)
        models[record] = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0)
        rng[record] = _global_rng()  # each run keeps its own draws of the global generators SB3 samples from
        callbacks[record] = None
        if record:
            recorder = HistoryRecorder(work / f"{env_id}-{seed}-interleaved", task="t",
                                       observation_space=env.observation_space, action_space=env.action_space,
                                       value=True, env_id=env_id)
            callbacks[record] = recorder.sb3_callback()
    rollout = models[False].n_steps * models[False].n_envs
    rollouts = -(-steps // rollout)
    for i in range(rollouts + 1):  # the first rollout of each, untimed, takes the process's first-call costs
        for record in ((False, True) if i % 2 == 0 else (True, False)):
            _global_rng(rng[record])
            begin = time.perf_counter()
            models[record].learn(rollout, callback=callbacks[record], reset_num_timesteps=False)
            if i:
                times[record].append(time.perf_counter() - begin)
            rng[record] = _global_rng()
    begin = time.perf_counter()
    recorder.close()  # committing the unit is part of the recorder's cost
    closing = time.perf_counter() - begin
    weights = {r: torch.cat([p.detach().flatten() for p in m.policy.parameters()]) for r, m in models.items()}
    if not torch.equal(weights[False], weights[True]):
        raise RuntimeError(f"{env_id} seed {seed}: the recorded and the plain PPO run ended with different weights; "
                           "the recorder changed the training it records")
    return (rollout / (statistics.median(times[True]) + closing / rollouts),
            rollout / statistics.median(times[False]))


def _global_rng(state: tuple | None = None) -> tuple:
    """The state of the global random generators (Python, NumPy, torch); with ``state``, first set them to it."""
    import random

    import numpy as np
    import torch

    if state is not None:
        random.setstate(state[0])
        np.random.set_state(state[1])
        torch.set_rng_state(state[2])
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def _timed(hook: Any, spent: list[float]) -> Any:
    def timed(*args: Any) -> Any:
        begin = time.perf_counter()
        try:
            return hook(*args)
        finally:
            spent[0] += time.perf_counter() - begin
    return timed


def profile(env_id: str, steps: int, seed: int) -> None:
    """Print where one recorded PPO run spends the recorder's time (cProfile, the recorder's functions)."""
    import cProfile
    import pstats

    with tempfile.TemporaryDirectory() as tmp:
        one_run(env_id, 256, True, Path(tmp), -1, seed)  # imports and first-write costs out of the profile
        prof = cProfile.Profile()
        prof.enable()
        rate, spent = one_run(env_id, steps, True, Path(tmp), 0, seed)
        prof.disable()
    print(f"{env_id}, {steps} steps, seed {seed}: {rate:.0f} steps/s with the recorder (under cProfile); recorder "
          f"{spent:.3f} s = {spent / steps * 1e6:.1f} us a step, {spent * rate / steps:.1%} of the run")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(r"ad/record|ad/history|recorder_overhead", 25)


def plain(steps: int) -> None:
    """Print the microseconds of one ``HistoryRecorder.step`` call in a loop (CartPole's shapes, one stream), for
    a hand-written loop's values (numpy observation, Python scalars) and an SB3-style step's (torch tensors)."""
    import gymnasium as gym
    import numpy as np
    import torch

    from ad.record import HistoryRecorder

    obs_space, action_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2)
    obs, tensor, action = np.zeros(4, np.float32), torch.zeros(1, 4), np.zeros(1, np.int64)
    kinds = {"numpy observation, Python scalars": lambda rec: rec.step(obs, 1, 1.0, False, False, logprob=-0.5,
                                                                       update=0, value=0.5),
             "torch tensors (as SB3 makes them)": lambda rec: rec.step(
                 tensor, action, np.ones(1, np.float32), np.zeros(1, bool), np.zeros(1, bool),
                 logprob=torch.zeros(1), update=0, value=torch.zeros(1, 1))}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (kind, call) in enumerate(kinds.items()):
            for n in (256, steps):  # the first, short run takes a process's first-write costs (imports)
                rec = HistoryRecorder(Path(tmp) / f"{i}-{n}", task="t", observation_space=obs_space,
                                      action_space=action_space, value=True)
                begin = time.perf_counter()
                for _ in range(n):
                    call(rec)
                rec.close()
            print(f"HistoryRecorder.step, {kind}: {(time.perf_counter() - begin) / steps * 1e6:.1f} us a step "
                  f"({steps} steps, flushes and closing included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4k steps a run, 1 repeat")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps of each PPO run")
    parser.add_argument("--interleaved-steps", type=int, default=40_960,
                        help="env steps timed in each of the two interleaved runs (rounded up to whole rollouts)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs of each variant per seed (alternated); the fastest counts")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="PPO seeds (each a separate run)")
    parser.add_argument("--note", default="", help="words appended to each figure's name (e.g. the machine's load)")
    parser.add_argument("--profile", metavar="ENV", default=None,
                        help="print a cProfile of the recorder in one run on this env (first seed) and exit")
    parser.add_argument("--plain", action="store_true", help="time HistoryRecorder.step alone and exit")
    args = parse_args(parser)
    steps, repeats, interleaved = (4096, 1, 4096) if args.quick else (args.steps, args.repeats,
                                                                       args.interleaved_steps)
    import torch

    torch.set_num_threads(1)
    if args.profile:
        profile(args.profile, steps, args.seeds[0])
        return
    if args.plain:
        plain(steps)
        return
    seeds = " ".join(map(str, args.seeds))
    note = f", {args.note}" if args.note else ""
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for env_id in ENVS:
            in_run, ab, turns = [], [], []  # per seed: (steps/s with the recorder, without it)
            for seed in args.seeds:
                turns.append(interleaved_runs(env_id, interleaved, Path(tmp), seed))
                best = {True: 0.0, False: 0.0}
                runs = []  # (steps/s with the recorder, steps/s of the same run less the recorder's time)
                for i in range(repeats):
                    for record in ((False, True) if i % 2 == 0 else (True, False)):  # either order first, in turn
                        rate, spent = one_run(env_id, steps, record, Path(tmp), i, seed)
                        best[record] = max(best[record], rate)
                        if record:
                            runs.append((rate, steps / (steps / rate - spent)))
                in_run.append(max(runs))
                ab.append((best[True], best[False]))
            figures.append(_over_seeds(
                f"SB3 PPO env steps/s with the history recorder vs the same run less the recorder's time, {env_id}, "
                f"{steps} steps, seeds {seeds}{note}", in_run, args.seeds, "ratio >= 0.952 (slowdown <= 1.05x)"))
            figures.append(_over_seeds(
                f"SB3 PPO env steps/s with the history recorder vs a run without it, the two advanced one rollout at "
                f"a time in turn in one process, median rollout, {env_id}, {interleaved} steps, seeds {seeds}{note}",
                turns, args.seeds, "ratio >= 0.952 (slowdown <= 1.05x)"))
            figures.append(_over_seeds(
                f"SB3 PPO env steps/s with the history recorder vs separate runs without it, {env_id}, {steps} "
                f"steps, seeds {seeds}, fastest of {repeats} (noisy){note}", ab, args.seeds, "-"))
    if not args.quick:  # the headline: the env where the recorder costs most (in-run)
        worst = min(figures[::3], key=lambda f: f["ratio"])
        worst.update(headline=True, short=f"SB3 PPO env steps/s with the recorder, {worst['figure'].split(', ')[1]}"
                     f" (seeds {seeds})", vs="without it")
    report("recorder_overhead", figures, args.quick, capability="Recording any training run (ad.record)", page="gym",
           config=None if args.quick else "configs/gym/recorder_overhead.yaml")


def _over_seeds(name: str, pairs: list[tuple[float, float]], seeds: list[int], goal: str) -> dict[str, Any]:
    """One figure: the mean over the seeds of (ours, reference), each seed's figures and the range of the ratios."""
    fig = figure(name, "steps/s", sum(p[0] for p in pairs) / len(pairs), sum(p[1] for p in pairs) / len(pairs), goal)
    fig["per_seed"] = [{"seed": s, "ours": o, "reference": r, "ratio": o / r} for s, (o, r) in zip(seeds, pairs)]
    ratios = [o / r for o, r in pairs]
    fig["spread"] = [min(ratios), max(ratios)]
    return fig


if __name__ == "__main__":
    main()
