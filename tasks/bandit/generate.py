"""``ad generate bandit``: UCB1 / Thompson-sampling learning histories (or noise-distillation or random contexts) on
many bandit instances, into the store.

Layout: task = one instance (``bandit-bern5-i00123``), run = ``--seed``, one stream per unit; every pull is a
transition and a one-step episode (``update`` = ``episode`` = pull index, ``step`` = 0, ``terminated`` = True);
``state`` is what the env shows before the pull (:mod:`tasks.bandit.env`).
Instances run in fixed blocks of :data:`BLOCK` consecutive ids, each one vectorised computation with a generator
seeded by (seed, block), so an instance's history never depends on which blocks run or are already on disk.
``<out>/_run/summary.json`` records the source's mean cumulative regret next to uniformly random pulls'.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ad.files import write_json_atomic
from ad.config import data_options
from ad.history import ColumnSpec, HistorySpec, HistoryWriter, Location
from tasks.noise import return_record, summarize_records
from tasks.source_options import without_noise_options, without_random_options
from tasks.bandit.algorithms import GAUSSIAN_PRIOR, run_source
from tasks.bandit.config import BLOCK, GenerateConfig
from tasks.bandit.noise import noise_schedule, run_noise
from tasks.bandit.random import run_random
from tasks.bandit.instances import (arm_means, expected_regret, optimal_return, parse_task_name, pull_observations,
                                    random_regret, split_instances, task_name)

FAMILY = "bandit"


def history_spec(arms: int, kind: str, observation: str = "last-pull") -> HistorySpec:
    """Columns of a bandit dataset: the observation (:mod:`tasks.bandit.env`), the arm, scalar logprobs."""
    if observation == "none":
        state = ColumnSpec.discrete(1)
    else:
        state = ColumnSpec.discrete(2 * arms + 1) if kind == "bernoulli" else ColumnSpec.vector(2 * arms)
    return HistorySpec(state=state, action=ColumnSpec.discrete(arms), logprob="scalar")


def dataset_metadata(cfg: GenerateConfig) -> dict[str, Any]:
    """task_spec, source, seeds, split and the held-out instances' optimal returns of a run (every instance's arm
    means follow from its name and are in its unit record; ``tasks`` lists only the held-out ones)."""
    train, heldout = split_instances(cfg.instances, cfg.heldout_fraction, cfg.seed)
    tasks = {task_name(cfg.kind, cfg.arms, i): {
        "split": "heldout", "optimal_return": float(optimal_return(arm_means(cfg.kind, cfg.arms, i)))} for i in heldout}
    last = cfg.observation == "last-pull"
    vector = last and cfg.kind == "gaussian"
    source = data_options(cfg)
    source = source if cfg.source == "noise" else without_noise_options(source)
    source = source if cfg.source == "random" else without_random_options(source)
    if cfg.kind == "gaussian" and cfg.source == "thompson":
        source["prior"] = {"mean": GAUSSIAN_PRIOR[0], "std": GAUSSIAN_PRIOR[1]}
    return {
        "task_spec": {"env": "bandit", "env_class": "tasks.bandit.env:BanditEnv",
                      "vector_env_class": "tasks.bandit.vector_env:BanditVectorEnv", "kind": cfg.kind,
                      "arms": cfg.arms, "noise_std": cfg.noise_std if cfg.kind == "gaussian" else None,
                      "num_states": 0 if vector else 2 * cfg.arms + 1 if last else 1,
                      "state_dim": 2 * cfg.arms if vector else 0,
                      "num_actions": cfg.arms, "episode_length": 1, "pulls": cfg.pulls,
                      "observation": cfg.observation,
                      "observation_format": ("[one_hot(previous arm), previous reward * one_hot(previous arm)], "
                                             "zeros before the first pull" if vector else
                                             "1 + 2 * previous arm + previous reward, 0 before the first pull"
                                             if last else "constant 0"),
                      "means": "U(0, 1) per arm, drawn by a generator keyed by (kind, arms, instance index)"},
        "source": {"algorithm": cfg.source, "config": source, **(
            {"implementation": "tasks.bandit.algorithms.run_source"} if cfg.source not in ("noise", "random") else
            {"implementation": "tasks.bandit.random.run_random", "behaviour": "one arm distribution per instance "
             "(tasks.random_source.behaviour_distributions), independent of the means; it is in the unit record "
             "(behaviour_probs)"} if cfg.source == "random" else
            {"implementation": "tasks.bandit.noise.run_noise", "demonstrator": "the best arm",
             "schedule": "epsilon per pull: max(floor, end + (start - end) * (1 - progress)^power), progress = "
                         "min(1, pull / ((pulls - 1) * decay_fraction)); each instance's floor and best expected "
                         "return are in its unit record"})},
        "seeds": {"seed": cfg.seed, "run": cfg.seed},
        "split": {"train": [task_name(cfg.kind, cfg.arms, i) for i in train],
                  "heldout": [task_name(cfg.kind, cfg.arms, i) for i in heldout]},
        "tasks": tasks,
    }


def block_histories(cfg: GenerateConfig, block: int) -> dict[str, np.ndarray]:
    """The source algorithm's histories of instance ids ``block * BLOCK ...`` (at most BLOCK of them)."""
    ids = np.arange(block * BLOCK, min((block + 1) * BLOCK, cfg.instances))
    means = np.stack([arm_means(cfg.kind, cfg.arms, i) for i in ids])  # (N, arms)
    rng = np.random.default_rng([cfg.seed, block])
    if cfg.source == "noise":
        floor, eps = noise_schedule(cfg, means, [task_name(cfg.kind, cfg.arms, i) for i in ids])
        out = {**run_noise(cfg, means, eps, rng), "floor": floor, "eps": eps}
    elif cfg.source == "random":  # (N, histories, ...) : each instance's histories side by side
        out = {k: v.reshape(len(ids), cfg.histories, *v.shape[1:])
               for k, v in run_random(cfg, np.repeat(means, cfg.histories, axis=0), rng).items()}
    else:
        out = run_source(cfg.source, cfg.kind, means, cfg.pulls, rng, cfg.noise_std, cfg.ucb_c)
    out["ids"], out["means"] = ids, means
    return out


