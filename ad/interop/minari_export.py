"""Learning histories -> a Minari dataset (``ad export minari``; layout in :mod:`ad.interop.minari`)."""
from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ad.errors import UserError
from ad.history import HistoryReader, HistorySpec
from ad.interop.minari import (DATA_FORMATS, EXPORT_VERSION, HEADER_KEYS, INFO_CORE, METADATA_KEY, STAGING,
                               check_export_name, datasets_root, quiet_minari, require_minari, root_dir, space_of)


@dataclass(frozen=True)
class _Plan:
    """What an export writes besides Minari's own fields."""

    spec: HistorySpec  #: the exported columns (skipped extra columns left out)
    infos: dict[str, str]  #: infos key -> history column type
    final_observation: str  #: "next_state" or "repeat_last_state"
    as_lists: bool  #: 1-D infos handed over as lists (Minari 0.5's Arrow storage cannot decode 1-D numpy infos)


def _plan(spec: HistorySpec, skip: Sequence[str], data_format: str) -> _Plan:
    if spec.logprob != "scalar":
        raise UserError(f"the dataset has {spec.logprob} logprobs; Minari export supports one logprob per transition")
    unknown = [c for c in skip if c not in spec.extra]
    if unknown:
        raise UserError(f"--skip-columns {', '.join(unknown)}: not an extra column of this dataset (extra columns: "
                        f"{', '.join(spec.extra) or 'none'}); core columns cannot be skipped")
    extra = {n: t for n, t in spec.extra.items() if n not in skip}
    next_type = extra.get("next_state")
    fits = (spec.state.kind == "discrete" and next_type in ("int32", "int64")) or (
        spec.state.kind == "vector" and next_type == "list<float32>")
    return _Plan(HistorySpec(spec.state, spec.action, spec.logprob, extra, spec.logprob_bits),
                 {**INFO_CORE, **extra}, "next_state" if fits else "repeat_last_state", data_format != "hdf5")


def _padded_info(name: str, values: np.ndarray, as_list: bool, where: str) -> Any:
    """One infos entry: the episode's values plus the last one repeated (Minari wants T + 1)."""
    if values.dtype == object and len(values) and not isinstance(values[0], str):  # list<...> column
        lengths = {len(v) for v in values}
        if len(lengths) != 1 or 0 in lengths:
            raise UserError(f"{where}: column {name!r} has rows of lengths {sorted(lengths)[:5]}; Minari infos need "
                            f"one fixed non-zero length per episode: pass --skip-columns {name} to leave it out")
        rows = np.stack(values)  # (T, k)
        return np.concatenate([rows, rows[-1:]])
    if values.dtype == object:  # strings
        return [*values.tolist(), values[-1]]
    padded = np.concatenate([values, values[-1:]])
    return list(padded) if as_list else padded


def _unit_episodes(reader: HistoryReader, unit: dict[str, Any], plan: _Plan) -> tuple[list[Any], list[dict]]:
    """Minari episode buffers and episode metadata of one unit, in stream, then time order."""
    from minari.data_collector import EpisodeBuffer

    discrete_state = plan.spec.state.kind == "discrete"
    state_type = np.int64 if discrete_state else np.float32
    action_type = np.int64 if plan.spec.action.kind == "discrete" else np.float32
    columns = ["stream", "episode", "state", "action", "reward", "terminated", "truncated", *plan.infos]
    buffers, metas = [], []
    for stream in reader.iter_unit_streams(unit, columns):
        cols = stream.columns
        where = f"task={unit['task']} run={unit['run']} stream={stream.stream}"
        states = np.asarray(cols["state"], state_type)
        actions = np.asarray(cols["action"], action_type)
        rewards = np.asarray(cols["reward"], np.float32)
        episode = cols["episode"]
        bounds = np.flatnonzero(episode[1:] != episode[:-1]) + 1
        for start, end in zip([0, *bounds.tolist()], [*bounds.tolist(), len(episode)]):
            if plan.final_observation == "next_state":
                final = np.asarray(cols["next_state"][end - 1], state_type)
            else:
                final = states[end - 1]
            observations = np.concatenate([states[start:end], final[None]])  # (T + 1,) or (T + 1, dim)
            infos = {name: _padded_info(name, cols[name][start:end], plan.as_lists, where) for name in plan.infos}
            buffers.append(EpisodeBuffer(observations=observations, actions=actions[start:end],
                                         rewards=rewards[start:end], terminations=cols["terminated"][start:end],
                                         truncations=cols["truncated"][start:end], infos=infos))
            metas.append({"task": unit["task"], "run": int(unit["run"]), "stream": int(stream.stream),
                          "episode": int(episode[start]), "update_first": int(cols["update"][start]),
                          "update_last": int(cols["update"][end - 1]),
                          "rewards_sum": float(rewards[start:end].sum())})
    return buffers, metas


