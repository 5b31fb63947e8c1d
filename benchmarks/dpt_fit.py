"""Does a bandit DPT learn the posterior or memorise its training contexts? Its teacher-forced negative
log-likelihood of the best arm (DPT's target) on random contexts of training and of held-out instances, by pull,
beside the exact Bayesian posterior's on the same contexts (Beta(1, 1) priors are exact: the arm means are U(0, 1)).

No model does better than the posterior on average over the task distribution, so a DPT far below it on its training
contexts and far above it on held-out ones has memorised which arm is best in each context it saw. One trained DPT
per run and seed, read from the folders that ``benchmarks/in_context_methods.py --keep`` leaves (``dpt/`` and
``data-random/``); no training here.

    python benchmarks/dpt_fit.py --config configs/bandit/dpt_fit.yaml
    python benchmarks/dpt_fit.py --quick    # a tiny DPT trained first, well under a minute
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, merge_report, parse_args  # noqa: E402
from benchmarks.dpt_calibration import CAPABILITY, QUICK, posterior_best  # noqa: E402

#: Pull ranges (1-based, inclusive) the likelihoods are averaged over.
RANGES = ((1, 10), (11, 50), (51, 150), (151, 300), (301, 500))


def contexts(folder: Path, count: int, seed: int) -> dict[str, dict]:
    """``count`` random contexts (whole histories) of the training ("train") and of the held-out ("heldout")
    instances of a demo's ``data-random`` dataset, as the training batches hold them: actions, rewards, best-arm
    targets (B, T). The dataset is read once for both."""
    from ad.data import RLDataModule
    from ad.history import HistoryReader

    path = str(folder / "data-random")
    pulls = int(HistoryReader(path).metadata["task_spec"]["pulls"])
    data = RLDataModule(path, window=pulls, batch_size=count, optimal_targets=True,
                        val_batches=1, num_workers=0, seed=seed)
    data.setup()
    return {"train": next(iter(data.train_dataloader())), "heldout": next(iter(data.val_dataloader()))}


def likelihoods(model, batch: dict, chunk: int = 2000) -> dict[str, np.ndarray]:
    """Per context and pull (B, T): DPT's and the posterior's log-probability of the best arm, and
    KL(posterior || DPT) of their whole distributions."""
    import torch

    with torch.no_grad():
        out = model(batch["states"], batch["actions"], batch["rewards"], batch["timesteps"])
    logp = out["action"].log_softmax(-1).double().numpy()  # (B, T, A)
    actions, rewards = batch["actions"].numpy(), batch["rewards"].numpy().astype(np.float64)
    target = batch["action_targets"].numpy()[..., None]  # (B, T, 1)
    b, t, arms = logp.shape
    pulled = np.eye(arms)[actions]  # (B, T, A)
    before = np.zeros((b, 1, arms))  # the token at pull t holds the pulls before it
    wins = np.concatenate([before, np.cumsum(pulled * rewards[..., None], 1)[:, :-1]], 1)  # (B, T, A)
    losses = np.concatenate([before, np.cumsum(pulled * (1 - rewards[..., None]), 1)[:, :-1]], 1)
    flat_w, flat_l = wins.reshape(-1, arms), losses.reshape(-1, arms)
    posterior = np.concatenate([posterior_best(flat_w[i:i + chunk], flat_l[i:i + chunk])
                                for i in range(0, len(flat_w), chunk)]).reshape(b, t, arms)
    log_post = np.log(np.clip(posterior, 1e-12, 1.0))
    return {"dpt": np.take_along_axis(logp, target, -1)[..., 0],
            "posterior": np.take_along_axis(log_post, target, -1)[..., 0],
            "kl": (posterior * (log_post - logp)).sum(-1)}


def summarise(values: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Mean negative log-likelihoods and KL over each pull range of :data:`RANGES` present in the contexts."""
    out = {}
    for lo, hi in RANGES:
        if lo > values["dpt"].shape[1]:
            break
        part = {k: v[:, lo - 1: hi] for k, v in values.items()}
        out[f"{lo}-{hi}"] = {"nll_dpt": round(float(-part["dpt"].mean()), 4),
                             "nll_posterior": round(float(-part["posterior"].mean()), 4),
                             "kl_posterior_dpt": round(float(part["kl"].mean()), 4)}
    return out


