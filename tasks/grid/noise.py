"""The noise source of the grid families (``ad generate darkroom --source noise``, Key-to-Door's): noise-distillation
histories in grid rooms; with ``--source random`` the same engine at noise 1 throughout, each stream acting from its
own drawn action distribution (:mod:`tasks.random_source`: the DPT paper's contexts).

The demonstrator walks a shortest path (:func:`tasks.grid.room.shortest_path_actions`: to the goal; in
Key-to-Door to the key, then to the door) and is made epsilon-greedy with the schedule of :mod:`tasks.noise`: one
noise level per episode, ``update`` = that level's index (the episode), ``logprob`` = the exact epsilon-greedy
probability of the taken action. The same dataset layout, task names, split and metadata as the family's A2C source;
the metadata's ``source`` is the noise source, each task records its epsilon floor and the exact expected return of
its best (lowest) noise level, and each unit's info in dataset.json records the measured returns
(:func:`tasks.noise.return_record`).

Every random draw of a task (exploration coins, random actions, start cells) comes from its own generator keyed by
(seed, task), so a task's histories do not depend on which other tasks run in the same batch or already ran; tasks run
:data:`TASKS_PER_BATCH` at a time in one vectorised env, and re-running the command skips committed tasks.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ad.errors import UserError
from ad.files import run_folder, write_json_atomic
from ad.history import HistoryReader, HistoryWriter, Location
from tasks.grid.family import GridFamily, history_spec
from tasks.grid.room import NUM_ACTIONS, start_cell
from tasks.noise import (TabularTasks, epsilon_floor, epsilon_greedy, epsilon_schedule, expected_return,
                         return_record, summarize_records)
from tasks.random_source import behaviour_distributions, sample_actions
from tasks.source_options import noise_config, random_config

#: Tasks simulated together in one vectorised env (the histories do not depend on it).
TASKS_PER_BATCH = 64
#: The source and its demonstrator as datasets record them (their names before they moved here: a dataset's settings
#: must stay the same for an interrupted run to resume).
RECORDED_NAME = "tasks.darkroom.noise_generate.run_noise"
RECORDED_DEMONSTRATOR = "shortest path (tasks.darkroom.goals.shortest_path_actions)"
#: History columns in the store's dtypes (the family's ``derive`` may split the state).
COLUMN_TYPES = {"stream": np.int32, "update": np.int64, "episode": np.int32, "step": np.int32, "state": np.int16,
                "action": np.int8, "reward": np.float32, "terminated": np.bool_, "truncated": np.bool_,
                "logprob": np.float32}


@dataclass(frozen=True)
class Demonstrator:
    """A family's shortest-path demonstrator: its action per full state of a task, and its tasks as tabular MDPs
    over full states (for the exact expected returns)."""

    greedy: Callable[[Any, tuple[int, ...]], np.ndarray]  #: ``(cfg, task)`` -> action per full state (O,)
    mdp: Callable[[Any, list[tuple[int, ...]]], TabularTasks]  #: ``(cfg, tasks)`` -> the tasks' MDPs


def noise_levels(cfg: Any, grid: GridFamily, demo: Demonstrator, tasks: list[tuple[int, ...]]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per task: the epsilon floor (T,), the schedule (T, episodes), the exact expected return of each task's best
    noise level (T,) and its optimum (T,) (the demonstrator's exact expected return: it walks a shortest path)."""
    mdp = demo.mdp(cfg, tasks)
    optimum = expected_return(mdp, np.zeros(len(tasks)))
    names = [grid.task_name(cfg.size, t) for t in tasks]
    floor = epsilon_floor(lambda eps: expected_return(mdp, eps), optimum, cfg.max_return_fraction, names)
    eps = epsilon_schedule(grid.episodes_per_stream(cfg), cfg.noise_start, cfg.noise_end, cfg.noise_decay_fraction,
                           cfg.noise_power, floor)  # (T, N)
    best = expected_return(mdp, eps.min(axis=1))  # the schedule is non-increasing: its lowest level is its best
    return floor, eps, best, optimum


def source_config(cfg: Any, grid: GridFamily, options: dict[str, Any]) -> dict[str, Any]:
    """The source config recorded in dataset.json: the room's options, the source's ``options``, the episodes."""
    config = {name: getattr(cfg, name) for name in ("size", "seed", "heldout_fraction", "episode_length",
                                                    "random_start", "num_envs")}
    config.update(options, episodes_per_stream=grid.episodes_per_stream(cfg),
                  terminate_on_goal=bool(getattr(cfg, "terminate_on_goal", True)))
    return config


