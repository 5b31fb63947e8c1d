"""``ad generate metaworld``: learning histories on Meta-World ML1 goals, into the store: noise distillation (the
scripted expert with noise falling over each history) or the goal-blind search of :mod:`tasks.metaworld.search`.

    from ad.config import make_config
    from tasks.metaworld.config import GenerateConfig
    from tasks.metaworld.generate import generate
    generate(make_config(GenerateConfig, {"out": "data/mw", "skill": "reach-v3"}))

Layout: task = one ML1 goal (``mw-reach-v3-train-g07``), run = ``0 .. --runs - 1``, one stream per unit; a history is
``--episodes`` episodes of ``--episode-length`` steps, episode ``e`` acting with noise scale ``sigma_e``
(:func:`tasks.metaworld.noise.noise_schedule`; the search source: ``--noise-min`` throughout), so ``update`` =
``episode`` = the noise step. ``state`` is the
observation the action was chosen on (goal hidden), ``logprob`` the action's log-density under the noisy policy
(:func:`tasks.metaworld.noise.clipped_gaussian_logprob`); the extra columns ``success`` (Meta-World's success flag
of the step) and ``noise`` (``sigma_e``) complete the row.

Units run in blocks of ``--batch`` goals on one :class:`~tasks.metaworld.vector_env.MetaWorldVectorEnv`, each unit
drawing its noise from its own generator seeded by (seed, split, goal, run): a unit's history depends on its seed
and settings only, never on the batching or on which units are already on disk, so an interrupted command re-run
writes exactly the missing units. ``<out>/_run/summary.json`` records the success rate per episode.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from ad.config import data_options
from ad.files import run_folder, write_json_atomic
from ad.history import ColumnSpec, HistorySpec, HistoryWriter, Location
from ad.record import env_spec
from tasks.metaworld import GYM_ID
from tasks.metaworld.config import GenerateConfig
from tasks.metaworld.noise import clipped_gaussian_logprob, noise_schedule
from tasks.metaworld.skills import expert_policy, parse_goals, task_name
from tasks.metaworld.vector_env import MetaWorldVectorEnv

FAMILY = "metaworld"
_SPLIT_CODE = {"train": 0, "test": 1}
#: Entries of the observation that hold the hand's (fingertips') position.
HAND = slice(0, 3)


def history_spec(state_dim: int = 39, action_dim: int = 4) -> HistorySpec:
    """Columns of a Meta-World dataset: vector states and actions, scalar logprobs, per-step success and noise."""
    return HistorySpec(state=ColumnSpec.vector(state_dim), action=ColumnSpec.vector(action_dim), logprob="scalar",
                       extra={"success": "bool", "noise": "float32"})


def recorded_goals(cfg: GenerateConfig) -> list[tuple[str, int]]:
    """The (ML1 split, goal index) pairs of the dataset: the training goals, then the held-out (test) ones."""
    return ([("train", g) for g in parse_goals(cfg.train_goals, "train", "--train-goals")]
            + [("test", g) for g in parse_goals(cfg.heldout_goals, "test", "--heldout-goals")])


def blocks(env: MetaWorldVectorEnv, items: list) -> Iterator[tuple[MetaWorldVectorEnv, list]]:
    """``items`` (each starting with (split, goal)) in blocks of ``env.num_envs``, each with the vector env to run
    it on: ``env`` pointed at the block's goals, or a smaller new env for a last, shorter block."""
    for start in range(0, len(items), env.num_envs):
        block = items[start:start + env.num_envs]
        goals = [(item[0], item[1]) for item in block]
        if len(block) == env.num_envs:
            env.set_goals(goals)
            yield env, block
        else:
            tail = MetaWorldVectorEnv(env.skill, goals, episode_length=env.episode_length, ml1_seed=env.ml1_seed)
            yield tail, block
            tail.close()


