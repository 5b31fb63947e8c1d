"""The core's own commands (inspect, eval, demo, export/import minari): importing one of their modules registers it.

:func:`load` imports the module of one command (``ad eval`` needs only :mod:`ad.commands.evaluate`) or of all of
them (``ad --help``).
"""
from importlib import import_module

#: command words -> the module that registers it
MODULES = {("eval",): "evaluate", ("inspect",): "inspect", ("demo",): "demo", ("export", "minari"): "minari_export",
           ("import", "minari"): "minari_import"}


def load(words: tuple[str, ...] | None = None) -> None:
    """Register the core command named by ``words`` (``("eval",)``, ``("export", "minari")``), or all of them."""
    for key, module in MODULES.items():
        if words is None or key == tuple(words[:len(key)]):
            import_module(f"ad.commands.{module}")