def noise_metadata(cfg: Any, grid: GridFamily, tasks: list[tuple[int, ...]], floor: np.ndarray, best: np.ndarray,
                   optimum: np.ndarray) -> dict[str, Any]:
    """The family's metadata (task spec, split, tasks) with the noise source, and per task its floor and best
    expected return."""
    metadata = grid.metadata(cfg, tasks)
    config = source_config(cfg, grid, noise_config(cfg))
    metadata["source"] = {"algorithm": "noise", "implementation": RECORDED_NAME,
                          "demonstrator": RECORDED_DEMONSTRATOR,
                          "schedule": "epsilon per episode: max(floor, end + (start - end) * (1 - progress)^power), "
                                      "progress = min(1, episode / ((episodes - 1) * decay_fraction))",
                          "config": config}
    for t, task in enumerate(tasks):
        entry = metadata["tasks"][grid.task_name(cfg.size, task)]
        entry.update(noise_floor=float(floor[t]), expected_best_return=float(best[t]),
                     expected_best_fraction=float(best[t] / optimum[t]) if optimum[t] > 0 else None)
    return metadata


def run_noise(cfg: Any, grid: GridFamily, demo: Demonstrator, tasks: list[tuple[int, ...]], eps: np.ndarray,
              behaviour: np.ndarray | None = None) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    """Histories of ``cfg.num_envs`` streams of each task (one vectorised env): per task its stored columns
    (stream-major, time-ordered) and the episode returns (T, streams, episodes). ``eps`` (T, episodes).

    ``behaviour`` (T, streams, actions), if given, is each stream's distribution of its non-demonstrator actions
    (the random source's, :mod:`tasks.random_source`), else uniform; ``logprob`` is exact either way."""
    K, L, N, A = cfg.num_envs, cfg.episode_length, eps.shape[1], NUM_ACTIONS
    E = len(tasks) * K
    lanes = np.arange(E)
    explore, random_action, seeds, table = [], [], [], []
    for t, task in enumerate(tasks):  # every draw of a task from its own generator
        rng = np.random.default_rng([int(cfg.seed), *(int(x) for x in task), 0x4E015E])
        explore.append(rng.random((K, N, L)))
        random_action.append(rng.integers(0, A, (K, N, L)) if behaviour is None else
                             sample_actions(behaviour[t], rng.random((K, N, L)))[0])
        seeds.extend(int(s) for s in rng.integers(0, 2**31 - 1, K))
        greedy = demo.greedy(cfg, task)  # (O,)
        table.append(np.broadcast_to(greedy, (K, len(greedy))))
    explore, random_action = np.concatenate(explore), np.concatenate(random_action)  # (E, N, L)
    table = np.concatenate(table)  # (E, O)
    eps_env = np.repeat(eps, K, axis=0)  # (E, N)
    env = grid.make_env(cfg, tasks)
    obs, _ = env.reset(seed=seeds)
    out = {name: np.zeros((E, N * L), dtype) for name, dtype in COLUMN_TYPES.items()}
    length = np.zeros(E, np.int64)
    returns = np.zeros((E, N))
    while True:
        episode, step = env.episode.copy(), env.elapsed.copy()  # (E,) the level and step about to act
        live = episode < N
        if not live.any():
            break
        e = np.minimum(episode, N - 1)
        level = eps_env[lanes, e]  # (E,)
        action, logprob = epsilon_greedy(table[lanes, obs], level, explore[lanes, e, step],
                                         random_action[lanes, e, step], A)
        if behaviour is not None:  # the taken action's probability under the stream's own random distribution
            q = behaviour.reshape(E, A)[lanes, action]
            logprob = np.log((1.0 - level) * (action == table[lanes, obs]) + level * q)
        new_obs, reward, terminated, truncated, _ = env.step(action)
        rows = lanes[live]
        at = length[rows]
        for name, value in (("stream", lanes % K), ("update", e), ("episode", e), ("step", step), ("state", obs),
                            ("action", action), ("reward", reward), ("terminated", terminated),
                            ("truncated", truncated & ~terminated), ("logprob", logprob)):
            out[name][rows, at] = np.broadcast_to(value, (E,))[rows]
        length[rows] += 1
        returns[rows, e[rows]] += reward[rows]
        obs = new_obs
    histories = []
    for t in range(len(tasks)):
        envs = range(t * K, (t + 1) * K)
        columns = {name: np.concatenate([out[name][i, :length[i]] for i in envs]) for name in COLUMN_TYPES}
        histories.append(grid.stored(cfg, columns))
    return histories, returns.reshape(len(tasks), K, N)


