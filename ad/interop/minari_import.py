"""A Minari dataset -> learning histories (``ad import minari``; rules in :mod:`ad.interop.minari`)."""
from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ad.errors import UserError
from ad.history import HistorySpec, HistoryWriter
from ad.history.layout import check_task_name
from ad.interop.minari import (APPEND_ROWS, EXPORT_VERSION, FOREIGN_STREAMS, INSTALL, METADATA_KEY,
                               check_dataset_id, column_of_space, converter, datasets_root, quiet_minari,
                               require_minari, root_dir)


def load(name: str | None = None, root: str | None = None, path: str | None = None) -> Any:
    """A ``minari.MinariDataset`` by id (in the datasets root) or by folder; UserErrors for what is not there."""
    minari = require_minari()
    try:
        if path is not None:
            folder = Path(path)
            data = folder / "data" if (folder / "data").is_dir() else folder
            if not (data / "metadata.json").is_file():
                raise UserError(f"--path {path} is not a Minari dataset folder (no data/metadata.json in it); pass "
                                "the folder of one dataset, e.g. ~/.minari/datasets/NAMESPACE/ENV/NAME-v0")
            return minari.MinariDataset(str(data.absolute()))
        check_dataset_id(name)
        base = root_dir(root)
        with datasets_root(base):
            try:
                return minari.load_dataset(name)  # never downloads (download=False)
            except FileNotFoundError:
                with quiet_minari():
                    known = sorted(minari.list_local_datasets())
                raise UserError(f"no Minari dataset {name} in {base} (datasets there: {', '.join(known) or 'none'}); "
                                "pass --root with the datasets folder, --path with the dataset's folder, or "
                                "`minari download` it first") from None
    except ImportError as err:  # a storage backend (h5py) missing
        raise UserError(f"reading this Minari dataset needs a missing package ({err}); {INSTALL}") from None
    except ValueError as err:  # unsupported Minari version, malformed metadata ...
        raise UserError(f"cannot read the Minari dataset: {err}") from None


def import_minari(out: str, name: str | None = None, root: str | None = None, path: str | None = None,
                  streams: str = "dataset", task: str | None = None) -> dict[str, Any]:
    """Write a Minari dataset as the learning-history dataset ``out`` (resumable: complete units are kept).

    Returns ``{"family", "units", "rows", "exact"}`` (``exact``: it came from ``ad export minari``).
    """
    if streams not in FOREIGN_STREAMS:
        raise UserError(f"--streams {streams!r}: choose one of {', '.join(FOREIGN_STREAMS)}")
    dataset = load(name, root, path)
    ours = dataset.storage.metadata.get(METADATA_KEY)
    if ours:
        return _import_export(dataset, ours, out)
    return _import_foreign(dataset, out, streams, task)


def _restore(values: Any, type_name: str, count: int) -> np.ndarray:
    """The first ``count`` entries of an infos array as a history column of type ``type_name``."""
    if type_name == "string":
        return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in values[:count]], dtype=object)
    if type_name.startswith("list<"):
        inner = np.float32 if type_name == "list<float32>" else np.int32
        rows = np.empty(count, dtype=object)
        for i, row in enumerate(np.asarray(values)[:count]):
            rows[i] = np.asarray(row, inner)
        return rows
    dtype = {"bool": np.bool_, "float32": np.float32, "float64": np.float64, "int32": np.int32,
             "int64": np.int64}[type_name]
    return np.asarray(values)[:count].astype(dtype)


def _write_unit(writer: HistoryWriter, task: str, run: int, episodes: Iterable[dict[str, np.ndarray]],
                info: dict[str, Any] | None) -> int:
    """Write the episodes' column batches as unit (task, run), appended in batches of at least ``APPEND_ROWS``
    rows, and commit it with ``info``; its row count."""
    with writer.unit(task, run) as unit:  # aborted on any exception
        parts: list[dict[str, np.ndarray]] = []
        pending = 0
        for columns in itertools.chain(episodes, [None]):  # None: the end, append what is left
            if columns is not None:
                parts.append(columns)
                pending += len(columns["reward"])
            if parts and (columns is None or pending >= APPEND_ROWS):
                unit.append({name: np.concatenate([p[name] for p in parts]) for name in parts[0]})
                parts, pending = [], 0
        return unit.commit(info)["rows"]


