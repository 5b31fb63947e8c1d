"""`ad export minari`: write a learning-history dataset as a Minari dataset (see :mod:`ad.interop.minari`)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from ad.config import option, override
from ad.errors import UserError
from ad.config.groups import RunOptions, run_options
from ad.interop.minari import DATA_FORMATS, check_export_name
from ad.registry import default_dataset, register


@dataclass
class ExportMinariConfig(run_options("out")):
    """Write a learning-history dataset as a Minari dataset, one Minari episode per history episode, in order."""

    data: str | None = option(None, "learning-history dataset folder or URL to export (default: the one `ad generate` "
                                    "writes for the default task family)", positional=True)
    name: str | None = option(None, "Minari dataset id NAMESPACE/ENV/NAME-vVERSION, e.g. ad/darkroom9/a2c-v0 "
                                    "(required)")
    out: str | None = override(RunOptions, "out", None, "the Minari datasets root (default: $MINARI_DATASETS_PATH, "
                                                        "else ~/.minari/datasets)")
    data_format: str = option("hdf5", "Minari storage: hdf5 (one HDF5 file, Minari's default), parquet or arrow "
                                      "(one Parquet / Arrow IPC file per episode)")
    overwrite: bool = option(False, "replace a Minari dataset of that name (it is kept until the new one is "
                                    "complete)")
    tasks: list[str] = option([], "export these tasks only (default: every task)")
    skip_columns: list[str] = option([], "extra history columns to leave out (every other column is kept, the "
                                         "per-transition ones in each episode's infos)")
    author: str | None = option(None, "author recorded in the Minari metadata")
    author_email: str | None = option(None, "author e-mail recorded in the Minari metadata")
    code_permalink: str | None = option(None, "link to the code that made the dataset, recorded in the metadata")
    description: str | None = option(None, "description recorded in the Minari metadata (default: says where the "
                                           "order metadata is)")
    allow_incomplete: bool = option(False, "export a dataset whose generation did not finish (fewer tasks than its "
                                           "command planned; refused without it, unless --tasks picks tasks)")

    def __post_init__(self) -> None:
        if not self.name:
            raise UserError("--name is required: the Minari dataset id NAMESPACE/ENV/NAME-vVERSION, "
                            "e.g. ad/darkroom9/a2c-v0")
        check_export_name(self.name)
        if self.data_format not in DATA_FORMATS:
            raise UserError(f"--data-format {self.data_format!r}: choose one of {', '.join(DATA_FORMATS)}")
        if self.data is None:
            self.data = default_dataset()


def run(config: ExportMinariConfig) -> int:
    from ad.history import HistoryReader
    from ad.interop.minari import export_minari
    from ad.files import check_outside_datasets

    if not config.tasks:
        HistoryReader(config.data).require_complete(config.allow_incomplete)

    root = config.out or os.environ.get("MINARI_DATASETS_PATH")
    if root:  # Minari's own parquet files inside a learning-history dataset would break its documented glob
        check_outside_datasets(root, "--out" if config.out else "$MINARI_DATASETS_PATH")
    result = export_minari(config.data, config.name, root=config.out, data_format=config.data_format,
                           overwrite=config.overwrite, skip_columns=config.skip_columns, author=config.author,
                           author_email=config.author_email, code_permalink=config.code_permalink,
                           description=config.description, tasks=config.tasks)
    print(f"wrote Minari dataset {config.name} ({result['data_format']}): {result['episodes']:,} episodes, "
          f"{result['steps']:,} steps in {result['path']}")
    return 0


register("export", "minari", ExportMinariConfig, run, "write a learning-history dataset as a Minari dataset")
