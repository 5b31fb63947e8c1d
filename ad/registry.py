"""Name -> command registries for tasks and models.

`ad` never imports a concrete task or model at module level. Task and model
packages call :func:`register` when imported; :func:`load_plugins` imports the
packages listed in ``PLUGIN_MODULES`` (one line per task or model family).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from ad.errors import UserError

#: Modules that register commands when imported. A new task is one line here.
PLUGIN_MODULES: tuple[str, ...] = (
    "tasks.darkroom",
    "tasks.darkroom.eval_env",
    "tasks.rlhf",
    "tasks.gridworld",
    "models.rl",
    "models.rl.loader",
    "models.lm",
    "models.lm.loader",
)


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


def load_plugins() -> None:
    """Import every plugin module once so their commands are registered."""
    global _loaded
    if _loaded:
        return
    for module in PLUGIN_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:  # a plugin not written yet must not break the CLI
            if err.name and module.startswith(err.name):
                continue
            raise
    _loaded = True


def commands(group: str) -> dict[str, Command]:
    """All registered commands of one group, by name."""
    load_plugins()
    return {name: cmd for (g, name), cmd in _COMMANDS.items() if g == group}


def get(group: str, name: str) -> Command:
    """Look a command up, or raise a UserError listing the known names."""
    found = commands(group)
    if name not in found:
        known = ", ".join(sorted(found)) or "none"
        raise UserError(f"unknown {group} target {name!r}; known: {known}")
    return found[name]


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
    load_plugins()
    for name, (detect, load) in _POLICY_LOADERS.items():
        if detect(path):
            return load(path, **kwargs)
    raise UserError(f"{path} holds no checkpoint any model family recognises (tried: "
                    f"{', '.join(_POLICY_LOADERS) or 'none'}); pass the --out folder of `ad train`")
