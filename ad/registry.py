"""Name -> command registries for tasks and models.

`ad` never imports a concrete task or model at module level, and holds no list of them. A task or model family
is a *plugin*: a module that calls :func:`register` (and maybe :func:`register_env_factory` /
:func:`register_policy_loader`) when imported, declared by its distribution as a Python entry point::

    [project.entry-points."ad.plugins"]
    darkroom = "tasks.darkroom"

so a family may also live in another package. :func:`load_plugins` imports every module of the group once.

Plugin modules must stay light (no torch / lightning / transformers at import): ``ad --help`` imports all of them.
Register the heavy parts by reference, e.g. ``register(..., run=lazy_function("pkg.train:run"))``.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any, Callable

from ad.errors import UserError

#: Entry-point group whose values name plugin modules (``name = "package.module"``).
ENTRY_POINT_GROUP = "ad.plugins"

@dataclass(frozen=True)
class Command:
    """A CLI sub-command: ``ad <group> <name> [--options]``."""

    group: str  #: "generate", "train", ...
    name: str  #: "darkroom", "rl", ...
    config_cls: type  #: dataclass whose fields become --options
    run: Callable[[Any], Any]  #: called with the parsed config instance
    help: str = ""


_COMMANDS: dict[tuple[str, str], Command] = {}
_loaded = False


def register(group: str, name: str, config_cls: type, run: Callable[[Any], Any], help: str = "") -> None:
    """Register ``run(config)`` as ``ad <group> <name>``."""
    _COMMANDS[(group, name)] = Command(group, name, config_cls, run, help)


def plugin_modules() -> list[tuple[str, str]]:
    """(name, "module" or "module:function") of every installed plugin, from the ``ad.plugins`` entry points."""
    from importlib.metadata import entry_points

    return [(ep.name, ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP)]


def load_plugins() -> None:
    """Import every plugin module once so their commands are registered (``module:function``: also call it)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name, value in plugin_modules():
        module_name, _, function = (part.strip() for part in value.partition(":"))
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:  # a stale entry point (module renamed or uninstalled) must not break `ad`
            if err.name and (module_name == err.name or module_name.startswith(err.name + ".")):
                print(f"warning: skipping ad plugin {name!r}: module {module_name!r} is not installed",
                      file=sys.stderr)
                continue
            raise
        if function:
            getattr(module, function)()


def commands(group: str) -> dict[str, Command]:
    """All registered commands of one group, by name."""
    load_plugins()
    return {name: cmd for (g, name), cmd in _COMMANDS.items() if g == group}


def all_commands() -> list[Command]:
    """Every registered command, plugins loaded, by group and name (``ad``'s own ones: import ad.commands first)."""
    load_plugins()
    return [cmd for _, cmd in sorted(_COMMANDS.items())]


def get(group: str, name: str) -> Command:
    """Look a command up, or raise a UserError listing the known names."""
    found = commands(group)
    if name not in found:
        known = ", ".join(sorted(found)) or "none"
        raise UserError(f"unknown {group} target {name!r}; known: {known}")
    return found[name]


# ---------------------------------------------------------------------------- demos
#: (task family, model family) -> the `ad demo --task T --model M` command
_DEMOS: dict[tuple[str, str], Command] = {}
#: the demo `ad demo` runs without --task / --model
DEFAULT_DEMO = ("darkroom", "rl")


def register_demo(task: str, model: str, config_cls: type, run: Callable[[Any], Any], help: str = "") -> None:
    """Register ``run(config)`` as ``ad demo --task <task> --model <model>`` (options: ``config_cls``'s fields)."""
    _DEMOS[(task, model)] = Command("demo", f"{task}/{model}", config_cls, run, help)


def demos() -> dict[tuple[str, str], Command]:
    """Every registered demo, plugins loaded, by (task, model)."""
    load_plugins()
    return dict(sorted(_DEMOS.items()))


def get_demo(task: str, model: str) -> Command:
    """The demo of one (task, model) pair, or a UserError naming the pairs that exist."""
    found = demos()
    if (task, model) not in found:
        pairs = ", ".join(f"--task {t} --model {m}" for t, m in found) or "none"
        raise UserError(f"no demo for --task {task} --model {model}; demos: {pairs}")
    return found[(task, model)]


# ---------------------------------------------------------------------------- evaluation plug-ins
#: task family -> factory(metadata, tasks, envs_per_task) -> EvalEnv (see ad.evaluate)
_ENV_FACTORIES: dict[str, Callable[..., Any]] = {}
#: name -> (detect(path) -> bool, load(path, greedy=..., seed=...) -> policy)
_POLICY_LOADERS: dict[str, tuple[Callable[[Any], bool], Callable[..., Any]]] = {}


def register_env_factory(family: str, factory: Callable[..., Any]) -> None:
    """Register how to build a vectorised evaluation env for a task family's held-out tasks."""
    _ENV_FACTORIES[family] = factory


def env_factory(family: str) -> Callable[..., Any]:
    """The evaluation-env factory of a task family (UserError if none)."""
    load_plugins()
    if family not in _ENV_FACTORIES:
        known = ", ".join(sorted(_ENV_FACTORIES)) or "none"
        raise UserError(f"task family {family!r} has no evaluation environment; families with one: {known}")
    return _ENV_FACTORIES[family]


def register_policy_loader(name: str, detect: Callable[[Any], bool], load: Callable[..., Any]) -> None:
    """Register a loader that turns a checkpoint folder into an in-context policy."""
    _POLICY_LOADERS[name] = (detect, load)


def load_policy(path: Any, **kwargs: Any) -> Any:
    """Load the policy saved in ``path`` with the first loader that recognises it."""
    from pathlib import Path

    if "://" not in str(path) and not Path(path).expanduser().exists():
        raise UserError(f"{path} does not exist; pass the --out folder of `ad train`")
    load_plugins()
    for name, (detect, load) in _POLICY_LOADERS.items():
        if detect(path):
            return load(path, **kwargs)
    raise UserError(f"{path} holds no checkpoint any model family recognises (tried: "
                    f"{', '.join(_POLICY_LOADERS) or 'none'}); pass the --out folder of `ad train`")
