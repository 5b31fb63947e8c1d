"""Learning histories <-> Minari datasets (https://minari.farama.org), through Minari's public API.

Minari is an optional dependency (``pip install 'algorithm-distillation[minari]'``); it is imported inside the
functions here, never at module level.

Export (``ad export minari``)
    Every stream of every unit (task x run) is cut into its episodes (consecutive rows with one ``episode``
    value), in the store's order: units by (task, run), streams by id, episodes in time order. Minari episode
    ``i`` is the ``i``-th of them, so Minari's episode order *is* the learning-history order. Each episode has
    Minari's ``observations`` (T + 1 entries), ``actions``, ``rewards``, ``terminations``, ``truncations``
    (T entries each) and

    * per-episode metadata (``dataset.storage.get_episode_metadata(ids)``, the place Minari's own
      ``DataCollector`` writes episode statistics to): ``task``, ``run``, ``stream``, ``episode`` (the episode's
      index in its stream, our ``episode`` column), ``update_first`` / ``update_last`` (the first and last policy
      version that acted in it) and ``rewards_sum``;
    * ``infos``: the per-transition columns Minari has no field for: ``update``, ``step``, ``logprob`` and every
      extra column (``value``, ``next_state`` ...). ``infos[c][t]`` belongs to transition ``t`` (observation
      ``t``, action ``t``) for ``t < T``; ``infos[c][T]`` repeats ``infos[c][T - 1]`` (Minari keeps as many
      infos as observations);
    * the final observation ``observations[T]``: histories store the state each action was taken in, not the
      one it led to, so it is the last row's ``next_state`` when the dataset has that column (typed like the
      state), else the last state repeated. The rule used is recorded in the dataset metadata;
    * dataset metadata (``dataset.storage.metadata["algorithm_distillation"]``): family, column spec, the
      ``dataset.json`` metadata (task spec, source algorithm and its config, seeds, split ...), each unit's
      row count and commit info, the provenance, and the export rules above.

    A Minari user rebuilds every history by grouping episodes by (task, run, stream) and concatenating them in
    episode-id order, dropping each episode's last observation and last infos entry.

    The dataset is built in a hidden staging folder of the datasets root (``.ad-staging/``, which Minari's
    listings skip) and moved into place only complete, so an interrupted export leaves no half dataset.

Import (``ad import minari``)
    A dataset written by export comes back exactly: the same family, spec, metadata and unit infos and every
    column row for row (final observations and the padding infos entry dropped); the metadata gains
    ``imported_from``. Any other Minari dataset becomes family "minari", one task (named after the dataset
    id), run 0, and either one stream holding every episode in episode-id order (``streams="dataset"``, the
    default: a dataset collected by one learning agent stays one learning history) or one stream per episode
    (``streams="episode"``). Minari records no policy version nor log-probability, so ``update`` is 0 and
    ``logprob`` 0.0; final observations are dropped, infos are not imported. Discrete spaces become discrete
    columns (shifted to start at 0), Box spaces flattened float32 vectors; other spaces are refused.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ad.errors import UserError
from ad.history import ColumnSpec, HistoryReader, HistorySpec, HistoryWriter
from ad.history.layout import check_task_name

INSTALL = "pip install 'algorithm-distillation[minari]'"
#: key of our dataset-level metadata inside the Minari dataset's metadata.json
METADATA_KEY = "algorithm_distillation"
#: version of the export layout described in the module docstring
EXPORT_VERSION = 1
DATA_FORMATS = ("hdf5", "parquet", "arrow")
FOREIGN_STREAMS = ("dataset", "episode")
#: hidden folder of the datasets root where an export is built before it is moved into place
STAGING = ".ad-staging"
ENV_VAR = "MINARI_DATASETS_PATH"
#: dataset.json keys that are not user metadata (see ad.history.writer)
_HEADER_KEYS = {"format", "schema_version", "family", "spec", "provenance", "units", "updated"}
#: per-transition core columns Minari has no field for, kept in infos
_INFO_CORE = {"update": "int64", "step": "int32", "logprob": "float32"}
#: rows gathered before one UnitWriter.append on import
_APPEND_ROWS = 1 << 16

_PART = r"[A-Za-z0-9_-]+"
_EXPORT_ID = re.compile(rf"^{_PART}/{_PART}/{_PART}-v\d+$")
_MINARI_ID = re.compile(rf"^(?:{_PART}/)*{_PART}-v\d+$")


# ---------------------------------------------------------------------------- names, roots, the library
def check_export_name(name: str | None) -> str:
    """``name`` if it is a Minari dataset id of the form NAMESPACE/ENV/NAME-vVERSION, else a UserError."""
    if not name or not _EXPORT_ID.match(name):
        raise UserError(f"--name {name!r} is not a Minari dataset id of the form NAMESPACE/ENV/NAME-vVERSION "
                        "(letters, digits, _ and - in each part), e.g. ad/darkroom9/a2c-v0")
    return name


def check_dataset_id(name: str | None) -> str:
    """``name`` if it is any Minari dataset id, ``[NAMESPACE/...]NAME-vVERSION``, else a UserError."""
    if not name or not _MINARI_ID.match(name):
        raise UserError(f"--name {name!r} is not a Minari dataset id ([NAMESPACE/]NAME-vVERSION, e.g. "
                        "ad/darkroom9/a2c-v0 or D4RL/door/human-v2)")
    return name


def require_minari(data_format: str | None = None) -> Any:
    """The ``minari`` module (and h5py for the hdf5 format), or a UserError saying how to install them."""
    try:
        import minari
    except ImportError:
        raise UserError(f"Minari is not installed; {INSTALL}") from None
    if data_format == "hdf5":
        try:
            import h5py  # noqa: F401
        except ImportError:
            raise UserError(f"the hdf5 data format needs h5py; {INSTALL} (or use --data-format parquet)") from None
    return minari


@contextlib.contextmanager
def datasets_root(root: str | os.PathLike[str] | None) -> Iterator[None]:
    """Point Minari at the datasets root ``root`` (its MINARI_DATASETS_PATH) inside the block; None keeps
    Minari's own choice ($MINARI_DATASETS_PATH, else ~/.minari/datasets)."""
    if root is None:
        yield
        return
    old = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = os.path.abspath(os.fspath(root))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = old


