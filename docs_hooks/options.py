"""MkDocs hook: options tables generated from the config dataclasses, so the docs never drift from ``--help``.

A page writes a marker on a line of its own::

    <!-- options: ad generate darkroom -->                  a registered command (``ad <group> <name>``, ``ad eval``)
    <!-- options: ad demo --task keydoor --model rl -->     a registered demo (``--model`` defaults to rl)
    <!-- options: tasks.darkroom.config:GenerateConfig -->  any config dataclass, by ``module:Class``

and the hook replaces it with one Markdown table per option group: flag, type, default and help text, read from
the fields' ``ad.config.option`` metadata (a field's ``group``; a field without one that a base config declares,
with its default or another, is listed under the first sentence of that base's docstring; the rest under
"General"). A marker that names no
command or class fails the build. Commands are found through the ``ad.plugins`` entry points, as ``ad`` finds them.

``<!-- gym-ids: tasks.darkroom -->`` becomes a table of the Gymnasium ids whose entry point lies in that package (read
from ``gymnasium.registry`` after the plugins are loaded), or a sentence saying it registers none.

It also turns the Sphinx roles of docstrings (``:func:`x```, ``:class:`x```) into plain code in the API reference, and
their ``::`` before a literal block into ``:``.
"""
from __future__ import annotations

import dataclasses
import importlib
import re
import shlex
import types
import typing
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^<!--[ \t]*options:[ \t]*(?P<target>.+?)[ \t]*-->[ \t]*$", re.MULTILINE)
GYM_MARKER = re.compile(r"^<!--[ \t]*gym-ids:[ \t]*(?P<package>\S+)[ \t]*-->[ \t]*$", re.MULTILINE)
ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|obj|exc|const):(?=<code>)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
GENERAL = "General"


def resolve(target: str) -> type:
    """The config dataclass a marker names (PluginError if none)."""
    words = shlex.split(target)
    try:
        if words and words[0] == "ad":
            return _command_config(words[1:])
        if len(words) == 1 and ":" in words[0]:
            module, _, name = words[0].partition(":")
            return getattr(importlib.import_module(module), name)
    except Exception as err:  # noqa: BLE001 - any failure to resolve is a broken page
        raise PluginError(f"options marker {target!r}: {type(err).__name__}: {err}") from err
    raise PluginError(f"options marker {target!r}: write 'ad <command> ...' or 'module:Class'")


def _command_config(words: list[str]) -> type:
    """The config class of ``ad <words>`` (a group command, a single command or a demo)."""
    import ad.commands

    ad.commands.load()  # registers the core's own commands: eval, inspect, ...
    from ad import registry
    from ad.cli import GROUPS

    if words[:1] == ["demo"]:
        options = dict(zip(words[1::2], words[2::2]))
        task = options.get("--task") or registry.default_family()
        return registry.get_demo(task, options.get("--model", "rl")).config_cls
    if words and words[0] in GROUPS:
        return registry.get(words[0], words[1]).config_cls
    return registry.get("ad", words[0]).config_cls


def type_name(tp: Any) -> str:
    """A field type in the words ``--help`` uses."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        text = " or ".join(type_name(a) for a in rest)
        return text + " or none" if len(rest) < len(args) else text
    if origin in (list, tuple):
        return "list of " + (type_name(args[0]) if args else "str")
    if tp is dict or origin is dict:
        return "mapping (config file)"
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


def default_text(field: dataclasses.Field) -> str:
    """A field's default as the command line would write it."""
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = field.default_factory()  # type: ignore[misc]
    else:
        return "required"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (list, tuple)):
        return f"`{' '.join(map(str, value))}`" if value else "empty"
    if isinstance(value, dict):
        return f"`{value}`" if value else "empty"
    if value == "":
        return '`""`'
    return f"`{value}`"


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped, ``<`` and ``*`` escaped outside code."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    parts, last = [], 0
    for match in CODE_SPAN.finditer(text):
        parts.append(_escape(text[last:match.start()]))
        parts.append(match.group(0))
        last = match.end()
    parts.append(_escape(text[last:]))
    return "".join(parts)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def _shared_title(owner: type) -> str:
    """The first sentence of a base config's docstring (its section title), else its name."""
    doc = " ".join((owner.__doc__ or "").split())
    if not doc or doc.startswith(owner.__name__ + "("):  # dataclass() writes the signature where there is none
        return owner.__name__
    return re.split(r"(?<!e\.g)[.;](?:\s|$)", doc, maxsplit=1)[0].strip()


