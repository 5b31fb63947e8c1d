"""The core's own commands (inspect, eval, demo, export/import minari): importing this package registers them."""
from importlib import import_module

for _name in ("inspect", "evaluate", "demo", "minari_export", "minari_import"):
    try:
        import_module(f"ad.commands.{_name}")
    except ModuleNotFoundError as _err:  # a command not written yet
        if _err.name != f"ad.commands.{_name}":
            raise