def _header(reader: HistoryReader, units: list[dict[str, Any]], plan: _Plan, skip: Sequence[str]) -> dict[str, Any]:
    meta = reader.metadata
    records = {f"{u['task']}|{int(u['run'])}": {"task": u["task"], "run": int(u["run"]), "rows": int(u["rows"]),
                                                 "info": u.get("info", {})} for u in units}
    return {"format": meta["format"], "schema_version": meta["schema_version"], "family": reader.family,
            "spec": plan.spec.to_dict(), "metadata": {k: v for k, v in meta.items() if k not in HEADER_KEYS},
            "units": records, "provenance": meta.get("provenance"),
            "planned_tasks": meta.get("planned_tasks") if len(units) == len(reader.units()) else None,
            "export": {"version": EXPORT_VERSION,
                       "order": "episodes in (task, run, stream, time) order; episode metadata task/run/stream/"
                                "episode; concatenate each (task, run, stream) in episode-id order",
                       "final_observation": plan.final_observation,
                       "infos": dict(plan.infos),
                       "infos_alignment": "infos[c][t] belongs to transition t for t < T; infos[c][T] repeats "
                                          "infos[c][T - 1]",
                       "skipped_columns": list(skip)}}


def export_minari(data: str, name: str, root: str | None = None, data_format: str = "hdf5",
                  overwrite: bool = False, skip_columns: Sequence[str] = (), author: str | None = None,
                  author_email: str | None = None, code_permalink: str | None = None,
                  description: str | None = None, tasks: Sequence[str] | None = None) -> dict[str, Any]:
    """Write the learning-history dataset ``data`` (its ``tasks`` only, if given) as the Minari dataset ``name``
    under the datasets root.

    Returns ``{"path", "episodes", "steps", "data_format"}``. See the module docstring for the layout.
    """
    check_export_name(name)
    if data_format not in DATA_FORMATS:
        raise UserError(f"--data-format {data_format!r}: choose one of {', '.join(DATA_FORMATS)}")
    reader = HistoryReader(data)
    if tasks:
        unknown = sorted(set(tasks) - set(reader.tasks()))
        if unknown:
            raise UserError(f"--tasks {', '.join(unknown)}: not in {data} (its tasks: {', '.join(reader.tasks())})")
    units = reader.units(tasks or None)
    reader.require_units(units)
    observation_space = space_of(reader.spec.state, "state")
    action_space = space_of(reader.spec.action, "action")
    plan = _plan(reader.spec, list(skip_columns), data_format)
    minari = require_minari(data_format)
    root_path = root_dir(root)
    final = root_path / name
    if final.exists() and not overwrite:
        raise UserError(f"Minari dataset {name} already exists in {root_path}; pass --overwrite to replace it, or "
                        "choose another --name (e.g. a higher -vN)")
    staging = root_path / STAGING / name.replace("/", "+")
    shutil.rmtree(staging, ignore_errors=True)  # leftovers of an interrupted export of this name
    staging.mkdir(parents=True)
    source = reader.metadata.get("source") or {}
    algorithm = source.get("algorithm") if isinstance(source, dict) else None
    episodes = steps = 0
    try:
        with quiet_minari(), datasets_root(staging):
            dataset = minari.create_dataset_from_buffers(
                name, [], observation_space=observation_space, action_space=action_space,
                algorithm_name=str(algorithm) if algorithm else None, author=author, author_email=author_email,
                code_permalink=code_permalink, data_format=data_format,
                description=description or f"Learning histories of the {reader.family!r} task family written by "
                                           "algorithm-distillation (`ad export minari`); metadata key "
                                           f"{METADATA_KEY!r} says how to rebuild them in order.")
            storage = dataset.storage
            # Minari 0.5 recomputes the dataset size (a walk over every file) after each episode it writes,
            # O(episodes^2) in all; it only feeds metadata["dataset_size"], which is set once at the end.
            storage.get_size = lambda: 0.0
            for unit in units:
                buffers, metas = _unit_episodes(reader, unit, plan)
                dataset.update_dataset_from_buffer(buffers)
                storage.update_episode_metadata(metas, range(episodes, episodes + len(metas)))
                episodes += len(metas)
                steps += sum(len(b) for b in buffers)
            del storage.get_size
            storage.update_metadata({METADATA_KEY: _header(reader, units, plan, skip_columns),
                                     "dataset_size": storage.get_size()})
        _move_into_place(staging / name, final, staging)
        _ensure_namespace(minari, root_path, name.rsplit("/", 1)[0])
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            (root_path / STAGING).rmdir()  # only when no other export is staging there
    return {"path": str(final), "episodes": episodes, "steps": steps, "data_format": data_format}


def _move_into_place(new: Path, final: Path, staging: Path) -> None:
    """Rename the complete dataset folder over ``final`` (an old one is set aside first, then dropped)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    old = None
    if final.exists():
        old = staging / ".replaced"
        os.rename(final, old)
    try:
        os.rename(new, final)
    except OSError:
        if old is not None:
            os.rename(old, final)
        raise


def _ensure_namespace(minari: Any, root_path: Path, namespace: str) -> None:
    """Record the dataset's namespace in the real datasets root, as Minari does when it creates a dataset."""
    from minari.namespace import create_namespace, list_local_namespaces

    with datasets_root(root_path):
        if namespace not in list_local_namespaces():
            create_namespace(namespace)