def root_dir(root: str | os.PathLike[str] | None) -> Path:
    """The datasets root folder Minari uses for ``root`` (created if missing)."""
    from minari.storage import get_dataset_path

    with datasets_root(root):
        return Path(get_dataset_path()).absolute()


@contextlib.contextmanager
def _quiet_minari() -> Iterator[None]:
    """Minari warns about every optional metadata field left out (author, code permalink, env spec ...)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module=r"minari(\.|$)")
        yield


# ---------------------------------------------------------------------------- spaces
def space_of(column: ColumnSpec, what: str) -> Any:
    """The Minari (gymnasium) space of a discrete or vector history column; a UserError for text / tokens."""
    import gymnasium as gym

    if column.kind == "discrete":
        return gym.spaces.Discrete(int(column.n))
    if column.kind == "vector":
        return gym.spaces.Box(-np.inf, np.inf, (int(column.dim),), np.float32)
    raise UserError(f"the dataset's {what} column holds {column.kind} values; Minari export supports discrete and "
                    f"fixed-size vector {what}s only (text and token columns have no Minari space)")


def _column_of_space(space: Any, what: str) -> tuple[ColumnSpec, Any, dict[str, Any]]:
    """(history column, converter of a (n, ...) Minari array, notes) for a foreign dataset's space."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        notes = {"start": start} if start else {}
        return ColumnSpec.discrete(int(space.n)), lambda x: np.asarray(x).astype(np.int64) - start, notes
    if isinstance(space, gym.spaces.Box):
        dim = int(np.prod(space.shape)) if space.shape else 1
        notes = {"shape": list(space.shape)} if len(space.shape) != 1 else {}
        return ColumnSpec.vector(dim), lambda x: np.asarray(x, np.float32).reshape(len(x), dim), notes
    raise UserError(f"the Minari dataset's {what} space is {space}; import supports Discrete and Box spaces "
                    "(Dict, Tuple, Text, MultiDiscrete ... are not)")