def expert_rollouts(env: MetaWorldVectorEnv, goals: list[tuple[str, int]], policy: Any) -> dict[str, np.ndarray]:
    """One noise-free episode of the scripted expert on every goal: its return (G,), the first step that reached
    success (G,; 0 where none did) and the goal's position (G, 3), read from the goal-visible observation."""
    returns, first = np.zeros(len(goals)), np.zeros(len(goals), dtype=np.int64)
    positions = np.zeros((len(goals), 3))
    start = 0
    for block_env, block in blocks(env, goals):
        rows = slice(start, start + len(block))
        block_env.reset()
        positions[rows] = block_env.expert_observations()[:, -3:]
        for t in range(block_env.episode_length):
            mean = np.stack([policy.get_action(o) for o in block_env.expert_observations()])
            _, reward, _, _, info = block_env.step(mean)
            returns[rows] += reward
            hit = info["success"] & (first[rows] == 0)
            first[rows][hit] = t + 1
        start += len(block)
    return {"return": returns, "steps_to_success": first, "goal_position": positions}


def dataset_metadata(cfg: GenerateConfig, env: MetaWorldVectorEnv, expert: dict[str, np.ndarray]) -> dict[str, Any]:
    """task_spec (skill, ML1 seed, spaces, episode length), source, seeds, Meta-World's split, and each goal's
    index, position and scripted-expert reference (its return is the task's ``optimal_return``)."""
    goals = recorded_goals(cfg)
    names = [task_name(cfg.skill, split, g) for split, g in goals]
    return {
        "task_spec": {"env": FAMILY, **env_spec(env.single_observation_space, env.single_action_space, GYM_ID,
                                                {"skill": cfg.skill, "ml1_seed": cfg.ml1_seed,
                                                 "episode_length": cfg.episode_length}),
                      "skill": cfg.skill, "ml1_seed": cfg.ml1_seed, "benchmark": "ML1",
                      "episode_length": cfg.episode_length, "state_dim": int(env.single_observation_space.shape[0]),
                      "action_dim": int(env.single_action_space.shape[0]), "goal_hidden": True,
                      "vector_env_class": "tasks.metaworld.vector_env:MetaWorldVectorEnv",
                      "success": "extra column success: Meta-World's success flag of each step; an episode "
                                 "succeeds if any of its steps does"},
        "source": {"algorithm": cfg.source, "expert": f"metaworld.policies.{type(expert_policy(cfg.skill)).__name__}",
                   **({"schedule": "noise std falls geometrically from noise_max to noise_min over each history's "
                                   "episodes"} if cfg.source == "noise" else
                      {"search": "run-and-tumble from the best-rewarded hand position so far; never reads the goal "
                                 "(the expert only gives each task's optimal_return)",
                       "memory": cfg.search_memory,
                       "prior": [round(float(x), 6) for x in goal_space_centre(env)]}),
                   "implementation": "tasks.metaworld.generate.unit_histories", "config": data_options(cfg)},
        "seeds": {"seed": cfg.seed, "ml1_seed": cfg.ml1_seed, "runs": cfg.runs},
        "split": {"train": [n for n, (s, _) in zip(names, goals) if s == "train"],
                  "heldout": [n for n, (s, _) in zip(names, goals) if s == "test"]},
        "tasks": {name: {"split": "train" if s == "train" else "heldout", "ml1_split": s, "goal": g,
                         "goal_position": [round(float(x), 6) for x in expert["goal_position"][i]],
                         "optimal_return": float(expert["return"][i]),
                         "expert_steps_to_success": int(expert["steps_to_success"][i]) or None}
                  for i, (name, (s, g)) in enumerate(zip(names, goals))},
    }


def unit_seed(cfg: GenerateConfig, split: str, goal: int, run: int) -> list[int]:
    """The noise generator's seed of one unit: the command's seed, the goal and the run only."""
    return [cfg.seed, _SPLIT_CODE[split], goal, run]