def generate_noise(cfg: Any, grid: GridFamily, demo: Demonstrator) -> Path | str:
    """Run the noisy demonstrator on every task of ``cfg`` and write its histories to ``cfg.out``; returns the path."""
    from ad.progress import Progress

    if cfg.backend != "local":
        raise UserError("--source noise runs in this process only (seconds for every task); drop --backend")
    tasks = grid.tasks(cfg)
    random = getattr(cfg, "source", "noise") == "random"
    if random:  # noise 1 throughout, from each stream's own action distribution
        optimum = expected_return(demo.mdp(cfg, tasks), np.zeros(len(tasks)))
        eps = np.ones((len(tasks), grid.episodes_per_stream(cfg)))
        behaviour = stream_behaviours(cfg, tasks)
        metadata = random_metadata(cfg, grid, tasks)
    else:
        floor, eps, best, optimum = noise_levels(cfg, grid, demo, tasks)  # UserError for an unreachable cap, first
        metadata = noise_metadata(cfg, grid, tasks, floor, best, optimum)
    location = Location.of(cfg.out)
    writer = HistoryWriter(location, spec=history_spec(cfg, grid, critic=False), family=grid.family, metadata=metadata,
                           planned_tasks=len(tasks))  # raises UserError before anything is overwritten
    local = location.local_path()
    out: Path | str = Path(local) if local is not None else cfg.out
    names = [grid.task_name(cfg.size, t) for t in tasks]
    todo = [i for i, name in enumerate(names) if not writer.is_complete(name, cfg.seed)]
    if len(todo) < len(tasks):
        print(f"resuming: {len(tasks) - len(todo)} of {len(tasks)} {grid.noun} already in {out}")
    started = time.time()
    what = "random contexts" if random else "noisy demonstrator"
    with writer, Progress(len(todo), desc=f"{what} on {grid.family} {grid.noun}", unit="task",
                          show=cfg.progress and bool(todo)) as bar:  # the writer's close records committed units
        for b in range(0, len(todo), TASKS_PER_BATCH):
            batch = todo[b:b + TASKS_PER_BATCH]
            histories, returns = run_noise(cfg, grid, demo, [tasks[i] for i in batch], eps[batch],
                                           behaviour[batch] if random else None)
            for j, i in enumerate(batch):
                with writer.unit(names[i], cfg.seed) as unit:  # aborted on any exception
                    unit.append(histories[j])
                    record = return_record(returns[j], eps[i], float(optimum[i]))
                    unit.commit(info={**record, "behaviour_probs": behaviour[i].tolist()} if random else
                                {**record, "noise_floor": float(floor[i]), "expected_best_return": float(best[i]),
                                 "expected_best_fraction": float(best[i] / optimum[i]) if optimum[i] > 0 else None})
                bar.update(1)
    summary = summarize(cfg, location, time.time() - started, grid.episodes_per_stream(cfg))
    write_json_atomic(run_folder(cfg.out, location, cfg.run_dir) / "summary.json", summary)
    print(noise_line(summary, grid.noun, out) if not random else
          f"random contexts on {summary['tasks']} {grid.noun}: mean return / optimum "
          f"{summary['mean_lowest_noise_mean_fraction']:.3f}, best episode {summary['max_best_episode_fraction']:.3f}; "
          f"{summary['seconds']:.1f}s -> {out}")
    return out


def stream_behaviours(cfg: Any, tasks: list[tuple[int, ...]]) -> np.ndarray:
    """Each stream's action distribution (T, num_envs, actions) for the random source, from a generator keyed by
    (seed, task) (:func:`tasks.random_source.behaviour_distributions`): independent of the goal."""
    return np.stack([behaviour_distributions(np.random.default_rng([int(cfg.seed), *(int(x) for x in task), 0xD1C7]),
                                             cfg.num_envs, NUM_ACTIONS, cfg.random_policy, cfg.random_alpha,
                                             cfg.random_mix) for task in tasks])


def random_metadata(cfg: Any, grid: GridFamily, tasks: list[tuple[int, ...]]) -> dict[str, Any]:
    """The family's metadata (task spec, split, tasks) with the random source."""
    metadata = grid.metadata(cfg, tasks)
    config = source_config(cfg, grid, random_config(cfg))
    metadata["source"] = {"algorithm": "random", "implementation": RECORDED_NAME,
                          "behaviour": "one action distribution per stream (tasks.random_source."
                                       "behaviour_distributions), independent of the task; each unit's record has "
                                       "them (behaviour_probs)", "config": config}
    return metadata


def summarize(cfg: Any, location: Location, seconds: float, episodes: int) -> dict[str, Any]:
    """The data's returns over this run's units (their records in dataset.json) for summary.json."""
    records = [u.get("info", {}) for u in HistoryReader(location).units() if u["run"] == cfg.seed]
    return {"source": "noise", **summarize_records(records), "max_return_fraction": cfg.max_return_fraction,
            "episodes_per_stream": episodes, "streams": cfg.num_envs, "seconds": seconds}


def noise_line(summary: dict[str, Any], noun: str, out: Any) -> str:
    """The line a noise generation prints: the data's best returns as fractions of the optimum."""
    def text(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    return (f"noise source on {summary['tasks']} {noun}: return / optimum at the lowest noise level (the data's best "
            f"policy) mean {text(summary['mean_lowest_noise_mean_fraction'])}, exact expectation at most "
            f"{text(summary['max_expected_best_fraction'])} (cap {summary['max_return_fraction']}); first episodes "
            f"{text(summary['mean_first_episode_mean_fraction'])}; {summary['seconds']:.1f}s -> {out}")


def start_distribution(size: int, count: int, random_start: bool, states: int) -> np.ndarray:
    """(count, states): the centre cell, or uniform over the room's cells with ``random_start`` (states beyond the
    cells, e.g. Key-to-Door's key-carried ones, start with probability 0)."""
    start = np.zeros((count, states))
    if random_start:
        start[:, :size * size] = 1.0 / (size * size)
    else:
        r, c = start_cell(size)
        start[:, r * size + c] = 1.0
    return start