# ---------------------------------------------------------------------------- export
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
                 {**_INFO_CORE, **extra}, "next_state" if fits else "repeat_last_state", data_format != "hdf5")


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
            "spec": plan.spec.to_dict(), "metadata": {k: v for k, v in meta.items() if k not in _HEADER_KEYS},
            "units": records, "provenance": meta.get("provenance"),
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
        with _quiet_minari(), datasets_root(staging):
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


# ---------------------------------------------------------------------------- import
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
                with _quiet_minari():
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


class _Batched:
    """Hands episodes' columns to a unit writer in batches of at least ``_APPEND_ROWS`` rows."""

    def __init__(self, unit: Any) -> None:
        self.unit, self.parts, self.pending = unit, [], 0

    def add(self, columns: dict[str, np.ndarray]) -> None:
        self.parts.append(columns)
        self.pending += len(columns["reward"])
        if self.pending >= _APPEND_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.unit.append({name: np.concatenate([p[name] for p in self.parts]) for name in self.parts[0]})
        self.parts, self.pending = [], 0


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
    writer = HistoryWriter(out, spec, ours["family"], metadata)
    state_type = "int64" if spec.state.kind == "discrete" else "list<float32>"
    action_type = "int64" if spec.action.kind == "discrete" else "list<float32>"
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
        unit = writer.open_unit(task, run)
        try:
            batched = _Batched(unit)
            for (stream, episode, _), data in zip(episodes, dataset.iterate_episodes([e[2] for e in episodes])):
                count = len(data.rewards)
                observations = np.asarray(data.observations)
                columns = {"stream": np.full(count, stream, np.int32), "episode": np.full(count, episode, np.int32),
                           "state": _state_values(observations[:count], state_type),
                           "action": _state_values(np.asarray(data.actions)[:count], action_type),
                           "reward": np.asarray(data.rewards, np.float32),
                           "terminated": np.asarray(data.terminations, bool),
                           "truncated": np.asarray(data.truncations, bool)}
                columns.update({c: _restore(data.infos[c], t, count) for c, t in infos.items()})
                batched.add(columns)
            batched.flush()
            rows += unit.commit((ours.get("units", {}).get(f"{task}|{run}") or {}).get("info"))["rows"]
        except BaseException:
            unit.abort()
            raise
    writer.close()
    return {"family": ours["family"], "units": len(groups), "rows": rows, "exact": True}


def _state_values(values: np.ndarray, type_name: str) -> np.ndarray:
    return values.astype(np.int64) if type_name == "int64" else values.reshape(len(values), -1).astype(np.float32)


def _task_name(dataset_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", ".", dataset_id).lstrip("._+-") or "minari"


def _import_foreign(dataset: Any, out: str, streams: str, task: str | None) -> dict[str, Any]:
    """A Minari dataset from elsewhere: one task, run 0, streams as ``streams`` says (module docstring)."""
    state, state_of, state_notes = _column_of_space(dataset.observation_space, "observation")
    action, action_of, action_notes = _column_of_space(dataset.action_space, "action")
    task = check_task_name(task or _task_name(dataset.id))
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
        unit = writer.open_unit(task, 0)
        try:
            batched = _Batched(unit)
            for position, data in enumerate(dataset.iterate_episodes(indices)):
                count = len(data.rewards)
                if count == 0:
                    continue
                stream, episode = (0, position) if streams == "dataset" else (position, 0)
                batched.add({"stream": np.full(count, stream, np.int32), "update": np.zeros(count, np.int64),
                              "episode": np.full(count, episode, np.int32), "step": np.arange(count, dtype=np.int32),
                              "state": state_of(np.asarray(data.observations)[:count]),
                              "action": action_of(np.asarray(data.actions)[:count]),
                              "reward": np.asarray(data.rewards, np.float32),
                              "terminated": np.asarray(data.terminations, bool),
                              "truncated": np.asarray(data.truncations, bool),
                              "logprob": np.zeros(count, np.float32)})
            batched.flush()
            rows = unit.commit({"minari_episodes": len(indices)})["rows"]
        except BaseException:
            unit.abort()
            raise
    writer.close()
    return {"family": "minari", "units": 1, "rows": rows, "exact": False}
