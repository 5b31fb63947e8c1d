"""Name -> command registries for tasks and models.

`ad` never imports a concrete task or model at module level, and holds no list of them. A task or model family
is a *plugin*: a module that calls :func:`register` (a task family: :func:`ad.families.register_family`; maybe
:func:`register_policy_loader`) when imported, declared by its distribution as a Python entry point::

    [project.entry-points."ad.plugins"]
    darkroom = "tasks.darkroom"

so a family may also live in another package. :func:`load_plugins` imports every module of the group once.

Plugin modules must stay light (no torch / lightning / transformers at import): ``ad --help`` imports all of them.
Register the heavy parts by reference, e.g. ``register(..., run=lazy_function("pkg.train:run"))``.
"""
from __future__ import annotations

import importlib
from importlib import import_module
import sys
from dataclasses import dataclass, fields
from typing import Any, Callable

from ad.errors import UserError

#: Entry-point group of task families (``name = "package.module"``): ``ad generate <name>``, ``ad demo --task <name>``.
ENTRY_POINT_GROUP = "ad.plugins"
#: Entry-point group of model families: ``ad train <name>``, ``ad demo --model <name>``, checkpoint loaders.
MODEL_ENTRY_POINT_GROUP = "ad.models"
#: Entry-point group naming the task family to try first as the default (``ad demo`` without ``--task``), so
#: finding it loads that one plugin rather than every plugin before it.
DEFAULT_FAMILY_ENTRY_POINT_GROUP = "ad.default_family"

@dataclass(frozen=True)
class Command:
    """A CLI sub-command: ``ad <group> <name> [--options]``."""

    group: str  #: "generate", "train", ...
    name: str  #: "darkroom", "rl", ...
    config_cls: type  #: dataclass whose fields become --options
    run: Callable[[Any], Any]  #: called with the parsed config instance
    help: str = ""


_COMMANDS: dict[tuple[str, str], Command] = {}
#: entry-point names of the plugins imported so far
_LOADED: set[str] = set()


def register(group: str, name: str, config_cls: type, run: Callable[[Any], Any], help: str = "") -> None:
    """Register ``run(config)`` as ``ad <group> <name>``."""
    _COMMANDS[(group, name)] = Command(group, name, config_cls, run, help)


def plugin_modules(groups: tuple[str, ...] = (ENTRY_POINT_GROUP, MODEL_ENTRY_POINT_GROUP)) -> list[tuple[str, str]]:
    """(name, "module" or "module:function") of every installed plugin of ``groups`` (task and model families)."""
    from importlib.metadata import entry_points

    return [(ep.name, ep.value) for group in groups for ep in entry_points(group=group)]


def load_plugins(names: Any = None, groups: tuple[str, ...] = (ENTRY_POINT_GROUP, MODEL_ENTRY_POINT_GROUP)) -> None:
    """Import plugin modules once so their commands are registered (``module:function``: also call it): those named
    in ``names`` (entry-point names), or every one of ``groups``. A command loads only the plugins it needs."""
    wanted = None if names is None else set(names)
    for name, value in plugin_modules(groups):
        if name in _LOADED or (wanted is not None and name not in wanted):
            continue
        _LOADED.add(name)
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


def _found(table: dict[Any, Any], key: Any, plugins: list[str], has: Callable[[Any], bool] = bool) -> bool:
    """Whether ``key`` is in ``table`` (with ``has(table[key])``) once the ``plugins`` named are loaded, then (only if
    it is not) every plugin."""
    load_plugins(plugins)
    if key not in table or not has(table[key]):
        load_plugins()
    return key in table and has(table[key])


def get(group: str, name: str) -> Command:
    """Look a command up (loading the plugin of that name first, every plugin only if it is not there), or raise a
    UserError listing the known names."""
    if not _found(_COMMANDS, (group, name), [name]):
        raise UserError(f"unknown {group} target {name!r}; known: {', '.join(sorted(commands(group))) or 'none'}")
    return _COMMANDS[(group, name)]


