"""Algorithm-distillation toolkit core: history store, formats, datasets, evaluation, CLI."""

__version__ = "0.1.0"