def plot(rows: dict[str, dict], path: Path) -> Path:
    """DPT's NLL of the best arm minus the posterior's on the same contexts, per pull range, on training and on
    held-out contexts (below zero: better than the posterior, which only memorising can be), one panel a run."""
    from ad.plots import pyplot, save_figure

    fig, axes = pyplot().subplots(1, len(rows), figsize=(5 * len(rows), 3.8), squeeze=False, sharey=True)
    for ax, (label, per_seed) in zip(axes[0], rows.items()):
        for seed, splits in per_seed.items():
            ranges = list(splits["heldout"])
            x = np.arange(len(ranges))
            for split, marker in (("train", "o"), ("heldout", "s")):
                excess = [splits[split][r]["nll_dpt"] - splits[split][r]["nll_posterior"] for r in ranges]
                ax.plot(x, excess, marker=marker, label=f"{'training' if split == 'train' else 'held-out'} "
                                                        f"contexts, seed {seed}")
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_xticks(x, ranges)
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7)
    return save_figure(fig, path, axes[0][0], xlabel="pulls", ylabel="DPT's NLL - posterior's (nats)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny DPT trained first, well under a minute")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds (a trained DPT each)")
    parser.add_argument("--runs", type=json.loads,
                        default={"10 contexts x 1000 instances, 27000 steps":
                                 "data/bench-in-context-methods/bandit-random-h10-27k-seed{seed}"},
                        help="label -> folder of each seed's bandit demo with DPT on random contexts ({seed} is "
                             "replaced), as JSON (a mapping in a --config file)")
    parser.add_argument("--contexts", type=int, default=64, help="contexts of each split compared")
    args = parse_args(parser)
    import torch

    from models.rl.model import ADTransformer

    torch.set_num_threads(1)
    if args.quick:
        from tasks.bandit.demo import run_demo

        args.runs, args.seeds, args.contexts = {"quick": "data/bench-dpt-fit-quick/seed{seed}"}, args.seeds[:1], 8
        for seed in args.seeds:
            run_demo(args.runs["quick"].format(seed=seed), seed, methods="dpt", **QUICK)
    rows: dict[str, dict] = {}
    figures = []
    for label, template in args.runs.items():
        for seed in args.seeds:
            folder = Path(template.format(seed=seed))
            model = ADTransformer.from_pretrained(folder / "dpt" / "model").eval()
            splits = {split: summarise(likelihoods(model, batch))
                      for split, batch in contexts(folder, args.contexts, seed).items()}
            rows.setdefault(label, {})[seed] = splits
            last = list(splits["heldout"])[-1]
            fig = figure(f"bandit DPT ({label}): teacher-forced NLL of the best arm, pulls {last}, held-out "
                         f"instances' random contexts, vs the exact posterior's, seed {seed}", "nats",
                         splits["heldout"][last]["nll_dpt"], splits["heldout"][last]["nll_posterior"], "-",
                         higher_is_better=False)
            fig.update(per_range=splits, contexts=args.contexts, run=str(folder))
            figures.append(fig)
            print(f"{label}, seed {seed}:")
            for split, table in splits.items():
                for r, v in table.items():
                    print(f"  {split:>7} pulls {r:>7}: " + "  ".join(f"{k} {x:.3f}" for k, x in v.items()))
    plot(rows, RESULTS / f"dpt_fit{'_quick' if args.quick else ''}.png")
    merge_report("dpt_fit", args.quick, "bandit", figures, capability=CAPABILITY, page="in-context-methods")


if __name__ == "__main__":
    main()