def unit_columns(action: np.ndarray, reward: np.ndarray, logprob: np.ndarray, arms: int, kind: str,
                 observation: str = "last-pull") -> dict[str, np.ndarray]:
    """History columns of one instance's pulls (P,): one stream, one one-step episode per pull."""
    P = len(action)
    pulls = np.arange(P)
    if observation == "last-pull":  # before pull t: the outcome of pull t - 1
        previous = pull_observations(action[:-1], reward[:-1], arms, kind)
        state = np.zeros((P, *previous.shape[1:]), previous.dtype)
        state[1:] = previous
    else:
        state = np.zeros(P, np.int8)
    return {"stream": np.zeros(P, np.int32), "update": pulls.astype(np.int64), "episode": pulls.astype(np.int32),
            "step": np.zeros(P, np.int32), "state": state, "action": action.astype(np.int16),
            "reward": reward.astype(np.float32), "terminated": np.ones(P, bool), "truncated": np.zeros(P, bool),
            "logprob": logprob.astype(np.float32)}


def instance_columns(cfg: GenerateConfig, hist: dict[str, np.ndarray], j: int) -> dict[str, np.ndarray]:
    """History columns of instance ``j`` of a block: one stream, or (random source) ``cfg.histories`` streams."""
    if hist["action"].ndim == 2:
        return unit_columns(hist["action"][j], hist["reward"][j], hist["logprob"][j], cfg.arms, cfg.kind,
                            cfg.observation)
    streams = [unit_columns(hist["action"][j, h], hist["reward"][j, h], hist["logprob"][j, h], cfg.arms, cfg.kind,
                            cfg.observation) for h in range(hist["action"].shape[1])]
    for h, columns in enumerate(streams):
        columns["stream"][:] = h
    return {name: np.concatenate([c[name] for c in streams]) for name in streams[0]}


def noise_record(hist: dict[str, np.ndarray], j: int) -> dict[str, Any]:
    """The noise source's record of instance ``j`` of a block: its floor, the exact expected reward of its best
    (lowest) noise level and the measured returns (:func:`tasks.noise.return_record`; an episode is one pull)."""
    means, eps = hist["means"][j], hist["eps"][j]
    best = float((1 - eps.min()) * means.max() + eps.min() * means.mean())
    return {**return_record(hist["reward"][j][None], eps, float(means.max())), "noise_floor": float(hist["floor"][j]),
            "expected_best_return": best, "expected_best_fraction": best / float(means.max())}


