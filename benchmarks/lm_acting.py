"""LM acting: batched action scoring (ours) vs one-at-a-time ``generate`` + parse, and in-context learning.

1. Acting speed, side by side on the same contexts. Both policies replay the same held-out DarkRoom
   learning-history transitions (so their contexts are identical token for token, compact template): after a
   warm-up of ``--warmup`` transitions, both act for ``--steps`` more (ours is timed on all of them, which
   include a window shift and its re-encoding; the slow reference on every ``--ref-every``-th, evenly spread).
   * ours: :class:`models.lm.policy.LMPolicy`, every valid action's log-likelihood for all envs in one batched
     forward pass over one KV cache that only receives the new tokens each step;
   * reference: how seed 002 and common LLM-agent libraries act: per env, ``model.generate`` on its full
     context, then the template parses the text (:class:`models.lm.policy.GeneratePolicy`); outputs that are
     not a valid action are counted.
   Figures: env steps/s and the invalid-action rate of each.
2. In-context learning (full run only, or ``--icl``): a short ``ad train lm`` (SmolLM2-135M + LoRA) on the
   dataset, then ``LMPolicy`` in context on held-out goals for ``--episodes`` episodes; return at the last
   episode vs episode 1, next to a random policy, with the plot ``benchmarks/results/lm_acting_icl.png``.

3. Acting with an LM trained from scratch (``--lm-run`` of `ad train lm --model scratch`, else a fresh one on the
   dataset's word vocabulary), side by side on the same held-out goals: ours = :class:`LMPolicy` over every
   held-out goal x ``--seeds`` seeds at once (one token batch per env step, KV cache across steps); reference =
   :class:`benchmarks.helpers.references.FullRecomputePolicy`, one env at a time, a full forward over its whole context
   every step (timed on ``--ref-envs`` envs). Greedy actions of both are compared on those envs (DarkRoom is
   deterministic, so the same actions give the same trajectories). Figures: env steps/s ratio (goal >= 20x),
   fraction of identical actions (goal 1).

    ad generate darkroom --out /tmp/lm_dr --steps-per-goal 50000 --preset fast --terminate-on-goal false
    python benchmarks/lm_acting.py --data /tmp/lm_dr            # speed + ICL (~10 min training)
    python benchmarks/lm_acting.py --data /tmp/lm_dr --quick    # speed only, small, under a minute
    python benchmarks/lm_acting.py --data data/demo/darkroom --lm-run data/demo/lm-scratch --no-speed --no-icl \
        --episodes 100 --name lm_acting_scratch                  # part 3 only, on the demo's trained LM
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, parse_args, report, timed  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="data/darkroom", help="DarkRoom dataset (ad generate darkroom)")
    parser.add_argument("--model", default="smollm2-135m", help="base model")
    parser.add_argument("--quick", action="store_true", help="speed only, small sizes (under a minute)")
    parser.add_argument("--icl", action=argparse.BooleanOptionalAction, default=None,
                        help="run the in-context-learning part (default: on unless --quick)")
    parser.add_argument("--speed", action=argparse.BooleanOptionalAction, default=True, help="run the speed part")
    parser.add_argument("--envs", type=int, default=8, help="envs (held-out tasks) acting together")
    parser.add_argument("--warmup", type=int, default=30, help="transitions in context before timing")
    parser.add_argument("--steps", type=int, default=20, help="decisions per env after the warm-up (ours times "
                        "all: they include a context shift; the reference every --ref-every-th)")
    parser.add_argument("--ref-every", type=int, default=5, help="time the (slow) reference on every n-th step")
    parser.add_argument("--context", type=int, default=40, help="transitions per context window")
    parser.add_argument("--max-tokens", type=int, default=512, help="token budget per context")
    parser.add_argument("--train-steps", type=int, default=40, help="LoRA optimiser steps of the ICL run")
    parser.add_argument("--batch-size", type=int, default=2, help="windows per LoRA step")
    parser.add_argument("--episodes", type=int, default=10, help="episodes in context for the ICL figure")
    parser.add_argument("--icl-tasks", type=int, default=8, help="held-out goals in the ICL evaluation")
    parser.add_argument("--run", default="runs/lm_bench", help="run folder of the ICL training")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--scratch", action=argparse.BooleanOptionalAction, default=True,
                        help="run part 3: acting with an LM from scratch, batched + cached vs full recompute")
    parser.add_argument("--lm-run", default=None, help="part 3: run folder of `ad train lm --model scratch` (default: "
                        "an untrained one)")
    parser.add_argument("--seeds", type=int, default=3, help="part 3: env seeds per held-out goal")
    parser.add_argument("--ref-envs", type=int, default=3, help="part 3: envs the slow reference acts in")
    parser.add_argument("--name", default="lm_acting", help="results file name (benchmarks/results/<name>.json)")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import torch  # noqa: E402
from ad.config import make_config  # noqa: E402
from ad.history import HistoryReader  # noqa: E402


def replay_inputs(reader: HistoryReader, tasks: list[str], length: int) -> list[dict[str, torch.Tensor]]:
    """Per step, the evaluator-style inputs (obs, prev_action, prev_reward, timestep, first) of one stream per task."""
    cols = [reader.streams(tasks=[t], columns=["state", "action", "reward", "step"])[0].columns for t in tasks]
    steps = []
    for i in range(length):
        steps.append({
            "obs": torch.tensor([int(c["state"][i]) for c in cols]),
            "prev_action": torch.tensor([int(c["action"][i - 1]) if i else 0 for c in cols]),
            "prev_reward": torch.tensor([float(c["reward"][i - 1]) if i else 0.0 for c in cols]),
            "timestep": torch.tensor([int(c["step"][i]) for c in cols]),
            "first": torch.full((len(cols),), i == 0),
        })
    return steps


def time_policy(policy, inputs: list[dict[str, torch.Tensor]], warmup: int, prefill, every: int = 1
                ) -> tuple[float, int, list]:
    """(seconds, timed steps, actions) of the decisions after ``warmup`` steps, timing every ``every``-th step.

    Untimed steps (the warm-up and, with ``every`` > 1, the steps between) only fill the contexts (``prefill``).
    """
    policy.reset(len(inputs[0]["obs"]))
    for step in inputs[:warmup]:
        prefill(step)
    actions, seconds, timed = [], 0.0, 0
    for i, step in enumerate(inputs[warmup:]):
        if i % every:
            prefill(step)
            continue
        start = time.perf_counter()
        actions.append(policy.act(step["obs"], step["prev_action"], step["prev_reward"], step["timestep"],
                                  step["first"]))
        seconds += time.perf_counter() - start
        timed += 1
    return seconds, timed, actions


def acting_speed(model, tokenizer, reader, tasks, args) -> list[dict]:
    from models.lm.policy import GeneratePolicy, LMPolicy

    inputs = replay_inputs(reader, tasks, args.warmup + args.steps)
    window = dict(context=args.context, max_tokens=args.max_tokens)
    ours = LMPolicy(model, tokenizer, "compact", range(5), greedy=True, **window)
    ref = GeneratePolicy(model, tokenizer, "compact", range(5), greedy=True, max_new_tokens=2, **window)

    def prefill_ours(step):  # ours builds its KV cache as it goes (not timed)
        ours.scores(step["obs"], step["prev_action"], step["prev_reward"], step["timestep"], step["first"])

    def prefill_ref(step):  # the reference keeps text contexts only
        ref.book.push(step["obs"], step["prev_action"], step["prev_reward"], step["timestep"], step["first"])

    with torch.inference_mode():
        ours_s, ours_steps, ours_actions = time_policy(ours, inputs, args.warmup, prefill_ours)
        ref_s, ref_steps, _ = time_policy(ref, inputs, args.warmup, prefill_ref, args.ref_every)
    taken = torch.stack(ours_actions)
    invalid_ours = float(((taken < 0) | (taken >= 5)).float().mean())
    context_tokens = float(np.mean([len(ours.book.context_ids(b)) for b in range(len(tasks))]))
    print(f"acting: {len(tasks)} envs; ours {ours_steps} steps in {ours_s:.1f}s, generate+parse {ref_steps} steps "
          f"in {ref_s:.1f}s; final contexts ~{context_tokens:.0f} tokens; generate invalid {ref.invalid}/{ref.decisions} "
          f"(e.g. {ref.invalid_examples[:3]})")
    return [
        figure("acting speed: batched action scoring vs per-env generate+parse (SmolLM2-135M, DarkRoom contexts)",
               "env steps/s", len(tasks) * ours_steps / ours_s, len(tasks) * ref_steps / ref_s, ">= 8x"),
        figure("invalid-action rate (ours scoring vs generate+parse)", "fraction of decisions", invalid_ours,
               ref.invalid / max(1, ref.decisions), "0 for ours", higher_is_better=False),
    ]


def scratch_acting(reader, args) -> list[dict]:
    """Part 3 (module docstring): batched cached acting vs the one-env full-recompute reference."""
    from ad.commands.evaluate import pick_tasks
    from ad.evaluate import run_in_context
    from ad.formats.language import get_template
    from models.lm.policy import LMPolicy
    from benchmarks.helpers.references import FullRecomputePolicy
    from ad.registry import env_factory

    if args.lm_run:
        from models.lm.loader import load_model

        model, tokenizer, info = load_model(args.lm_run)
        template, context, max_tokens = info["template"], info["context"], info["max_tokens"]
    else:
        from models.lm.config import SCRATCH
        from models.lm.scratch import build_scratch, scratch_tokenizer
        from models.lm.train import resolve_template

        template = resolve_template("auto", reader.metadata, SCRATCH)
        tokenizer = scratch_tokenizer(reader, get_template(template))
        model, context, max_tokens = build_scratch(tokenizer, max_positions=400).eval(), 80, 400
    tasks = pick_tasks(reader, "heldout", None)
    window = dict(tokenizer=tokenizer, template=template, actions=range(5), greedy=True, context=context,
                  max_tokens=max_tokens)
    actions: dict[str, list] = {"ours": [], "reference": []}

    class Recorder:
        def __init__(self, policy, key):
            self.policy, self.key = policy, key

        def reset(self, num_envs):
            self.policy.reset(num_envs)

        def act(self, *inputs):
            taken = torch.as_tensor(self.policy.act(*inputs))
            actions[self.key].append(taken)
            return taken

    with torch.inference_mode():
        setup = env_factory("darkroom")(reader.metadata, tasks, args.seeds)
        ours_s, _ = timed(lambda: run_in_context(Recorder(LMPolicy(model, **window), "ours"), setup, args.episodes,
                                                 0, "ours", progress=False))
        ref_tasks = tasks[:max(1, args.ref_envs // args.seeds)]
        ref_setup = env_factory("darkroom")(reader.metadata, ref_tasks, args.seeds)
        ref_s, _ = timed(lambda: run_in_context(Recorder(FullRecomputePolicy(model, **window), "reference"),
                                                ref_setup, args.episodes, 0, "reference", progress=False))
    steps = len(actions["ours"])
    ours_rate = setup.env.num_envs * steps / ours_s
    ref_rate = ref_setup.env.num_envs * len(actions["reference"]) / ref_s
    ours_sub = torch.stack(actions["ours"])[:, :ref_setup.env.num_envs]  # (steps, ref envs): the same goals/seeds
    same = float((ours_sub == torch.stack(actions["reference"])).float().mean())
    print(f"scratch LM acting: ours {setup.env.num_envs} envs x {steps} steps in {ours_s:.1f}s; reference "
          f"{ref_setup.env.num_envs} envs in {ref_s:.1f}s; identical greedy actions {same:.4f}")
    label = "trained" if args.lm_run else "untrained"
    return [
        figure(f"LM ({label}, from scratch) acting on {setup.env.num_envs} held-out goal x seed envs: batched + KV "
               "cache vs one env at a time, full recompute", "env steps/s", ours_rate, ref_rate, ">= 20x"),
        figure("identical greedy actions (batched cached vs full recompute)", "fraction of actions", same, None,
               "1"),
    ]


def in_context_learning(reader, data: str, args) -> list[dict]:
    from ad.commands.evaluate import pick_tasks
    from ad.evaluate import RandomPolicy, run_in_context
    from ad.plots import plot_in_context
    from models.lm.config import TrainLMConfig
    from models.lm.loader import load
    from models.lm.train import train
    from ad.registry import env_factory

    out = Path(args.run)
    config = make_config(TrainLMConfig, {"data": data, "out": str(out), "model": args.model, "context": args.context,
                                         "max_tokens": args.max_tokens, "batch_size": args.batch_size,
                                         "max_steps": args.train_steps, "warmup_steps": 5, "val_every": 0,
                                         "checkpoint_every": 10, "threads": args.threads,
                                         "resume": (out / "checkpoints" / "last.ckpt").exists()})
    start = time.perf_counter()
    train(config)
    train_s = time.perf_counter() - start
    policy = load(out, greedy=False, seed=0)
    tasks = pick_tasks(reader, "heldout", args.icl_tasks)
    setup = env_factory("darkroom")(reader.metadata, tasks, 1)
    start = time.perf_counter()
    with torch.inference_mode():
        result = run_in_context(policy, setup, args.episodes, seed=0, name="LM (SmolLM2+LoRA)")
    eval_s = time.perf_counter() - start
    random = run_in_context(RandomPolicy(5, 0), env_factory("darkroom")(reader.metadata, tasks, 1), args.episodes,
                            seed=0, name="random", progress=False)
    mean, _ = result.curve()
    rmean, _ = random.curve()
    plot = RESULTS / "lm_acting_icl.png"
    plot_in_context({r.name: r.curve() for r in (result, random)}, float(np.mean(setup.optimal)), plot,
                    title=f"LM in context on {len(tasks)} held-out DarkRoom goals ({args.train_steps} LoRA steps)")
    print(f"ICL: trained {args.train_steps} steps in {train_s:.0f}s, evaluated in {eval_s:.0f}s; return per episode "
          f"{np.round(mean, 2).tolist()} (random {np.round(rmean, 2).tolist()}, optimum "
          f"{np.mean(setup.optimal):.1f}); plot {plot}")
    last = len(mean)
    return [figure(f"in-context return on held-out goals: episode {last} vs episode 1 ({args.train_steps}-step "
                   "LoRA run)", "mean return", float(mean[-1]), float(mean[0]), "> 1x (improves in context)"),
            figure(f"in-context return at episode {last}: LM vs random policy", "mean return", float(mean[-1]),
                   float(rmean[-1]), "> 1x")]


def main(args: argparse.Namespace) -> None:
    if args.quick:
        args.envs, args.warmup, args.steps, args.ref_every, args.context = 4, 8, 8, 4, 12
        args.episodes = min(args.episodes, 5)
    icl = (not args.quick) if args.icl is None else args.icl
    torch.set_num_threads(args.threads)

    from ad.history.reader import task_split
    from ad.lm.pretrained import load_base

    reader = HistoryReader(args.data)
    figures = []
    if args.speed:
        model, tokenizer = load_base(args.model)
        _, heldout = task_split(reader)
        figures += acting_speed(model.eval(), tokenizer, reader, (heldout or reader.tasks())[:args.envs], args)
    if args.scratch:
        figures += scratch_acting(reader, args)
    if icl:
        figures += in_context_learning(reader, args.data, args)
    report(args.name, figures, args.quick, page="language-format")


if __name__ == "__main__":
    main(ARGS)
