"""Where DPT falls short of Thompson sampling on bandits: its predicted probability that each arm is the best, on
its own in-context pulls, beside the exact Bayesian posterior of the same pulls (the probability Thompson sampling
pulls each arm with; the instances' arm means are U(0, 1), Beta(1, 1) priors are exact).

A DPT that had learned the posterior would act exactly as Thompson sampling does; this measures how far it is, pull
by pull: the entropy of its prediction against the posterior's, the probability each gives the true best arm, and
KL(posterior || DPT). One trained DPT per seed (its held-out instances), read from the folders that
``benchmarks/in_context_methods.py --keep`` leaves.

    python benchmarks/dpt_calibration.py --config configs/bandit/dpt_calibration.yaml
    python benchmarks/dpt_calibration.py --config configs/bandit/dpt_calibration_100k_contexts.yaml
    python benchmarks/dpt_calibration.py --quick    # a tiny DPT trained first, well under a minute
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, merge_report, parse_args  # noqa: E402

CAPABILITY = "In-context methods on the same data (ad demo --methods)"
QUICK = dict(instances=40, pulls=50, dpt_steps=30, dpt_data="random", eval_envs=2)


def posterior_best(successes: np.ndarray, failures: np.ndarray, grid: int = 2000) -> np.ndarray:
    """(E, K) probability that each arm has the highest mean under independent Beta(1 + s, 1 + f) posteriors:
    P_k = integral of pdf_k(x) * prod_{j != k} cdf_j(x) dx, on a midpoint grid of ``grid`` points."""
    import torch

    x = (torch.arange(grid, dtype=torch.float64) + 0.5) / grid  # (G,)
    a = torch.as_tensor(successes, dtype=torch.float64)[..., None] + 1.0  # (E, K, 1)
    b = torch.as_tensor(failures, dtype=torch.float64)[..., None] + 1.0
    log_pdf = (a - 1) * torch.log(x) + (b - 1) * torch.log1p(-x)  # (E, K, G), unnormalised
    pdf = torch.exp(log_pdf - log_pdf.max(-1, keepdim=True).values)
    pdf = pdf / pdf.sum(-1, keepdim=True)  # (E, K, G): probability mass per grid cell
    cdf = torch.cumsum(pdf, -1) - 0.5 * pdf  # (E, K, G): mass below each cell's midpoint
    log_cdf = torch.log(cdf.clamp_min(1e-300))
    others = log_cdf.sum(1, keepdim=True) - log_cdf  # (E, K, G): log prod over the other arms
    best = (pdf * torch.exp(others)).sum(-1)  # (E, K)
    return (best / best.sum(-1, keepdim=True)).numpy()


class Watched:
    """A trained model's policy that samples as ``ad eval`` does and, at the pulls in ``at``, records its action
    probabilities beside the Beta posterior of the pulls so far."""

    def __init__(self, policy: Any, arms: int, at: set[int], means: np.ndarray, seed: int) -> None:
        self.policy, self.arms, self.at, self.means = policy, arms, at, means
        self.generator = np.random.default_rng(seed)
        self.rows: dict[int, dict[str, float]] = {}

    def reset(self, num_envs: int) -> None:
        self.policy.reset(num_envs)
        self.pull = 0
        self.successes = np.zeros((num_envs, self.arms))  # (E, K)
        self.failures = np.zeros((num_envs, self.arms))

    def act(self, obs, prev_action, prev_reward, timestep, first):
        import torch

        if self.pull > 0:
            rows, arms = np.arange(len(prev_action)), prev_action.numpy()
            self.successes[rows, arms] += prev_reward.numpy()
            self.failures[rows, arms] += 1.0 - prev_reward.numpy()
        probs = torch.softmax(self.policy.logits(obs, prev_action, prev_reward, timestep, first).double(), -1).numpy()
        if self.pull in self.at:
            self.rows[self.pull] = compare(probs, posterior_best(self.successes, self.failures), self.means)
        self.pull += 1
        cumulative = probs.cumsum(-1)
        draws = self.generator.random((len(probs), 1))
        return torch.from_numpy((draws > cumulative).sum(-1).clip(0, self.arms - 1))


def compare(model: np.ndarray, posterior: np.ndarray, means: np.ndarray) -> dict[str, float]:
    """Mean over envs of both distributions' entropy and mass on the true best arm, and KL(posterior || model)."""
    best = means.argmax(1)
    rows = np.arange(len(best))

    def entropy(p: np.ndarray) -> float:
        return float(-(p * np.log(np.clip(p, 1e-12, 1.0))).sum(1).mean())

    kl = (posterior * (np.log(np.clip(posterior, 1e-12, 1.0)) - np.log(np.clip(model, 1e-12, 1.0)))).sum(1)
    return {"entropy_dpt": entropy(model), "entropy_posterior": entropy(posterior),
            "best_arm_dpt": float(model[rows, best].mean()), "best_arm_posterior": float(posterior[rows, best].mean()),
            "kl_posterior_dpt": float(kl.mean())}


