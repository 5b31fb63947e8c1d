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
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from ad.errors import UserError
from ad.registry import lazy_exports

if TYPE_CHECKING:
    from ad.history import ColumnSpec

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
HEADER_KEYS = {"format", "schema_version", "family", "spec", "provenance", "units", "updated", "planned_tasks"}
#: per-transition core columns Minari has no field for, kept in infos
INFO_CORE = {"update": "int64", "step": "int32", "logprob": "float32"}
#: rows gathered before one UnitWriter.append on import
APPEND_ROWS = 1 << 16

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
def quiet_minari() -> Iterator[None]:
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


def converter(column: ColumnSpec, start: int = 0) -> Any:
    """The converter of a (n, ...) Minari array into the values of a discrete (shifted by ``start`` to start at 0)
    or vector history column."""
    if column.kind == "discrete":
        return lambda x: np.asarray(x).astype(np.int64) - start
    return lambda x: np.asarray(x, np.float32).reshape(len(x), -1)


def column_of_space(space: Any, what: str) -> tuple[ColumnSpec, Any, dict[str, Any]]:
    """(history column, its :func:`converter`, notes) for a foreign dataset's space."""
    import gymnasium as gym

    from ad.history import ColumnSpec

    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        column = ColumnSpec.discrete(int(space.n))
        return column, converter(column, start), {"start": start} if start else {}
    if isinstance(space, gym.spaces.Box):
        column = ColumnSpec.vector(int(np.prod(space.shape)) if space.shape else 1)
        return column, converter(column), {"shape": list(space.shape)} if len(space.shape) != 1 else {}
    raise UserError(f"the Minari dataset's {what} space is {space}; import supports Discrete and Box spaces "
                    "(Dict, Tuple, Text, MultiDiscrete ... are not)")


# the converters themselves load pyarrow (ad.history): imported on first use
__getattr__ = lazy_exports(__name__, {"export_minari": "ad.interop.minari_export",
                                      "import_minari": "ad.interop.minari_import", "load": "ad.interop.minari_import"})