# ---------------------------------------------------------------------------- task families and demos
#: (task family, model family) -> the `ad demo --task T --model M` command
_DEMOS: dict[tuple[str, str], Command] = {}
#: the model family `ad demo` uses without --model
DEFAULT_MODEL = "rl"
#: task family name -> its :class:`ad.families.TaskFamily` (recorded by :func:`ad.families.register_family`): its
#: evaluation envs, the ``task_spec`` keys that parametrise them, its optimal actions, whether it is the default
FAMILIES: dict[str, Any] = {}


def register_demo(task: str, model: str, config_cls: type, run: Callable[[Any], Any], help: str = "") -> None:
    """Register ``run(config)`` as ``ad demo --task <task> --model <model>`` (options: ``config_cls``'s fields)."""
    _DEMOS[(task, model)] = Command("demo", f"{task}/{model}", config_cls, run, help)


def default_family() -> str | None:
    """The default task family's name (None if no family registers itself as the default): task plugins are loaded
    one at a time until one has, those the ``ad.default_family`` entry points name first."""
    preferred = [name for name, _ in plugin_modules((DEFAULT_FAMILY_ENTRY_POINT_GROUP,))]
    others = [name for name, _ in plugin_modules((ENTRY_POINT_GROUP,)) if name not in preferred]
    for name in [None, *preferred, *others]:
        if name is not None:
            load_plugins([name], groups=(ENTRY_POINT_GROUP,))
        found = next((n for n, family in FAMILIES.items() if family.default), None)
        if found is not None:
            return found
    return None


def default_dataset() -> str:
    """The default task family's dataset folder, the default dataset of ``ad eval``, ``ad inspect`` ..."""
    name = default_family()
    if name is None:
        raise UserError("no task family is registered as the default; name the dataset to read")
    return str({f.name: f.default for f in fields(FAMILIES[name].generate_config)}.get("out"))


def demos() -> dict[tuple[str, str], Command]:
    """Every registered demo, plugins loaded, by (task, model)."""
    load_plugins()
    return dict(sorted(_DEMOS.items()))


def get_demo(task: str, model: str) -> Command:
    """The demo of one (task, model) pair, or a UserError naming the pairs that exist."""
    if not _found(_DEMOS, (task, model), [task, model]):
        pairs = ", ".join(f"--task {t} --model {m}" for t, m in demos()) or "none"
        raise UserError(f"no demo for --task {task} --model {model}; demos: {pairs}")
    return _DEMOS[(task, model)]


# ---------------------------------------------------------------------------- evaluation plug-ins
#: name -> (detect(path) -> bool, load(path, greedy=..., seed=..., temperature=...) -> policy)
_POLICY_LOADERS: dict[str, tuple[Callable[[Any], bool], Callable[..., Any]]] = {}


def _evaluated(family: Any) -> bool:
    """Whether a task family is evaluated in context (it gives a Gymnasium id or eval kwargs)."""
    return family.gym_id is not None or family.eval_kwargs is not None


def task_kwargs(family: str) -> tuple[str, ...]:
    """The ``task_spec`` keys that parametrise a task family's envs (empty for a family without an eval env)."""
    load_plugins([family])
    found = FAMILIES.get(family)
    return tuple(found.task_kwargs) if found is not None and _evaluated(found) else ()


def env_factory(family: str) -> Callable[..., Any]:
    """``make(metadata, tasks, envs_per_task=1) -> ad.evaluate.EvalEnv``: a task family's evaluation envs, built by
    :func:`ad.evaluate.make_eval_env` from what it registered (UserError if it registered none)."""
    if not _found(FAMILIES, family, [family], _evaluated):
        known = ", ".join(sorted(n for n, f in FAMILIES.items() if _evaluated(f))) or "none"
        raise UserError(f"task family {family!r} has no evaluation environment; families with one: {known}")
    gym_id, eval_kwargs = FAMILIES[family].gym_id, FAMILIES[family].eval_kwargs

    def make(metadata: dict[str, Any], tasks: list[str], envs_per_task: int = 1) -> Any:
        from ad.evaluate import make_eval_env

        return make_eval_env(metadata, tasks, envs_per_task, gym_id=gym_id, eval_kwargs=eval_kwargs)

    return make