def measure(folder: Path, envs_per_task: int, seed: int, points: int) -> tuple[dict[int, dict[str, float]], float]:
    """Run the DPT of ``folder`` (``dpt/`` and ``data/`` of a bandit demo) on its held-out instances; returns the
    per-pull comparison and its cumulative regret."""
    import torch

    from ad.evaluate import run_in_context
    from ad.history import HistoryReader
    from ad.registry import env_factory, load_policy

    torch.set_num_threads(1)
    meta = HistoryReader(folder / "data").metadata
    pulls, arms = int(meta["task_spec"]["pulls"]), int(meta["task_spec"]["arms"])
    setup = env_factory("bandit")(meta, list(meta["split"]["heldout"]), envs_per_task)
    at = set(np.unique(np.geomspace(1, pulls - 1, points).astype(int)).tolist())
    watched = Watched(load_policy(folder / "dpt", greedy=False, seed=seed), arms, at, setup.env.means, seed)
    run_in_context(watched, setup, pulls, seed=seed, name="DPT", progress=False)
    return watched.rows, float(setup.env.regret().sum(1).mean())


def plot(per_seed: dict[int, dict[int, dict[str, float]]], path: Path) -> Path:
    """The probability on the best arm (DPT vs posterior) and KL per pull, one line per seed."""
    from ad.plots import pyplot, save_figure

    fig, (left, right) = pyplot().subplots(1, 2, figsize=(10, 3.8))
    for seed, rows in per_seed.items():
        pulls = sorted(rows)  # 0-based: the decision before pull p + 1
        x = [p + 1 for p in pulls]
        left.plot(x, [rows[p]["best_arm_dpt"] for p in pulls], marker="o", ms=3, label=f"DPT, seed {seed}")
        left.plot(x, [rows[p]["best_arm_posterior"] for p in pulls], ls="--", label=f"posterior, seed {seed}")
        right.plot(x, [rows[p]["kl_posterior_dpt"] for p in pulls], marker="o", ms=3, label=f"seed {seed}")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.legend(fontsize=8)
    left.set(xlabel="pull", ylabel="probability on the best arm")
    left.grid(alpha=0.3)
    return save_figure(fig, path, right, xlabel="pull", ylabel="KL(posterior || DPT), nats",
                       title="DPT vs the exact posterior, on DPT's own pulls")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny DPT trained first, well under a minute")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds (a trained DPT each)")
    parser.add_argument("--runs", default="data/bench-in-context-methods/bandit-random-h10-9k-seed{seed}",
                        help="folder of each seed's bandit demo with DPT ({seed} is replaced)")
    parser.add_argument("--envs-per-task", type=int, default=4, help="in-context runs per held-out instance")
    parser.add_argument("--points", type=int, default=12, help="pulls compared (log-spaced)")
    parser.add_argument("--variant", default="", help="name of the DPTs measured (e.g. 100k-contexts): it names the "
                                                      "plot and the figures' family tag, so other variants' stay")
    args = parse_args(parser)
    if args.quick:
        from tasks.bandit.demo import run_demo

        args.runs, args.seeds, args.envs_per_task = "data/bench-dpt-calibration-quick/seed{seed}", args.seeds[:1], 2
        for seed in args.seeds:
            run_demo(args.runs.format(seed=seed), seed, methods="dpt", **QUICK)
    per_seed, figures = {}, []
    for seed in args.seeds:
        rows, regret = measure(Path(args.runs.format(seed=seed)), args.envs_per_task, seed, args.points)
        per_seed[seed] = rows
        last = rows[max(rows)]
        fig = figure(f"DPT's probability on the best arm / the exact posterior's (Thompson's), pull {max(rows) + 1}, "
                     f"on its own pulls, held-out instances, seed {seed}", "probability", last["best_arm_dpt"],
                     last["best_arm_posterior"], "-")
        per_pull = {str(p + 1): {k: round(v, 4) for k, v in r.items()} for p, r in rows.items()}
        fig.update(regret=regret, per_pull=per_pull, runs=args.runs.format(seed=seed))
        figures.append(fig)
        print(f"seed {seed}: regret {regret:.2f}")
        for p, r in sorted(rows.items()):
            print(f"  pull {p + 1:4d}: " + "  ".join(f"{k} {v:.3f}" for k, v in r.items()))
    suffix = f"_{args.variant}" if args.variant else ""
    plot(per_seed, RESULTS / f"dpt_calibration{suffix}{'_quick' if args.quick else ''}.png")
    tag = f"bandit-{args.variant}" if args.variant else "bandit"
    merge_report("dpt_calibration", args.quick, tag, figures, capability=CAPABILITY, page="in-context-methods")


if __name__ == "__main__":
    main()
