"""DAgger for bandit AD (#17): does training on AD's own pulls, labelled by Thompson sampling, close the regret gap?

Round 0 is a bandit demo's AD (``ad demo --task bandit ...``). Each round k = 1..R:

1. roll the current model out on every training instance (one run each, sampled actions);
2. label every pull with Thompson sampling's action probabilities given the history AD wrote up to it (Monte Carlo
   over its posterior, :func:`benchmarks.bandit_imitation.thompson_probabilities`) and add these histories to the
   aggregate of all rounds;
3. train a *fresh* model of the demo's configuration from scratch, with the demo's optimiser schedule, on batches
   of half source histories (the usual AD loss, all heads) and half aggregated histories (cross-entropy to the
   soft Thompson labels);
4. evaluate it beside the demo's AD on the held-out instances as the demo does (regret / Thompson sampling's).

    python benchmarks/bandit_dagger.py --demo data/demo-bandit-g10 --rounds 3 --steps 3000

Writes ``<work>/round<k>/`` (a run folder ``ad eval`` / :func:`tasks.bandit.demo.evaluate_regret` reads) and
``<work>/results.json``; ``--quick`` is a 1-round, 20-step smoke run.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def training_histories(data: Path):
    """States (N, T, D), actions (N, T), rewards (N, T) tensors and arm means (N, arms) of the training instances."""
    import torch

    from ad.history import HistoryReader
    from tasks.bandit.instances import task_means

    reader = HistoryReader(data)
    streams = reader.streams(list(reader.metadata["split"]["train"]), columns=["state", "action", "reward"])
    states = torch.tensor(np.stack([s.columns["state"] for s in streams]).astype(np.float32))
    actions = torch.tensor(np.stack([s.columns["action"] for s in streams]).astype(np.int64))
    rewards = torch.tensor(np.stack([s.columns["reward"] for s in streams]).astype(np.float32))
    return states, actions, rewards, task_means([s.task for s in streams]), reader.metadata["task_spec"]


def labelled_rollouts(model, means: np.ndarray, spec: dict, seed: int, draws: int, rng: np.random.Generator):
    """AD's own histories on ``means`` as model inputs, with Thompson sampling's probabilities as labels."""
    import torch

    from benchmarks.bandit_imitation import own_rollouts, thompson_probabilities
    from tasks.bandit.instances import pull_observations

    kind, arms, pulls = spec["kind"], int(spec["arms"]), int(spec["pulls"])
    noise = float(spec.get("noise_std") or 0.5)
    with torch.no_grad():
        _, actions, rewards = own_rollouts(model, means, kind, noise, pulls, seed=seed)  # (N, T) each
    labels = thompson_probabilities(kind, noise, actions, rewards, arms, rng, draws).astype(np.float32)  # (N, T, A)
    prev_a = np.concatenate([np.zeros((len(actions), 1), np.int64), actions[:, :-1]], 1)  # (N, T)
    prev_r = np.concatenate([np.zeros((len(actions), 1), np.float32), rewards[:, :-1]], 1)  # (N, T)
    obs = pull_observations(prev_a.reshape(-1), prev_r.reshape(-1), arms, kind).reshape(len(actions), pulls, -1)
    obs[:, 0] = 0  # before the first pull: nothing observed yet
    return [torch.tensor(x) for x in (obs.astype(np.float32), actions, rewards, labels)]


def train_fresh(config, source, aggregate, steps: int, batch: int, seed: int, log):
    """A new ADTransformer trained from scratch on half source windows, half soft-labelled aggregate windows."""
    import torch

    from models.training import OptimConfig, lr_multiplier
    from models.rl.model import ADTransformer
    from models.rl.module import parameter_groups

    torch.manual_seed(seed)
    model = ADTransformer(config).train()
    optim = OptimConfig(decay_steps=steps)
    opt = torch.optim.AdamW(parameter_groups(model, optim.weight_decay), lr=optim.learning_rate,
                            betas=(optim.beta1, optim.beta2))
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_multiplier(s, optim))
    S, A, R = source
    DS, DA, DR, DP = aggregate
    T = A.shape[1]
    generator = torch.Generator().manual_seed(seed)
    zeros, mask = torch.zeros(batch, T, dtype=torch.long), torch.ones(batch, T, dtype=torch.bool)
    started = time.time()
    for step in range(steps):
        j = torch.randint(0, len(A), (batch,), generator=generator)
        i = torch.randint(0, len(DA), (batch,), generator=generator)
        src_loss, metrics = model.compute_loss({"states": S[j], "actions": A[j], "rewards": R[j],
                                                "logprobs": torch.zeros(batch, T), "timesteps": zeros, "mask": mask})
        logits = model(DS[i], DA[i], DR[i], zeros)["action"]  # (B, T, A)
        soft = -(DP[i] * torch.log_softmax(logits, -1)).sum(-1).mean()
        opt.zero_grad()
        (src_loss + soft).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        if step % 250 == 0 or step == steps - 1:
            log(f"  step {step}: source action nll {metrics['action_nll'].item():.3f}, soft-label loss "
                f"{soft.item():.3f} ({time.time() - started:.0f}s)")
    return model.eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", type=Path, required=True, help="a bandit demo folder (data/ and ad/ inside)")
    parser.add_argument("--work", type=Path, default=None, help="output folder (default <demo>/dagger)")
    parser.add_argument("--rounds", type=int, default=3, help="DAgger rounds")
    parser.add_argument("--steps", type=int, default=3000, help="optimiser steps of each round's fresh model")
    parser.add_argument("--batch", type=int, default=8, help="source windows and aggregate windows per step (each)")
    parser.add_argument("--draws", type=int, default=200, help="Monte Carlo draws per Thompson-sampling label")
    parser.add_argument("--envs", type=int, default=10, help="evaluation runs per held-out instance")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="1 round of 20 steps, 2 evaluation runs (smoke test)")
    args = parser.parse_args()
    import torch

    from models.rl.model import ADTransformer
    from tasks.bandit.demo import evaluate_regret

    if args.quick:
        args.rounds, args.steps, args.envs = 1, 20, 2
    torch.set_num_threads(args.threads)
    work = args.work or args.demo / "dagger"
    work.mkdir(parents=True, exist_ok=True)
    S, A, R, means, spec = training_histories(args.demo / "data")
    model = ADTransformer.from_pretrained(args.demo / "ad" / "model")
    config = model.config
    rng = np.random.default_rng(0)
    parts: list[list] = [[], [], [], []]
    results: dict[str, dict[str, float]] = {}
    for k in range(1, args.rounds + 1):
        started = time.time()
        for part, x in zip(parts, labelled_rollouts(model, means, spec, 100 + k, args.draws, rng)):
            part.append(x)
        aggregate = [torch.cat(p) for p in parts]
        print(f"round {k}: rollouts + labels {time.time() - started:.0f}s, aggregate {len(aggregate[1])} histories",
              flush=True)
        model = train_fresh(config, (S, A, R), aggregate, args.steps, args.batch, 1000 + k,
                            lambda line: print(line, flush=True))
        run = work / f"round{k}"
        if run.exists():
            shutil.rmtree(run)
        shutil.copytree(args.demo / "ad", run, ignore=shutil.ignore_patterns("checkpoints", "tb"))
        model.save_pretrained(run / "model")
        regret = evaluate_regret(args.demo / "data", {"AD": args.demo / "ad", f"AD-DAgger{k}": run},
                                 envs_per_task=args.envs, seed=0, threads=args.threads)
        results[f"round{k}"] = {name: round(v, 3) for name, v in regret["ratio_to_thompson"].items()}
        print(f"round {k}: regret / Thompson sampling's {results[f'round{k}']}", flush=True)
        (work / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
