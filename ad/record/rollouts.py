"""Record a policy's in-context runs (``ad eval --record``) as a learning-history dataset.

The dataset has the evaluated dataset's family, task spec, tasks and split, with the evaluation in ``source``: one
unit per task (``run`` = the evaluation's ``--seed``), one stream per evaluation env of the task, every transition
with the policy's log-probability of its action. Any command that reads histories reads it, e.g. ``ad train rl
--objective dpt`` on a model's own contexts (the family's optimal actions label them).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.errors import UserError
from ad.history import HistorySpec, HistoryWriter
from ad.history.writer import user_metadata


class RolloutRecorder:
    """Collects the steps of ``len(tasks) x seeds`` lockstep envs (task-major, as :func:`ad.evaluate.make_eval_env`
    orders them) and writes them with :meth:`write`; nothing is visible in ``out`` until then."""

    def __init__(self, out: Any, reader: Any, tasks: list[str], seeds: int, run: int, source: dict[str, Any]):
        spec = reader.spec
        if spec.state.kind not in ("discrete", "vector") or spec.action.kind != "discrete":
            raise UserError(f"--record writes discrete-action runs with discrete or vector states; dataset "
                            f"{reader.location.base} has {spec.state.kind} states and {spec.action.kind} actions")
        metadata = user_metadata(reader.metadata)
        self.writer = HistoryWriter(out, spec=HistorySpec(state=spec.state, action=spec.action, logprob="scalar"),
                                    family=reader.family, metadata={**metadata, "source": source},
                                    planned_tasks=len(tasks))  # a UserError for a folder of another dataset
        done = sorted(t for t in tasks if self.writer.is_complete(t, run))
        if done:
            self.writer.release()
            raise UserError(f"--record {out} already holds the runs of {len(done)} of these tasks with --seed {run} "
                            f"(e.g. {done[0]}); pass another --seed or a new --record folder")
        self.tasks, self.seeds, self.run = list(tasks), int(seeds), int(run)
        self.steps: list[tuple[np.ndarray, ...]] = []

    @staticmethod
    def memory_bytes(reader: Any, envs: int, episodes: int) -> int:
        """Rough peak memory of recording ``envs`` envs for ``episodes`` episodes of ``reader``'s tasks: every step is
        kept until :meth:`write`, which stacks and then selects it (about three copies at once); 0 where the
        dataset's episodes have no fixed length."""
        length = (reader.metadata.get("task_spec") or {}).get("episode_length")
        if not length:
            return 0
        state = reader.spec.state
        state_bytes = 4 * state.dim if state.kind == "vector" and state.dim else 8
        step_bytes = state_bytes + 8 + 8 + 8 + 4 + 4 + 3  # obs, episode, timestep, action, reward, logprob, flags
        return 3 * envs * episodes * int(length) * step_bytes

    def step(self, live: np.ndarray, episode: np.ndarray, timestep: np.ndarray, obs: Any, action: np.ndarray,
             reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, logprob: Any) -> None:
        """One lockstep step of every env (each (E,) or (E, D)); only the ``live`` envs' rows are kept (an env
        that has finished its episodes keeps stepping until the others have)."""
        if logprob is None:
            raise UserError("--record needs the log-probability of each action, which this policy does not report "
                            "(models with Box actions); evaluate without --record")
        logprob = np.asarray(logprob.detach().cpu() if hasattr(logprob, "detach") else logprob, np.float32)
        self.steps.append((np.asarray(live, bool).copy(), np.asarray(episode).copy(), np.asarray(timestep).copy(),
                           np.asarray(obs).copy(), np.asarray(action).copy(), np.asarray(reward, np.float32),
                           np.asarray(terminated, bool), np.asarray(truncated, bool) & ~np.asarray(terminated, bool),
                           logprob))

    def write(self) -> int:
        """Commit one unit per task; returns the number of transitions written."""
        live, episode, step, state, action, reward, terminated, truncated, logprob = (
            np.stack(column, axis=1) for column in zip(*self.steps))  # each (E, T) or (E, T, D)
        written = 0
        with self.writer:
            for t, task in enumerate(self.tasks):
                envs = range(t * self.seeds, (t + 1) * self.seeds)
                rows = [np.flatnonzero(live[e]) for e in envs]  # (n_e,) each: the env's kept steps
                columns = {
                    "stream": np.concatenate([np.full(len(r), s, np.int32) for s, r in enumerate(rows)]),
                    "update": np.zeros(sum(len(r) for r in rows), np.int64),  # one policy throughout
                    **{name: np.concatenate([values[e][r] for e, r in zip(envs, rows)]) for name, values in (
                        ("episode", episode), ("step", step), ("state", state), ("action", action),
                        ("reward", reward), ("terminated", terminated), ("truncated", truncated),
                        ("logprob", logprob))}}
                columns["episode"] = columns["episode"].astype(np.int32)
                columns["step"] = columns["step"].astype(np.int32)
                with self.writer.unit(task, self.run) as unit:
                    unit.append(columns)
                    unit.commit()
                written += len(columns["stream"])
        return written
