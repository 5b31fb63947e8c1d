"""Where AD loses to Thompson sampling on bandits: imitation on the source's own histories vs on AD's own contexts.

For each bandit demo folder (``ad demo --task bandit``: ``data/`` + ``ad/``), on its held-out instances:

* teacher-forced: AD reads Thompson sampling's recorded histories; at every pull, AD's action probabilities beside
  Thompson sampling's (Monte Carlo over its posterior given the same history);
* own contexts: AD pulls on its own (sampled actions, fresh reward noise); at every pull the same comparison, with
  Thompson sampling's probabilities given *AD's* history.

Printed per range of pulls: KL(Thompson || AD) and each one's probability of pulling the best arm. If AD matches the
source teacher-forced but not on its own contexts, the regret gap is compounding error (AD's small early
deviations take it to contexts unlike any training history), not the capacity to imitate.

    python benchmarks/bandit_imitation.py --demo data/bench-bandit/gaussian10-seed0 [more demo folders]
    python benchmarks/bandit_imitation.py --quick     # makes a small 5-armed demo first (about a minute)

Results: benchmarks/results/bandit_imitation.json (``_quick`` for --quick).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, report  # noqa: E402

RANGES = ((0, 0.1), (0.1, 0.4), (0.4, 0.8), (0.8, 1.0))  # pull ranges, as fractions of the pulls


def thompson_probabilities(kind: str, noise: float, actions: np.ndarray, rewards: np.ndarray, arms: int,
                           rng: np.random.Generator, draws: int) -> np.ndarray:
    """Thompson sampling's action probabilities before each pull of histories (N, T): (N, T, arms), by Monte Carlo."""
    from tasks.bandit.algorithms import Thompson

    N, T = actions.shape
    one_hot = np.eye(arms)[actions]  # (N, T, A)
    counts = np.cumsum(one_hot, axis=1) - one_hot  # (N, T, A): pulls before pull t
    sums = np.cumsum(one_hot * rewards[..., None], axis=1) - one_hot * rewards[..., None]  # (N, T, A)
    algo = Thompson(N * T, arms, kind, noise)
    algo.counts, algo.sums = counts.reshape(-1, arms), sums.reshape(-1, arms)
    a, b = algo.posterior()  # (N*T, A) each
    probs = np.zeros((N * T, arms))
    for _ in range(draws):
        sample = rng.beta(a, b) if kind == "bernoulli" else a + b * rng.standard_normal(a.shape)  # (N*T, A)
        probs[np.arange(N * T), sample.argmax(axis=1)] += 1.0 / draws
    return probs.reshape(N, T, arms)