def sections(config_cls: type) -> dict[str, list[dataclasses.Field]]:
    """The init fields of ``config_cls`` by section title, in ``--help`` order (ungrouped ones first)."""
    shared = [klass for klass in config_cls.__mro__[1:] if dataclasses.is_dataclass(klass)]
    grouped: dict[str, list[dataclasses.Field]] = {GENERAL: []}
    for field in dataclasses.fields(config_cls):
        if not field.init:
            continue
        title = field.metadata.get("group") or ""
        # a base config (an option group) that declares the field, also where this config overrides its default
        owner = next((klass for klass in shared if field.name in getattr(klass, "__annotations__", {})), None)
        if not title and owner is not None:
            title = _shared_title(owner)
        grouped.setdefault(title or GENERAL, []).append(field)
    return {title: fields for title, fields in grouped.items() if fields}


def options_markdown(config_cls: type, heading: str = "####") -> str:
    """Markdown tables of every option of ``config_cls``, one per section."""
    hints = typing.get_type_hints(config_cls)
    blocks = []
    grouped = sections(config_cls)
    for title, fields in grouped.items():
        lines = [f"{heading} {title}", ""] if len(grouped) > 1 else []
        lines += ["| option | type | default | what it does |", "|---|---|---|---|"]
        for field in fields:
            flag = "--" + field.name.replace("_", "-")
            if hints[field.name] is bool:
                flag = f"`{flag}` / `--no-{flag[2:]}`"
            else:
                flag = f"`{flag}`"
            lines.append(f"| {flag} | {cell(type_name(hints[field.name]))} | {cell(default_text(field))} | "
                         f"{cell(field.metadata.get('help', ''))} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def gym_ids_markdown(package: str) -> str:
    """A table of the Gymnasium ids registered with an entry point in ``package``."""
    import gymnasium

    from ad.registry import load_plugins

    load_plugins()
    try:
        importlib.import_module(package)
    except ImportError as err:
        raise PluginError(f"gym-ids marker {package!r}: {err}") from err
    specs = [spec for _, spec in sorted(gymnasium.registry.items())
             if str(spec.entry_point).startswith(package + ".")]
    if not specs:
        return f"`{package}` registers no Gymnasium id."
    lines = ["| Gymnasium id | env | vector env | episode steps | kwargs |", "|---|---|---|---|---|"]
    for spec in specs:
        vector = f"`{spec.vector_entry_point}`" if spec.vector_entry_point else "-"
        steps = spec.max_episode_steps if spec.max_episode_steps is not None else "-"
        kwargs = ", ".join(f"{key}={value!r}" for key, value in spec.kwargs.items())
        lines.append(f"| `{spec.id}` | `{spec.entry_point}` | {vector} | {steps} | "
                     f"{f'`{kwargs}`' if kwargs else '-'} |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace every options and gym-ids marker of a page with its tables."""
    markdown = MARKER.sub(lambda m: "\n" + options_markdown(resolve(m.group("target"))) + "\n", markdown)
    return GYM_MARKER.sub(lambda m: "\n" + gym_ids_markdown(m.group("package")) + "\n", markdown)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Drop the reStructuredText marks docstrings carry from the rendered page: roles (``:func:`` before a code
    span) and the ``::`` that introduces a literal block."""
    return ROLE.sub("", html).replace("::</p>", ":</p>")