def _episode_columns(data: Any, stream: int, episode: int, state_of: Any, action_of: Any,
                     infos: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """One Minari episode as the column batch of episode ``episode`` of stream ``stream`` (its final observation
    dropped), with its ``infos`` columns restored (an export) or, without ``infos`` (a foreign dataset), ``update``
    0, ``step`` the step index and ``logprob`` 0.0."""
    count = len(data.rewards)
    columns = {"stream": np.full(count, stream, np.int32), "episode": np.full(count, episode, np.int32),
               "state": state_of(np.asarray(data.observations)[:count]),
               "action": action_of(np.asarray(data.actions)[:count]), "reward": np.asarray(data.rewards, np.float32),
               "terminated": np.asarray(data.terminations, bool), "truncated": np.asarray(data.truncations, bool)}
    if infos is None:
        return {**columns, "update": np.zeros(count, np.int64), "step": np.arange(count, dtype=np.int32),
                "logprob": np.zeros(count, np.float32)}
    return {**columns, **{c: _restore(data.infos[c], t, count) for c, t in infos.items()}}


def _import_export(dataset: Any, ours: dict[str, Any], out: str) -> dict[str, Any]:
    """Restore a dataset written by :func:`export_minari`, row for row."""
    export = ours.get("export") or {}
    if int(export.get("version", 0)) > EXPORT_VERSION:
        raise UserError(f"the Minari dataset was exported by a newer algorithm-distillation (layout version "
                        f"{export.get('version')}, this one reads {EXPORT_VERSION}); upgrade to import it")
    spec = HistorySpec.from_dict(ours["spec"])
    infos: dict[str, str] = dict(export["infos"])
    metadata = {**ours.get("metadata", {}),
                "imported_from": {"minari_dataset": dataset.id, "provenance": ours.get("provenance")}}
    writer = HistoryWriter(out, spec, ours["family"], metadata, planned_tasks=ours.get("planned_tasks"))
    state_of, action_of = converter(spec.state), converter(spec.action)
    indices = [int(i) for i in dataset.episode_indices]
    groups: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for index, meta in zip(indices, dataset.storage.get_episode_metadata(indices)):
        missing = [k for k in ("task", "run", "stream", "episode") if k not in meta]
        if missing:
            raise UserError(f"Minari episode {index} of {dataset.id} has no {', '.join(missing)} metadata although the "
                            f"dataset carries {METADATA_KEY!r}: it mixes exported episodes with others; import the "
                            "original export instead")
        key = (str(meta["task"]), int(meta["run"]))
        groups.setdefault(key, []).append((int(meta["stream"]), int(meta["episode"]), index))
    rows = 0
    for (task, run), episodes in sorted(groups.items()):
        if writer.is_complete(task, run):
            continue
        episodes.sort()  # by stream, episode, then Minari order (= time order of the export)
        batches = (_episode_columns(data, stream, episode, state_of, action_of, infos) for (stream, episode, _), data
                   in zip(episodes, dataset.iterate_episodes([e[2] for e in episodes])))
        rows += _write_unit(writer, task, run, batches, (ours.get("units", {}).get(f"{task}|{run}") or {}).get("info"))
    writer.close()
    return {"family": ours["family"], "units": len(groups), "rows": rows, "exact": True}


def _import_foreign(dataset: Any, out: str, streams: str, task: str | None) -> dict[str, Any]:
    """A Minari dataset from elsewhere: one task, run 0, streams as ``streams`` says (module docstring)."""
    state, state_of, state_notes = column_of_space(dataset.observation_space, "observation")
    action, action_of, action_notes = column_of_space(dataset.action_space, "action")
    task = check_task_name(task or re.sub(r"[^A-Za-z0-9_.+-]+", ".", dataset.id).lstrip("._+-") or "minari")
    indices = [int(i) for i in dataset.episode_indices]
    if not indices:
        raise UserError(f"the Minari dataset {dataset.id} holds no episodes")
    lengths = [int(m.get("total_steps", 0)) for m in dataset.storage.get_episode_metadata(indices)]
    meta = dataset.storage.metadata
    metadata = {
        "task_spec": {"episode_length": max(lengths), "observation_space": str(dataset.observation_space),
                      "action_space": str(dataset.action_space),
                      **({"observation": state_notes} if state_notes else {}),
                      **({"action": action_notes} if action_notes else {})},
        "source": {"algorithm": meta.get("algorithm_name") or "unknown", "minari_dataset": dataset.id,
                   "minari_version": meta.get("minari_version"), "author": sorted(meta.get("author") or []),
                   "code_permalink": meta.get("code_permalink"), "description": meta.get("description")},
        "minari_import": {"streams": streams, "update": "0 (Minari records no policy version)",
                          "logprob": "0.0 (Minari records no log-probabilities)",
                          "final_observation": "dropped", "infos": "not imported"},
    }
    writer = HistoryWriter(out, HistorySpec(state, action), "minari", metadata)
    rows = 0
    if not writer.is_complete(task, 0):
        batches = (_episode_columns(data, *((0, position) if streams == "dataset" else (position, 0)), state_of,
                                    action_of) for position, data in enumerate(dataset.iterate_episodes(indices))
                   if len(data.rewards))
        rows = _write_unit(writer, task, 0, batches, {"minari_episodes": len(indices)})
    writer.close()
    return {"family": "minari", "units": 1, "rows": rows, "exact": False}
