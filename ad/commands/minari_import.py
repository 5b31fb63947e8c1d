"""`ad import minari`: write a Minari dataset as a learning-history dataset (see :mod:`ad.interop.minari`)."""
from __future__ import annotations

import sys
from dataclasses import dataclass

from ad.config import option
from ad.errors import UserError
from ad.config.groups import dataset_out, run_options
from ad.interop.minari import FOREIGN_STREAMS, check_dataset_id
from ad.registry import register


@dataclass
class ImportMinariConfig(run_options("out")):
    """Write a Minari dataset as a learning-history dataset; one written by `ad export minari` comes back exactly."""

    name: str | None = option(None, "Minari dataset id in the datasets root, e.g. ad/darkroom9/a2c-v0")
    path: str | None = option(None, "folder of one Minari dataset (instead of --name)")
    root: str | None = option(None, "Minari datasets root --name is looked up in (default: $MINARI_DATASETS_PATH, "
                                    "else ~/.minari/datasets)")
    out: str = dataset_out("data/minari")
    streams: str = option("dataset", "datasets not written by `ad export minari`: 'dataset' = all episodes form one "
                                     "stream in episode-id order (one learning history), 'episode' = each episode "
                                     "is its own stream")
    task: str | None = option(None, "datasets not written by `ad export minari`: the task name (default: the "
                                    "dataset id with / replaced by .)")

    def __post_init__(self) -> None:
        if (self.name is None) == (self.path is None):
            raise UserError("give the Minari dataset as --name ID (looked up in --root) or as --path FOLDER, "
                            "exactly one of them")
        if self.streams not in FOREIGN_STREAMS:
            raise UserError(f"--streams {self.streams!r}: choose one of {', '.join(FOREIGN_STREAMS)}")
        if self.name is not None:
            check_dataset_id(self.name)


def run(config: ImportMinariConfig) -> int:
    from ad.interop.minari import import_minari

    result = import_minari(config.out, name=config.name, root=config.root, path=config.path,
                           streams=config.streams, task=config.task)
    how = "restored exactly (written by `ad export minari`)" if result["exact"] else \
        f"imported as family 'minari' (streams per {config.streams})"
    print(f"wrote {config.out}: {result['rows']:,} transitions in {result['units']} unit(s), {how}")
    from ad.history import HistoryReader

    done, planned = HistoryReader(config.out).completeness()
    if planned is not None and done < planned:
        print(f"warning: {config.out} is incomplete: {done} of {planned} tasks (the exported dataset's generation "
              "did not finish); re-run the generate command that made it to finish, then export and import it "
              "again", file=sys.stderr)
    return 0


register("import", "minari", ImportMinariConfig, run, "write a Minari dataset as a learning-history dataset")
