"""In-context evaluation: run a policy on held-out tasks, all at once, for many episodes.

Any policy with this interface plugs in (the RL transformer's ``ADPolicy``, the LM's
``LMPolicy``, :class:`RandomPolicy`)::

    policy.reset(num_envs)
    actions = policy.act(obs, prev_action, prev_reward, timestep, first)   # (B,) each; first: (B,) bool

Arguments are torch tensors; with Box actions (``EvalEnv.action_space`` a Box) ``prev_action`` and the returned
actions are (B, A) floats in the env's scale (the box flattened), otherwise (B,) integers. All B envs advance in
lockstep in one vectorised env with same-step autoreset, so the policy's context runs across episode boundaries
exactly like a training window; the policy keeps each env's context itself.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from ad.errors import UserError
from ad.progress import progress_bar
from ad.registry import env_factory, load_policy


class InContextPolicy(Protocol):
    def reset(self, num_envs: int) -> None: ...

    def act(self, obs: Any, prev_action: Any, prev_reward: Any, timestep: Any, first: Any) -> Any: ...


@dataclass
class EvalEnv:
    """A vectorised env over ``tasks`` x ``envs_per_task`` (sub-env i plays tasks[i // envs_per_task])."""

    env: Any  #: gymnasium VectorEnv with SAME_STEP autoreset
    tasks: list[str]
    envs_per_task: int
    optimal: np.ndarray  #: (tasks,) optimal return of each task
    num_actions: int  #: discrete actions (0 for Box actions)
    action_space: Any = None  #: one sub-env's action space where it is a Box (None: Discrete(num_actions))


@dataclass
class EvalResult:
    """Returns of one policy: ``returns[task, seed, episode]``; ``extra["success"]`` (same shape, bool) where the
    env reports a per-step ``success`` in its infos (an episode succeeds if any of its steps does)."""

    name: str
    tasks: list[str]
    returns: np.ndarray  # (tasks, seeds, episodes)
    optimal: np.ndarray  # (tasks,)
    extra: dict[str, Any] = field(default_factory=dict)

    def curve(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and std over tasks and seeds, per episode."""
        flat = self.returns.reshape(-1, self.returns.shape[-1])
        return flat.mean(0), flat.std(0)

    def standard_error(self) -> np.ndarray:
        """Standard error of the per-episode mean over tasks and seeds (the band of ``in_context.png``)."""
        flat = self.returns.reshape(-1, self.returns.shape[-1])
        return flat.std(0, ddof=1) / np.sqrt(len(flat)) if len(flat) > 1 else np.zeros(flat.shape[-1])

    def success_curve(self) -> np.ndarray | None:
        """Fraction of tasks x seeds whose episode succeeded, per episode (None where the env reports no success)."""
        success = self.extra.get("success")
        return None if success is None else success.reshape(-1, success.shape[-1]).mean(0)

    def normalised_curve(self) -> np.ndarray:
        """Mean of return / optimal return per episode."""
        ratio = self.returns / self.optimal[:, None, None]
        return ratio.reshape(-1, self.returns.shape[-1]).mean(0)


def make_eval_env(metadata: dict[str, Any], tasks: list[str], envs_per_task: int = 1, *,
                  gym_id: str | None = None, eval_kwargs: Any = None) -> EvalEnv:
    """One vector env over ``tasks`` x ``envs_per_task`` of a dataset, built from what it recorded, for any family:
    with ``gym_id`` (a ``task_spec["env_id"]`` the dataset recorded wins) the family's own vector env,
    ``gymnasium.make_vec(id, num_envs, vectorization_mode="vector_entry_point", **eval_kwargs(metadata, tasks))``;
    without, a same-step-autoreset ``SyncVectorEnv`` of ``gymnasium.make(task_spec["env_id"], **kwargs)``, each
    task's kwargs from ``eval_kwargs(metadata, tasks)["tasks"]``. ``eval_kwargs`` defaults to
    :func:`recorded_kwargs`. A task's optimal return is the vector env's ``optimal`` where it reports one, else the
    dataset's ``tasks[name]["optimal_return"]`` (NaN where neither).
    """
    import gymnasium
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    spec = metadata.get("task_spec") or {}
    env_id = spec.get("env_id") or gym_id
    if env_id is None:
        raise UserError("the dataset does not record its Gymnasium id (task_spec.env_id); regenerate it")
    recorded = (spec.get("action_space") or {}).get("type")
    if recorded not in (None, "Discrete", "Box"):
        raise UserError(f"in-context evaluation acts with Discrete or Box actions; this dataset's action space is "
                        f"{recorded} ({env_id})")
    kwargs = (eval_kwargs or recorded_kwargs)(metadata, list(tasks))
    num_envs = len(tasks) * envs_per_task
    if gym_id is not None:
        env = gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs)
    else:
        makers = [functools.partial(_make_task_env, env_id, task_kwargs, name)
                  for name, task_kwargs in zip(tasks, kwargs["tasks"]) for _ in range(envs_per_task)]
        env = SyncVectorEnv(makers, autoreset_mode=AutoresetMode.SAME_STEP)
    own = getattr(env, "optimal", None)
    optimal = _recorded_optimal(metadata, tasks) if own is None else np.asarray(own, np.float64)[::envs_per_task]
    space = env.single_action_space
    box = is_box(space)
    return EvalEnv(env, list(tasks), envs_per_task, optimal, 0 if box else int(space.n), space if box else None)


def _recorded_optimal(metadata: dict[str, Any], tasks: list[str]) -> np.ndarray:
    """(tasks,) each task's recorded ``optimal_return`` (NaN where the family records none)."""
    known = metadata.get("tasks", {})
    return np.array([np.nan if known.get(t, {}).get("optimal_return") is None else float(known[t]["optimal_return"])
                     for t in tasks], dtype=np.float64)


def recorded_kwargs(metadata: dict[str, Any], tasks: list[str]) -> dict[str, Any]:
    """``{"tasks": [kwargs of each task]}``: the env kwargs a dataset recorded per task (``tasks[name]["kwargs"]``,
    as :mod:`ad.record` writes them); a UserError naming the tasks it holds none for."""
    known = metadata.get("tasks", {})
    missing = [t for t in tasks if "kwargs" not in known.get(t, {})]
    if missing:
        raise UserError(f"the dataset does not record the env kwargs of {missing[:3]}; regenerate it with the "
                        f"`ad generate` command that wrote it")
    return {"tasks": [dict(known[t]["kwargs"]) for t in tasks]}


def _make_task_env(env_id: str, kwargs: dict[str, Any], task: str) -> Any:
    """``gymnasium.make(env_id, **kwargs)`` of one task; a UserError where the env cannot be built here."""
    import gymnasium

    try:
        return gymnasium.make(env_id, **kwargs)
    except (gymnasium.error.Error, ImportError, TypeError, ValueError) as err:
        raise UserError(f"cannot rebuild env {env_id} of task {task} with {kwargs}: {' '.join(str(err).split())}; "
                        "install what it needs or pass a dataset of another env") from None


class RandomPolicy:
    """Uniformly random actions (the floor of every comparison); uniform over the box for a Box ``action_space``."""

    def __init__(self, num_actions: int, seed: int = 0, action_space: Any = None) -> None:
        self.num_actions = num_actions
        self.rng = np.random.default_rng(seed)
        self.num_envs = 0
        self.box = action_space if is_box(action_space) else None

    def reset(self, num_envs: int) -> None:
        self.num_envs = num_envs

    def act(self, obs, prev_action, prev_reward, timestep, first):
        if self.box is not None:
            low, high = box_bounds(self.box)
            return self.rng.uniform(low, high, (self.num_envs, low.size)).astype(np.float32)
        return self.rng.integers(0, self.num_actions, self.num_envs)


def is_box(space: Any) -> bool:
    """Whether ``space`` is a Gymnasium Box (the evaluator's continuous actions)."""
    from gymnasium import spaces

    return isinstance(space, spaces.Box)


def box_bounds(space: Any) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of a Box action space, flattened (A,) float32 and finite; a UserError where a bound is not."""
    low = np.asarray(space.low, np.float32).reshape(-1)
    high = np.asarray(space.high, np.float32).reshape(-1)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise UserError(f"in-context evaluation needs an action space with finite bounds, got {space}")
    return low, high


def run_in_context(policy: InContextPolicy, setup: EvalEnv, episodes: int, seed: int = 0, name: str = "policy",
                   progress: bool = True, record: Any = None) -> EvalResult:
    """Run ``policy`` in every env of ``setup`` until each has finished ``episodes`` episodes; with ``record`` (an
    :class:`ad.record.rollouts.RolloutRecorder`) every counted step is also handed to it, with the policy's
    ``last_logprob``.

    Returns the (tasks, envs_per_task, episodes) matrix of episode returns.
    """
    if episodes <= 0:
        raise UserError(f"--episodes must be positive, got {episodes}")
    env = setup.env
    num_envs = env.num_envs
    obs, _ = env.reset(seed=seed)
    policy.reset(num_envs)
    returns = np.zeros((num_envs, episodes), dtype=np.float64)  # (E, episodes)
    running = np.zeros(num_envs, dtype=np.float64)
    done_episodes = np.zeros(num_envs, dtype=np.int64)
    timestep = np.zeros(num_envs, dtype=np.int64)
    box = setup.action_space if is_box(setup.action_space) else None
    if box is not None:  # Box actions: (E, A) floats, clipped to the bounds before the env sees them
        low, high = box_bounds(box)
        prev_action = np.zeros((num_envs, low.size), dtype=np.float32)
    else:
        prev_action = np.zeros(num_envs, dtype=np.int64)
    prev_reward = np.zeros(num_envs, dtype=np.float32)
    first = np.ones(num_envs, dtype=bool)
    success = None  # (E, episodes): whether any step of the episode succeeded, where the env reports ``success``
    hit = np.zeros(num_envs, dtype=bool)
    bar = progress_bar(episodes, desc=f"eval {name}", unit="episode", leave=False) if progress else None
    try:
        while done_episodes.min() < episodes:
            actions = policy.act(torch.as_tensor(np.asarray(obs)), torch.from_numpy(prev_action),
                                 torch.from_numpy(prev_reward), torch.from_numpy(timestep), torch.from_numpy(first))
            actions = np.asarray(actions.detach().cpu() if hasattr(actions, "detach") else actions)
            before = (obs, done_episodes < episodes, done_episodes.copy(), timestep) if record is not None else None
            if box is None:
                actions = actions.astype(np.int64)
                obs, rewards, terminated, truncated, infos = env.step(actions)
            else:
                actions = np.clip(actions.astype(np.float32).reshape(num_envs, -1), low, high)  # (E, A)
                obs, rewards, terminated, truncated, infos = env.step(actions.reshape(num_envs, *box.shape))
            rewards = np.asarray(rewards, dtype=np.float32)
            if record is not None:
                state, live, episode, step = before
                record.step(live, episode, step, state, actions, rewards, np.asarray(terminated),
                            np.asarray(truncated), getattr(policy, "last_logprob", None))
            running += rewards
            finished = np.asarray(terminated) | np.asarray(truncated)
            idx = np.flatnonzero(finished & (done_episodes < episodes))  # the envs whose episode counts
            returns[idx, done_episodes[idx]] = running[idx]
            if isinstance(infos, dict) and "success" in infos:
                if success is None:
                    success = np.zeros((num_envs, episodes), dtype=bool)
                hit |= np.asarray(infos["success"], dtype=bool).reshape(num_envs)
                success[idx, done_episodes[idx]] = hit[idx]
                hit[finished] = False
            done_episodes[finished] += 1
            running[finished] = 0.0
            timestep = np.where(finished, 0, timestep + 1)
            prev_action, prev_reward = actions, rewards
            first[:] = False
            if bar is not None:
                bar.update(int(min(done_episodes.min(), episodes)) - bar.n)
    finally:
        if bar is not None:
            bar.close()
    shaped = returns.reshape(len(setup.tasks), setup.envs_per_task, episodes)  # (tasks, seeds, episodes)
    extra = {} if success is None else {"success": success.reshape(shaped.shape)}
    return EvalResult(name, list(setup.tasks), shaped, np.asarray(setup.optimal, dtype=np.float64), extra)


def evaluate_in_context(ckpt: Any, data: Any, episodes: int = 100, seeds: int = 1, split: str = "heldout",
                        greedy: bool = False, seed: int = 0, progress: bool = False,
                        temperature: float = 1.0, sampling: str = "step") -> EvalResult:
    """Load the model trained in run folder ``ckpt`` and run it in context on the ``split`` tasks of dataset
    ``data`` (``seeds`` envs per task, ``episodes`` episodes each; actions sampled at ``temperature`` by the
    ``sampling`` rule, as ``ad eval --sampling``, unless ``greedy``); returns its ``(tasks, seeds, episodes)``
    returns.

    The Python form of ``ad eval`` for one model, writing no files; a UserError where the model and the dataset
    are of different tasks or the dataset's family has no evaluation environment.
    """
    from ad.commands.evaluate import check_compatible, pick_tasks, sampling_options
    from ad.history import HistoryReader

    reader = HistoryReader(data)
    tasks = pick_tasks(reader, split, None)
    policy = load_policy(ckpt, greedy=greedy, seed=seed, temperature=temperature,
                         **sampling_options(sampling, reader.family))
    check_compatible(policy, reader, str(ckpt))
    setup = env_factory(reader.family)(reader.metadata, tasks, seeds)
    return run_in_context(policy, setup, episodes, seed, "model", progress)


def source_curve(reader: Any, tasks: list[str], episodes: int) -> EvalResult:
    """The source algorithm's own learning curve on ``tasks``: episode returns of each stream, from the start.

    Where the histories are shorter than ``episodes`` (a source that converges in a few dozen episodes), the curve
    covers the episodes every task's longest stream has: shorter than the policies' curves, not an error.
    """
    from ad.history.summary import SUMMARY_COLUMNS, episode_returns

    returns_of = {task: [episode_returns(s.columns)[:episodes]
                         for s in reader.streams(tasks=[task], columns=SUMMARY_COLUMNS)] for task in tasks}
    episodes = min([episodes] + [max((len(r) for r in per_stream), default=0) for per_stream in returns_of.values()])
    if episodes < 1:
        raise UserError(f"a task has no complete episode in {reader.location.base}")
    rows = [np.stack([r[:episodes] for r in returns_of[task] if len(r) >= episodes]) for task in tasks]
    streams = min(len(r) for r in rows)
    returns = np.stack([r[:streams] for r in rows])  # (tasks, streams, episodes)
    return EvalResult("source", tasks, returns, _recorded_optimal(reader.metadata, tasks))


#: eval.json key of the mean return / optimum over episodes 36-40 (files written before it was named so have
#: ``episode_40_normalised``, the same figure: read it with :func:`episodes_36_40`)
EPISODES_36_40 = "episodes_36_40_normalised"


def summarise(result: EvalResult, first: int = 5, last: int = 10) -> dict[str, Any]:
    """Headline numbers: mean return / optimum over the first ``first`` episodes, over episodes 36-40 (when there
    are 40) and over the last ``last`` episodes, which are episodes ``last_episodes`` = [from, to] (1-based: a
    source curve shorter than the policies' has its own last episodes)."""
    norm = result.normalised_curve()
    count = len(norm)
    out: dict[str, Any] = {"first_episodes_normalised": float(norm[:first].mean()),
                           "last_episodes_normalised": float(norm[-last:].mean()),
                           "last_episodes": [max(1, count - last + 1), count],
                           "final_mean_return": float(result.curve()[0][-last:].mean())}
    if count >= 40:
        out[EPISODES_36_40] = float(norm[35:40].mean())
    return out


def episodes_36_40(row: dict[str, Any]) -> float:
    """Mean return / optimum over episodes 36-40 of an eval.json policy row, old files included (nan if absent)."""
    return float(row.get(EPISODES_36_40, row.get("episode_40_normalised", float("nan"))))
