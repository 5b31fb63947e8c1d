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

from ad.interop.minari_common import (DATA_FORMATS, EXPORT_VERSION, FOREIGN_STREAMS, INSTALL, METADATA_KEY, STAGING,
                                      check_dataset_id, check_export_name, datasets_root, require_minari, root_dir)
from ad.interop.minari_export import export_minari
from ad.interop.minari_import import import_minari, load

__all__ = ["DATA_FORMATS", "EXPORT_VERSION", "FOREIGN_STREAMS", "INSTALL", "METADATA_KEY", "STAGING",
           "check_dataset_id", "check_export_name", "datasets_root", "export_minari", "import_minari", "load",
           "require_minari", "root_dir"]