def action_order(family: str) -> tuple[int, ...] | None:
    """The order of a task family's discrete actions in which its optimal actions list the tasks
    (:attr:`ad.families.TaskFamily.action_order`; None: the actions' own order, or an unknown family)."""
    load_plugins([family])
    found = FAMILIES.get(family)
    return None if found is None or found.action_order is None else tuple(found.action_order)


def _family_function(family: str | None, attribute: str, need: str, what: str, instead: str) -> Callable[..., Any]:
    """A task family's contract function ``attribute``; a UserError naming the families that have one if it has none
    (``what`` needs ``need``; ``instead`` says what to do)."""
    if not _found(FAMILIES, family, [family] if family else [], lambda f: getattr(f, attribute) is not None):
        known = ", ".join(sorted(n for n, f in FAMILIES.items() if getattr(f, attribute) is not None)) or "none"
        raise UserError(f"{what} needs {need}, which task family {family!r} does not provide (families that do: "
                        f"{known}); {instead}")
    return getattr(FAMILIES[family], attribute)


def optimal_actions(family: str | None, what: str = "this objective") -> Callable[..., Any]:
    """The optimal-actions function of a task family; a UserError naming the families that have one if it has
    none (``what`` names the option that needs it)."""
    return _family_function(family, "optimal_actions", "the optimal action of every state", what,
                            "use another objective or a dataset of one of these")


def posterior_action_probs(family: str | None, what: str = "this objective") -> Callable[..., Any]:
    """The posterior-optimal-action function of a task family (:attr:`ad.families.TaskFamily.posterior_action_probs`);
    a UserError naming the families that have one if it has none (``what`` names the option that needs it)."""
    return _family_function(family, "posterior_action_probs",
                            "the probability of each action being optimal under the family's task distribution",
                            what, "use --dpt-target optimal or a dataset of one of these")


def register_policy_loader(name: str, detect: Callable[[Any], bool], load: Callable[..., Any]) -> None:
    """Register a loader that turns a checkpoint folder into an in-context policy."""
    _POLICY_LOADERS[name] = (detect, load)


def load_policy(path: Any, **kwargs: Any) -> Any:
    """Load the policy saved in ``path`` with the first loader that recognises it (model families' loaders): those
    of the model plugins already loaded first, then the others' one plugin at a time, until one does."""
    from pathlib import Path

    if "://" not in str(path) and not Path(path).expanduser().exists():
        raise UserError(f"{path} does not exist; pass the --out folder of `ad train`")
    tried: set[str] = set()
    for plugin in [None, *(name for name, _ in plugin_modules((MODEL_ENTRY_POINT_GROUP,)))]:
        if plugin is not None:
            load_plugins([plugin], groups=(MODEL_ENTRY_POINT_GROUP,))
        for name, (detect, load) in list(_POLICY_LOADERS.items()):
            if name not in tried:
                tried.add(name)
                if detect(path):
                    return load(path, **kwargs)
    raise UserError(f"{path} holds no checkpoint any model family recognises (tried: "
                    f"{', '.join(_POLICY_LOADERS) or 'none'}); pass the --out folder of `ad train`")


# ---------------------------------------------------------------------------- lazy references
def lazy_exports(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``names[attr]`` (a module path) on first access of ``attr``.

    Use as ``__getattr__ = lazy_exports(__name__, {"Thing": "pkg.heavy_module"})``.
    """
    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def lazy_function(target: str) -> Callable[..., Any]:
    """A function that imports ``"module:function"`` when first called and calls it (keeps registries light)."""
    module, _, function = target.partition(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(import_module(module), function)(*args, **kwargs)

    call.__name__ = call.__qualname__ = function
    call.__doc__ = f"Imports {module} and calls its {function}."
    return call