def own_rollouts(model, means: np.ndarray, kind: str, noise: float, pulls: int, seed: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """AD pulling on its own (sampled actions): its probabilities (N, T, A), actions (N, T), rewards (N, T)."""
    import torch

    from models.rl.policy import ADPolicy
    from tasks.bandit.algorithms import draw_rewards
    from tasks.bandit.instances import pull_observations

    N, arms = means.shape
    rng, generator = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    policy = ADPolicy(model, greedy=False, generator=generator)
    policy.reset(N)
    probs, actions = np.zeros((N, pulls, arms)), np.zeros((N, pulls), dtype=np.int64)
    rewards = np.zeros((N, pulls), dtype=np.float32)
    a, r = np.zeros(N, dtype=np.int64), np.zeros(N, dtype=np.float32)
    for t in range(pulls):
        obs = pull_observations(a, r, arms, kind)
        if t == 0:  # before the first pull: nothing observed yet (zeros / index 0)
            obs = np.zeros_like(obs)
        logits = policy.logits(torch.as_tensor(obs), torch.as_tensor(a), torch.as_tensor(r),
                               torch.zeros(N, dtype=torch.long), torch.full((N,), t == 0))  # (N, A)
        probs[:, t] = torch.softmax(logits, dim=-1).numpy()
        a = torch.multinomial(torch.as_tensor(probs[:, t]), 1, generator=generator).squeeze(1).numpy()
        r = draw_rewards(rng, kind, means[np.arange(N), a], noise).astype(np.float32)
        actions[:, t], rewards[:, t] = a, r
    return probs, actions, rewards


def compare(ad: np.ndarray, ts: np.ndarray, best: np.ndarray) -> list[dict[str, float]]:
    """Per pull range: KL(Thompson || AD) and both probabilities of the best arm; ad, ts (N, T, A), best (N,)."""
    T = ad.shape[1]
    kl = np.sum(ts * (np.log(ts + 1e-6) - np.log(ad + 1e-9)), axis=-1)  # (N, T)
    rows = []
    for lo, hi in RANGES:
        s = slice(int(lo * T), int(hi * T))
        rows.append({"pulls": f"{s.start + 1}-{s.stop}", "kl": float(kl[:, s].mean()),
                     "ad_best": float(np.take_along_axis(ad[:, s], best[:, None, None], -1).mean()),
                     "ts_best": float(np.take_along_axis(ts[:, s], best[:, None, None], -1).mean())})
    return rows


def diagnose(folder: Path, instances: int, draws: int, seed: int) -> dict[str, list[dict[str, float]]]:
    """Teacher-forced and own-context comparisons of one demo folder's AD on its held-out instances."""
    import torch

    from ad.history import HistoryReader
    from models.rl.model import ADTransformer
    from tasks.bandit.instances import task_means

    reader = HistoryReader(folder / "data")
    spec = reader.metadata["task_spec"]
    kind, arms, pulls, noise = spec["kind"], int(spec["arms"]), int(spec["pulls"]), float(spec.get("noise_std") or 0.5)
    if spec.get("observation", "last-pull") != "last-pull":
        sys.exit(f"{folder}: only the default 'last-pull' observation is supported here")
    tasks = list(reader.metadata["split"]["heldout"])[:instances]
    model = ADTransformer.from_pretrained(folder / "ad" / "model").eval()
    streams = reader.streams(tasks, columns=["state", "action", "reward"])
    states = np.stack([s.columns["state"] for s in streams])  # (N, T) indices or (N, T, D) vectors
    states = states.astype(np.int64 if np.issubdtype(states.dtype, np.integer) else np.float32)
    actions = np.stack([s.columns["action"] for s in streams]).astype(np.int64)  # (N, T)
    rewards = np.stack([s.columns["reward"] for s in streams]).astype(np.float32)  # (N, T)
    means = task_means([s.task for s in streams])  # (N, A)
    best = means.argmax(axis=1)
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        logits = model(torch.as_tensor(states), torch.as_tensor(actions), torch.as_tensor(rewards),
                       torch.zeros(actions.shape, dtype=torch.long))["action"]  # (N, T, A)
    forced = compare(torch.softmax(logits, -1).numpy(),
                     thompson_probabilities(kind, noise, actions, rewards, arms, rng, draws), best)
    probs, own_actions, own_rewards = own_rollouts(model, means, kind, noise, pulls, seed)
    own = compare(probs, thompson_probabilities(kind, noise, own_actions, own_rewards, arms, rng, draws), best)
    return {"teacher_forced": forced, "own_contexts": own}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", nargs="*", default=[], help="bandit demo folders (ad demo --task bandit --out)")
    parser.add_argument("--instances", type=int, default=100, help="held-out instances per folder")
    parser.add_argument("--draws", type=int, default=1000, help="Monte Carlo draws per Thompson probability")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="make and diagnose a small 5-armed Bernoulli demo")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    folders = [Path(d) for d in args.demo]
    if args.quick:
        from benchmarks.ad_bandit import QUICK
        from tasks.bandit.demo import run_demo

        folders = [Path("data/bench-bandit-imitation-quick")]
        if not (folders[0] / "ad" / "model").is_dir():
            run_demo(folders[0], seed=args.seed, **QUICK)
        args.draws = min(args.draws, 200)
    if not folders:
        parser.error("give --demo folders or --quick")
    figures = []
    for folder in folders:
        result = diagnose(folder, args.instances, args.draws, args.seed)
        for mode, rows in result.items():
            for row in rows:
                print(f"{folder.name} {mode:>14} pulls {row['pulls']:>8}: KL(Thompson || AD) {row['kl']:.3f}, "
                      f"P(best arm) AD {row['ad_best']:.3f} vs Thompson {row['ts_best']:.3f}")
            last = rows[-1]
            figures.append(figure(f"{folder.name}: AD's P(best arm), pulls {last['pulls']}, {mode.replace('_', ' ')} "
                                  f"(reference: Thompson sampling's, same contexts; KL {last['kl']:.3f})",
                                  "probability", last["ad_best"], last["ts_best"], "ratio near 1 on both"))
    report("bandit_imitation", figures, args.quick, page="bandit")


if __name__ == "__main__":
    main()