def source_histories(cfg: GenerateConfig) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """Each instance's task name and learning history (the columns of its one stream), in instance order: what
    :func:`generate` writes, for a caller that writes them through :class:`ad.history.HistoryWriter` itself."""
    for block in range(-(-cfg.instances // BLOCK)):
        hist = block_histories(cfg, block)
        for j, i in enumerate(hist["ids"]):
            yield task_name(cfg.kind, cfg.arms, i), instance_columns(cfg, hist, j)


def generate(cfg: GenerateConfig) -> Path | str:
    """Run the source algorithm on every instance of ``cfg``, write the histories to ``cfg.out``; returns its path
    (a ``Path`` for a local dataset, else the ``--out`` URL)."""
    from ad.progress import Progress

    if cfg.source == "noise":  # an unreachable cap is refused before anything is written
        noise_schedule(cfg, np.stack([arm_means(cfg.kind, cfg.arms, i) for i in range(cfg.instances)]),
                       [task_name(cfg.kind, cfg.arms, i) for i in range(cfg.instances)])
    metadata = dataset_metadata(cfg)
    location = Location.of(cfg.out)
    writer = HistoryWriter(location, spec=history_spec(cfg.arms, cfg.kind, cfg.observation), family=FAMILY,
                           metadata=metadata, planned_tasks=cfg.instances)  # UserError before anything is overwritten
    local = location.local_path()
    out: Path | str = Path(local) if local is not None else cfg.out
    names = [task_name(cfg.kind, cfg.arms, i) for i in range(cfg.instances)]
    missing = [i for i, name in enumerate(names) if not writer.is_complete(name, cfg.seed)]
    todo = sorted({i // BLOCK for i in missing})  # blocks with a unit to (re)write
    if len(missing) < cfg.instances:
        print(f"resuming: {cfg.instances - len(missing)} of {cfg.instances} instances already in {out}")
    started = time.time()
    with writer, Progress(len(missing), desc=f"{cfg.source} on {cfg.kind} bandits", unit="instance",
                          show=cfg.progress) as bar:  # the writer's close records every committed unit
        for b in todo:
            hist = block_histories(cfg, b)
            actions = hist["action"].reshape(len(hist["ids"]), -1)  # (N, histories * pulls)
            regret = expected_regret(hist["means"], actions).sum(axis=1) / (actions.shape[1] / cfg.pulls)  # (N,)
            for j, i in enumerate(hist["ids"]):
                if writer.is_complete(names[i], cfg.seed):
                    continue
                with writer.unit(names[i], cfg.seed) as unit:  # aborted on any exception
                    unit.append(instance_columns(cfg, hist, j))
                    info = {"means": hist["means"][j].tolist(), "regret": float(regret[j]),
                            "optimal_return": float(optimal_return(hist["means"][j])), "pulls": cfg.pulls}
                    if cfg.source == "noise":
                        info.update(noise_record(hist, j))
                    if cfg.source == "random":
                        info["behaviour_probs"] = hist["probs"][j].tolist()  # (histories, arms)
                    unit.commit(info=info)
                bar.update(1)
    summary = summarize(cfg, location, metadata, time.time() - started)
    run_dir = Path(local) / "_run" if local is not None else Path("runs") / "generate-bandit"
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "summary.json", summary)
    print(f"{cfg.source} on {cfg.instances} {cfg.arms}-armed {cfg.kind} bandits, {cfg.pulls} pulls each: mean "
          f"cumulative regret {summary['source_regret']:.2f} (uniformly random pulls: {summary['random_regret']:.2f}); "
          f"{summary['seconds']:.1f}s -> {out}")
    return out


def summarize(cfg: GenerateConfig, location: Location, metadata: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Mean cumulative expected regret of the source over the dataset's instances (from the units' records), and
    the exact expected regret of uniformly random pulls on the same instances."""
    from ad.history import HistoryReader

    units = [u for u in HistoryReader(location).units() if u["run"] == cfg.seed]
    regrets = np.array([u.get("info", {}).get("regret", np.nan) for u in units], dtype=np.float64)
    randoms = np.array([cfg.pulls * random_regret(arm_means(cfg.kind, cfg.arms, parse_task_name(u["task"])[2]))
                        for u in units])
    return {"instances": len(units), "pulls": cfg.pulls, "source": cfg.source, "kind": cfg.kind, "arms": cfg.arms,
            "source_regret": float(np.nanmean(regrets)) if len(units) else float("nan"),
            "random_regret": float(randoms.mean()) if len(units) else float("nan"), "seconds": seconds,
            "split": {k: len(v) for k, v in metadata["split"].items()},
            **({"noise": summarize_records([u.get("info", {}) for u in units])} if cfg.source == "noise" else {})}
