"""DarkRoom history generation: our batched A2C (writing every transition to the history store) vs
stable-baselines3 A2C on toymeta's DarkRoom (one goal, 10 envs, same hyperparameters, writing nothing).

Figures: env steps per second (ours on all 80 goals at once and on one goal, both including
writing; SB3 on one goal), ours without writing (to show what writing costs), the extrapolated
time of the original recipe's full job (80 goals x 2.5M steps), and the learning figure of the run.
Ours runs the A2C on one torch thread and is measured both ways: history writing on the same thread,
and on a background thread (``--background-writing``, a second core); the headline figure is
``ad generate darkroom``'s default. SB3 is measured with 1 and 2 torch threads and with denormals flushed (as
our run does); the fastest is the reference.

    python benchmarks/darkroom_generate.py            # 80 goals x 400k steps (the default run), SB3 100k steps
    python benchmarks/darkroom_generate.py --quick    # 80 goals x 50k steps, SB3 20k steps (< 1 min)
    python benchmarks/darkroom_generate.py --quick --profile   # + cProfile of our run (top functions)
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report, timed  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small version (< 1 minute)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of our 80-goal run")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import torch  # noqa: E402
from ad.config import make_config  # noqa: E402
from tasks.darkroom.config import GenerateConfig  # noqa: E402
from tasks.darkroom.generate import DARKROOM, generate  # noqa: E402
from tasks.darkroom.goals import all_goals  # noqa: E402
from tasks.grid.a2c import BatchedA2C, denormals_flushed  # noqa: E402


RECIPE_JOB = 80 * 2_500_000  # env steps of the original recipe's full job (80 goals x 2.5M)


def _config(out: Path, steps_per_goal: int, goals: list[str], background: bool | None = None) -> GenerateConfig:
    return make_config(GenerateConfig, {"out": str(out), "steps_per_goal": steps_per_goal, "goals": goals,
                                        "progress": False, "tensorboard": False, "plots": False,
                                        **({} if background is None else {"background_writing": background})})


def ours_generate(out: Path, steps_per_goal: int, goals: list[str], background: bool | None = None
                  ) -> tuple[float, dict]:
    """Seconds of a full `generate` run (env + A2C + history writing, no pictures) and its summary."""
    seconds, _ = timed(lambda: generate(_config(out, steps_per_goal, goals, background)))
    return seconds, json.loads((out / "_run" / "summary.json").read_text())


def profile_generate(out: Path, steps_per_goal: int) -> None:
    """Print where the time of an 80-goal run goes (cProfile, by own time; not used for the figures)."""
    profiler = cProfile.Profile()
    profiler.runcall(generate, _config(out, steps_per_goal, ["all"]))
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(18)
    print(text.getvalue())


def ours_no_writing(steps_per_goal: int) -> float:
    """Env steps/s of the batched A2C alone (80 goals), nothing recorded."""
    cfg = make_config(GenerateConfig, {"steps_per_goal": steps_per_goal})
    agent = BatchedA2C(cfg, all_goals(9), 0, DARKROOM)
    with denormals_flushed():  # as in `ad generate darkroom`
        seconds, _ = timed(lambda: [agent.step(stats=False) for _ in range(cfg.updates)])
    return cfg.updates * 80 * cfg.num_envs * cfg.num_steps / seconds


def sb3_a2c(steps: int, threads: int = 1, flush_denormal: bool = False) -> float:
    """Env steps/s of stable-baselines3 A2C on toymeta DarkRoom, goal (0, 0), the standard preset's hyperparameters
    (with denormal floats flushed to zero if ``flush_denormal``, as our run does)."""
    from gymnasium.wrappers import TimeLimit
    from stable_baselines3 import A2C
    from stable_baselines3.common.vec_env import DummyVecEnv
    from toymeta.dark_room import DarkRoom

    def make():
        return TimeLimit(DarkRoom(size=9, goal=(0, 0), random_start=False, terminate_on_goal=True), 20)

    env = DummyVecEnv([make] * 10)
    model = A2C("MlpPolicy", env, n_steps=10, learning_rate=1e-4, gamma=0.99, gae_lambda=1.0, ent_coef=0.01,
                vf_coef=0.99, max_grad_norm=0.5, normalize_advantage=False, device="cpu", seed=0,
                policy_kwargs={"net_arch": [128], "activation_fn": torch.nn.ReLU,
                               "optimizer_class": torch.optim.Adam,
                               "optimizer_kwargs": {"eps": 1e-6, "betas": (0.9, 0.999)}})
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    flushed = flush_denormal and torch.set_flush_denormal(True)
    try:
        seconds, _ = timed(lambda: model.learn(total_timesteps=steps))
    finally:
        torch.set_num_threads(before)
        if flushed:
            torch.set_flush_denormal(False)
    return steps / seconds


def main(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    steps_per_goal = 50_000 if args.quick else 400_000
    sb3_steps = 20_000 if args.quick else 100_000

    default_bg = GenerateConfig.background_writing  # the dataclass default of ad generate darkroom
    sb3_rates = {"1 torch thread": sb3_a2c(sb3_steps, 1),
                 "2 torch threads": sb3_a2c(sb3_steps // 5, 2),  # far slower here: fewer steps
                 "1 torch thread, denormals flushed": sb3_a2c(sb3_steps, 1, flush_denormal=True)}
    sb3_setting = max(sb3_rates, key=sb3_rates.get)
    sb3_rate = sb3_rates[sb3_setting]
    tmp = Path(tempfile.mkdtemp(prefix="bench_darkroom_"))
    try:
        seconds, summary = ours_generate(tmp / "all", steps_per_goal, ["all"])  # the default mode
        all_rate = 80 * steps_per_goal / seconds
        other_seconds, _ = ours_generate(tmp / "all_other", steps_per_goal, ["all"], background=not default_bg)
        other_rate = 80 * steps_per_goal / other_seconds
        one_seconds, _ = ours_generate(tmp / "one", steps_per_goal, ["0,0"])
        one_rate = steps_per_goal / one_seconds
        if args.profile:
            profile_generate(tmp / "profiled", steps_per_goal)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    bare_rate = ours_no_writing(steps_per_goal)

    sb3 = f"SB3 A2C 1 goal (no writing; {sb3_setting}: the fastest of {len(sb3_rates)} settings)"
    modes = {False: "all on one thread", True: "writing on a background thread (2 cores)"}
    figures = [
        figure(f"env steps/s incl. history writing: ours 80 goals batched ({modes[default_bg]}, the default) "
               f"vs {sb3}", "steps/s", all_rate, sb3_rate, ">= 100x"),
        figure(f"env steps/s incl. history writing: ours 80 goals batched ({modes[not default_bg]}) vs {sb3}",
               "steps/s", other_rate, sb3_rate, "-"),
        figure("env steps/s incl. history writing: ours 1 goal (10 envs) vs SB3 A2C 1 goal (no writing)",
               "steps/s", one_rate, sb3_rate, "faster"),
        figure("env steps/s of our batched A2C alone, 80 goals, nothing written (vs SB3)", "steps/s",
               bare_rate, sb3_rate, "-"),
        figure("the original recipe's job, 80 goals x 2.5M steps, extrapolated", "s", RECIPE_JOB / all_rate,
               RECIPE_JOB / sb3_rate, "< 300 s", higher_is_better=False),
        figure(f"goals reaching 90% of optimal return over the last 5% of their streams "
               f"({steps_per_goal:,} steps/goal, standard preset)", "fraction", summary["learned_fraction"], None,
               ">= 0.95 (default run)"),
    ]
    report("darkroom_generate", figures, args.quick, page="darkroom")
    print(f"SB3 steps/s by setting: {', '.join(f'{t}: {r:,.0f}' for t, r in sb3_rates.items())}")
    print(f"writing share of our 80-goal run: {1 - all_rate / bare_rate:.0%} of the time "
          f"({1 - other_rate / bare_rate:.0%} with {modes[not default_bg]})")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main(ARGS)