def unit_histories(cfg: GenerateConfig, env: MetaWorldVectorEnv, units: list[tuple[str, int, int]],
                   policy: Any, record: Callable[[Any], None] | None = None) -> list[dict[str, np.ndarray]]:
    """The histories of ``units`` ((split, goal, run) each; sub-env i of ``env`` plays unit i's goal) by
    ``cfg.source``: the history columns of each, in unit order. ``noise``: the scripted expert ``policy`` with
    noise falling over the history; ``search``: :class:`tasks.metaworld.search.RunAndTumble`, which never reads the
    goal; ``record`` (search source, optional), e.g. a diagnostic's, is called with its state at the start of every
    episode, after the reset and before it heads for its kept position."""
    rngs = [np.random.default_rng(unit_seed(cfg, *u)) for u in units]
    N, L, E = len(units), cfg.episode_length, cfg.episodes
    T = E * L
    obs_dim, act_dim = env.single_observation_space.shape[0], env.single_action_space.shape[0]
    state = np.zeros((N, T, obs_dim), np.float32)
    action = np.zeros((N, T, act_dim), np.float32)
    reward, logprob = np.zeros((N, T), np.float32), np.zeros((N, T), np.float32)
    success = np.zeros((N, T), bool)
    if cfg.source == "search":
        from tasks.metaworld.search import RunAndTumble

        sigmas = np.full(E, cfg.noise_min)
        search = RunAndTumble(rngs, goal_space_centre(env), cfg.noise_min, cfg.search_memory)
    else:
        sigmas = noise_schedule(cfg.episodes, cfg.noise_max, cfg.noise_min)
    obs, _ = env.reset()
    for e in range(E):
        sigma = np.full(N, sigmas[e])
        if cfg.source == "search":
            if record is not None:
                record(search)
            search.start_episode()
        for t in range(L):
            k = e * L + t
            if cfg.source == "search":
                act, _, logprob[:, k] = search.act(obs[:, HAND].astype(np.float64))
            else:
                mean = np.stack([policy.get_action(o) for o in env.expert_observations()]).astype(np.float64)
                z = np.stack([rng.standard_normal(act_dim) for rng in rngs])  # (N, D), each unit its own draws
                act = np.clip(mean + sigma[:, None] * z, -1.0, 1.0)
                logprob[:, k] = clipped_gaussian_logprob(act, mean, sigma)
            state[:, k], action[:, k] = obs, act
            obs, rew, _, _, info = env.step(act)
            reward[:, k], success[:, k] = rew, info["success"]
            if cfg.source == "search":  # the hand where the reward was earned (the last step's: before autoreset)
                after = info["final_obs"] if t == L - 1 else obs
                search.observe(rew, after[:, HAND].astype(np.float64))
    steps = np.arange(T)
    episode = (steps // L).astype(np.int32)
    common = {"stream": np.zeros(T, np.int32), "update": episode.astype(np.int64), "episode": episode,
              "step": (steps % L).astype(np.int32), "terminated": np.zeros(T, bool),
              "truncated": steps % L == L - 1, "noise": sigmas[episode].astype(np.float32)}
    return [{**common, "state": state[i], "action": action[i], "reward": reward[i], "logprob": logprob[i],
             "success": success[i]} for i in range(N)]


def goal_space_centre(env: MetaWorldVectorEnv) -> np.ndarray:
    """(3,) centre of the skill's goal space (where ML1 draws its goals): the search source's prior."""
    space = env.envs[0].mw_env.goal_space
    return (np.asarray(space.low, dtype=np.float64) + np.asarray(space.high, dtype=np.float64)) / 2


_WORKER_ENVS: dict[tuple, MetaWorldVectorEnv] = {}  # a worker process's vector envs, by (settings, width)


def _worker_block(cfg: GenerateConfig, block: list[tuple[str, int, int]]) -> list[dict[str, np.ndarray]]:
    """One block's histories in a worker process (its vector env built once per width and reused)."""
    import warnings

    warnings.filterwarnings("ignore", message="Constant\\(s\\) may be too high")
    key = (cfg.skill, cfg.episode_length, cfg.ml1_seed, len(block))
    if key not in _WORKER_ENVS:
        _WORKER_ENVS[key] = MetaWorldVectorEnv(cfg.skill, [(s, g) for s, g, _ in block],
                                               episode_length=cfg.episode_length, ml1_seed=cfg.ml1_seed)
    env = _WORKER_ENVS[key]
    env.set_goals([(s, g) for s, g, _ in block])
    return unit_histories(cfg, env, block, expert_policy(cfg.skill))


def block_histories(cfg: GenerateConfig, env: MetaWorldVectorEnv, todo: list[tuple[str, int, int]],
                    policy: Any) -> Iterator[tuple[list, list[dict[str, np.ndarray]]]]:
    """(block, its units' histories) for ``todo`` in blocks of ``env.num_envs``, in order: here on ``env``
    (``--workers 1``) or in ``--workers`` processes, each stepping its own vector env (the histories are the same)."""
    if cfg.workers <= 1 or len(todo) <= env.num_envs:
        for block_env, block in blocks(env, todo):
            yield block, unit_histories(cfg, block_env, block, policy)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    chunks = [todo[i:i + env.num_envs] for i in range(0, len(todo), env.num_envs)]
    pool = ProcessPoolExecutor(max_workers=cfg.workers, mp_context=multiprocessing.get_context("fork"))
    try:
        futures = [pool.submit(_worker_block, cfg, chunk) for chunk in chunks]
        for chunk, future in zip(chunks, futures):
            yield chunk, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def episode_success(success: np.ndarray, episode_length: int) -> np.ndarray:
    """(..., episodes) whether each episode reached success at any step, from a (..., T) per-step flag."""
    return success.reshape(*success.shape[:-1], -1, episode_length).any(axis=-1)


def generate(cfg: GenerateConfig) -> Path | str:
    """Run the noisy expert on every goal x run of ``cfg`` not yet in ``cfg.out``; returns the dataset's path."""
    import warnings

    from ad.progress import Progress

    warnings.filterwarnings("ignore", message="Constant\\(s\\) may be too high")  # the experts' own clipping note
    goals = recorded_goals(cfg)
    policy = expert_policy(cfg.skill)
    width = min(cfg.batch, len(goals) * cfg.runs)
    env = MetaWorldVectorEnv(cfg.skill, (goals * cfg.runs)[:width], episode_length=cfg.episode_length,
                             ml1_seed=cfg.ml1_seed)
    try:
        metadata = dataset_metadata(cfg, env, expert_rollouts(env, goals, policy))
        location = Location.of(cfg.out)
        writer = HistoryWriter(location, spec=history_spec(), family=FAMILY, metadata=metadata,
                               planned_tasks=len(goals))
    except BaseException:
        env.close()
        raise
    local = location.local_path()
    out: Path | str = Path(local) if local is not None else cfg.out
    units = [(s, g, r) for r in range(cfg.runs) for s, g in goals]
    label = f"noisy {cfg.skill} expert" if cfg.source == "noise" else f"{cfg.skill} search"
    todo = [u for u in units if not writer.is_complete(task_name(cfg.skill, u[0], u[1]), u[2])]
    if len(todo) < len(units):
        print(f"resuming: {len(units) - len(todo)} of {len(units)} histories already in {out}")
    started = time.time()
    try:
        with writer, Progress(len(todo), desc=f"{label}", unit="history", show=cfg.progress) as bar:
            for block, histories in block_histories(cfg, env, todo, policy):
                for (split, goal, run), columns in zip(block, histories):
                    with writer.unit(task_name(cfg.skill, split, goal), run) as unit:  # aborted on any exception
                        unit.append(columns)
                        unit.commit(info={"episode_success": episode_success(columns["success"],
                                                                             cfg.episode_length).tolist()})
                    bar.update(1)
    finally:
        env.close()
    summary = summarize(cfg, location, time.time() - started)
    write_json_atomic(run_folder(cfg.out, location) / "summary.json", summary)
    curve = summary["success_per_episode"]
    print(f"{label} on {len(goals)} goals x {cfg.runs} runs, {cfg.episodes} episodes of "
          f"{cfg.episode_length} steps: success {curve[0]:.2f} in the first episode, {curve[-1]:.2f} in the last; "
          f"{summary['seconds']:.1f}s -> {out}")
    return out


def summarize(cfg: GenerateConfig, location: Location, seconds: float) -> dict[str, Any]:
    """Success rate per episode over the dataset's histories (from the units' records), by split."""
    from ad.history import HistoryReader

    units = HistoryReader(location).units()
    curves = {"train": [], "heldout": []}
    for u in units:
        flags = u.get("info", {}).get("episode_success")
        if flags is not None:
            curves["heldout" if "-test-" in u["task"] else "train"].append(flags)
    every = curves["train"] + curves["heldout"]
    return {"skill": cfg.skill, "histories": len(every), "episodes": cfg.episodes,
            "episode_length": cfg.episode_length, "noise": noise_schedule(cfg.episodes, cfg.noise_max,
                                                                          cfg.noise_min).tolist(),
            "success_per_episode": np.mean(every, axis=0).tolist() if every else [float("nan")] * cfg.episodes,
            "success_per_episode_by_split": {k: np.mean(v, axis=0).tolist() for k, v in curves.items() if v},
            "seconds": seconds}
