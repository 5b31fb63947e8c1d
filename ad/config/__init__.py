"""Typed config dataclasses -> command-line options.

Every option is a dataclass field made by :func:`option`; the field's type decides parsing. Values are resolved in
this order (later wins): field defaults < ``PRESETS[preset]`` (if the class defines presets) < ``--config
file.yaml|json`` < command-line flags. Every value is checked against the field's type (:func:`check_value`), then
the dataclass's ``__post_init__`` checks ranges and raises :class:`ad.errors.UserError`. Booleans take ``--flag``,
``--flag false`` and ``--no-flag``; ``--print-config`` prints the resolved options as YAML and exits. A renamed
option keeps its old names as ``aliases`` (read with a ``note:`` line on stderr, hidden from ``--help``).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import types
import typing
from typing import Any, Sequence

from ad.errors import UserError
from ad.files import check_input_file, read_utf8


def option(default: Any = dataclasses.MISSING, help: str = "", positional: bool = False, group: str = "",
           runtime: bool = False, aliases: Sequence[str] = (), **kwargs: Any) -> Any:
    """A dataclass field with help text (use as ``x: int = option(3, "what x is")``).

    ``positional=True`` makes it an optional positional argument (``ad inspect PATH``) that
    can also be given as ``--name``. Fields with a ``group`` title are listed under that title, after
    the ungrouped options, in ``--help``. ``runtime=True`` declares that the option changes how a command runs,
    not what it writes: it is left out of a dataset's recorded settings (:func:`data_options`), and a resumed run
    may change it (:func:`runtime_fields`). ``aliases`` are the option's deprecated old names (``("kl_coef",)``),
    still read from the command line, config files and recorded settings (:func:`current_names`).
    """
    meta = {"help": help, "positional": positional, "group": group, "runtime": runtime, "aliases": tuple(aliases)}
    if isinstance(default, (list, dict, set)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=meta, **kwargs)
    return dataclasses.field(default=default, metadata=meta, **kwargs)


def override(base: type, name: str, default: Any, note: str = "") -> Any:
    """Field ``name`` of the option group ``base`` with another default, keeping its help text and group, for a
    config that shares the group but not its default (``warmup_steps: int = override(TrainingOptions,
    "warmup_steps", 20)``): the option is declared once. ``note`` completes the help for this command (``out``:
    what the folder holds), after a colon."""
    field = next((f for f in dataclasses.fields(base) if f.name == name), None)
    if field is None:
        raise TypeError(f"{base.__name__} has no option {name!r}")
    text = field.metadata.get("help", "") + (f": {note}" if note else "")
    return option(default, text, **{k: v for k, v in field.metadata.items() if k != "help"})  # group, runtime ...


#: Every deprecated option name met so far -> its current name (filled by :func:`aliases_of`), for comparing
#: settings recorded under an old name (:func:`current_names`).
RENAMED: dict[str, str] = {}
_NOTED: set[str] = set()


def aliases_of(config_cls: Any) -> dict[str, str]:
    """Deprecated name -> current name for the options of a config (class or instance)."""
    found = {old: f.name for f in dataclasses.fields(config_cls) for old in f.metadata.get("aliases", ())}
    RENAMED.update(found)
    return found


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def refuse(config: Any, names: Sequence[str], bad: Any, words: str) -> None:
    """UserError ``--name <words>, got <value>`` for the first option of ``names`` whose value is ``bad(value)``."""
    for name in names:
        if bad(getattr(config, name)):
            raise UserError(f"{_flag(name)} {words}, got {getattr(config, name)}")


def refuse_choice(config: Any, **allowed: Sequence[str]) -> None:
    """UserError ``--name must be one of a, b, got 'value'`` for the first option ``name`` of ``allowed`` whose
    value is not one of its choices."""
    for name, choices in allowed.items():
        if getattr(config, name) not in choices:
            raise UserError(f"{_flag(name)} must be one of {', '.join(choices)}, got {getattr(config, name)!r}")


def current_names(config_cls: Any, values: dict[str, Any], source: str = "options", flags: bool = False,
                  quiet: bool = False) -> dict[str, Any]:
    """``values`` with every deprecated option name of ``config_cls`` replaced by the current one (a note on stderr
    per old name unless ``quiet``; ``flags``: name them as command-line flags). Both names given is a UserError."""
    aliases = aliases_of(config_cls)
    out = dict(values)
    for old, new in aliases.items():
        if old not in out:
            continue
        shown_old, shown_new = (_flag(old), _flag(new)) if flags else (old, new)
        if new in out:
            raise UserError(f"{source}: {shown_old} and {shown_new} name the same option ({shown_old} is its "
                            f"deprecated name); give only {shown_new}")
        out[new] = out.pop(old)
        if not quiet and shown_old not in _NOTED:  # once per old name and process
            _NOTED.add(shown_old)
            print(f"note: {shown_old} is deprecated; use {shown_new}", file=sys.stderr)
    return out


def upgrade_recorded(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Recorded settings ``old`` with a deprecated option name renamed where ``new`` (this command's settings) uses
    the current name and ``old`` does not: a dataset or run written before a rename still compares equal."""
    renames = {k: RENAMED[k] for k in old if k in RENAMED and k not in new and RENAMED[k] in new
               and RENAMED[k] not in old}
    return {renames.get(k, k): v for k, v in old.items()}


def _base_type(tp: Any) -> tuple[Any, bool]:
    """Strip Optional[...]; return (type, is_optional)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _parse_bool(text: str) -> bool:
    lowered = str(text).lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _choices(tp: Any) -> tuple[Any, ...] | None:
    """The allowed values of a ``Literal[...]`` type (None for other types)."""
    return typing.get_args(tp) if typing.get_origin(tp) is typing.Literal else None


def _argument(tp: Any) -> dict[str, Any]:
    """argparse's ``type`` of a field type, with ``nargs`` for a list and ``choices`` for a ``Literal`` (of its
    items, for a list)."""
    tp, _ = _base_type(tp)
    origin = typing.get_origin(tp)
    if tp is bool:
        return {"type": _parse_bool}
    if _choices(tp):
        return {"type": type(_choices(tp)[0]), "choices": _choices(tp)}
    if origin in (list, tuple):
        return {**_argument((typing.get_args(tp) or (str,))[0]), "nargs": "+"}
    if tp in (int, float, str):
        return {"type": tp}
    return {"type": json.loads if tp is dict or origin is dict else str}


_KIND = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}
#: Seeds every generator and trainer takes: numpy, torch, Lightning and the int32 ``run`` column of a dataset.
SEED_RANGE = (0, 2**31 - 1)
#: Options that are seeds (their values are checked against :data:`SEED_RANGE`).
SEED_OPTIONS = ("seed",)


def _not_utf8(text: str) -> str | None:
    """A description of the first character of ``text`` that is not UTF-8 (bytes the OS could not decode arrive
    as lone surrogates), or None."""
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError as err:
        char = text[err.start]
        shown = f"byte 0x{ord(char) - 0xDC00:02x}" if 0xDC80 <= ord(char) <= 0xDCFF else repr(char)
        return f"{shown} at position {err.start + 1}"


def check_value(name: str, value: Any, tp: Any, source: str = "options") -> Any:
    """``value`` converted to the field type ``tp``, or a UserError naming option ``--name`` and ``source``.

    Integers refuse fractions and booleans, floats refuse NaN / +-inf and booleans (numeric strings such as
    YAML's ``1e-4`` are read as numbers), ``Literal`` types refuse values outside their choices, lists check
    each item (a single value becomes a one-item list).
    """
    flag = _flag(name)
    base, optional = _base_type(tp)

    def bad(expected: str) -> UserError:
        return UserError(f"option {flag} ({source}): expected {expected}, got {value!r}")

    if value is None:
        if optional:
            return None
        raise bad(_KIND.get(base, str(base)))
    choices = _choices(base)
    if choices is not None:
        if value not in choices:
            raise bad("one of " + ", ".join(map(str, choices)))
        return value
    origin = typing.get_origin(base)
    if origin in (list, tuple):
        inner = (typing.get_args(base) or (str,))[0]
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        return [check_value(name, item, inner, source) for item in items]
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            with contextlib.suppress(argparse.ArgumentTypeError):
                return _parse_bool(value)
        raise bad(_KIND[bool])
    if base is int:
        number = _to_int(value)
        if number is None:
            raise bad(_KIND[int])
        low, high = SEED_RANGE
        if name in SEED_OPTIONS and not low <= number <= high:
            raise bad(f"a seed in {low}..{high} (what the generators and the int32 run column take)")
        return number
    if base is float:
        try:
            number = float(value.strip()) if isinstance(value, str) else value
        except ValueError:
            raise bad(_KIND[float]) from None
        if isinstance(value, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            raise bad(_KIND[float])
        return float(number)
    if base is str:
        if isinstance(value, str):
            where = _not_utf8(value)
            if where:
                raise UserError(f"option {flag} ({source}): holds bytes that are not UTF-8 ({where}); name it with "
                                "UTF-8 characters only")
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise bad(_KIND[str])
    if (base is dict or origin is dict) and not isinstance(value, dict):
        raise bad("a mapping")
    return value


def _to_int(value: Any) -> int | None:
    """An integer option's value as an int (None for a fraction, a boolean or text that is no integer)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def build_parser(config_cls: type, prog: str, description: str = "",
                 selectors: dict[str, tuple[str, Sequence[str]]] | None = None) -> argparse.ArgumentParser:
    """An argparse parser whose options are the dataclass fields (all default to None), after the ``selectors``
    (``{"task": (help, choices)}``: options that chose ``config_cls`` and were already read, shown in the help)."""
    text = (description or (config_cls.__doc__ or "")).replace("%", "%%")
    parser = argparse.ArgumentParser(prog=prog, description=text)
    for name, (help_text, choices) in (selectors or {}).items():
        parser.add_argument("--" + name, choices=list(choices), dest=f"_selector_{name}",
                            help=help_text.replace("%", "%%"))
    parser.add_argument("--config", default=None, help="YAML or JSON file of option values (flags override it)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved options as YAML (a file --config reads) and exit")
    hints = typing.get_type_hints(config_cls)
    fields = [f for f in dataclasses.fields(config_cls) if f.init]
    groups: dict[str, Any] = {}
    for field in sorted(fields, key=lambda f: bool(f.metadata.get("group"))):  # stable: grouped ones last
        title = field.metadata.get("group")
        target = groups.setdefault(title, parser.add_argument_group(title)) if title else parser
        default = field.default if field.default is not dataclasses.MISSING else (
            field.default_factory() if field.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        help_text = field.metadata.get("help", "")
        if default is not None:
            help_text += f" (default: {default})"
        help_text = help_text.replace("%", "%%")  # argparse reads % as a format code
        kwargs: dict[str, Any] = {**_argument(hints[field.name]), "default": None, "help": help_text,
                                   "dest": field.name}
        is_bool = _base_type(hints[field.name])[0] is bool
        if is_bool:  # --flag, --flag false, --no-flag
            kwargs.update(nargs="?", const=True, metavar="BOOL")
        for old in field.metadata.get("aliases", ()):  # deprecated names: read, not shown in --help
            _add_flag(parser, old, {**kwargs, "dest": old, "help": argparse.SUPPRESS}, is_bool)
        if field.metadata.get("positional") and not is_bool:
            parser.add_argument(f"_{field.name}_positional", nargs="?", default=None, type=kwargs["type"],
                                help=help_text, metavar=field.name.upper())
        _add_flag(target, field.name, kwargs, is_bool)
    return parser


def _add_flag(parser: Any, name: str, kwargs: dict[str, Any], is_bool: bool) -> None:
    """``--name`` (and a hidden ``--no-name`` for a boolean) writing to ``kwargs["dest"]``."""
    parser.add_argument(_flag(name), **kwargs)
    if is_bool:
        parser.add_argument("--no-" + name.replace("_", "-"), dest=kwargs["dest"], action="store_const", const=False,
                            default=None, help=argparse.SUPPRESS)


def load_config_file(path: str) -> dict[str, Any]:
    """Read a YAML or JSON mapping of option values."""
    file = check_input_file(path, "config file", "pass --config <a YAML or JSON file of option values>")
    text = read_utf8(file, f"config file {path}")
    try:
        if file.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as err:  # noqa: BLE001 - any parse failure is the user's file
        raise UserError(f"config file {path} is not valid YAML/JSON: {err}") from None
    if not isinstance(data, dict):
        raise UserError(f"config file {path} must hold a mapping of option names to values")
    # ``~/runs/x`` -> ``/home/<user>/runs/x``: a shell does it on the command line, not inside a config file
    return {key: os.path.expanduser(value) if isinstance(value, str) and (value == "~" or value.startswith("~/"))
            else value for key, value in data.items()}


def make_config(config_cls: type, values: dict[str, Any], source: str = "options") -> Any:
    """Instantiate ``config_cls`` from a dict, applying its preset first; unknown keys are an error (deprecated
    names are read as their current ones, :func:`current_names`)."""
    values = current_names(config_cls, values, source)
    names = {f.name for f in dataclasses.fields(config_cls) if f.init}
    unknown = sorted(set(values) - names)
    if unknown:
        raise UserError(f"unknown option(s) in {source}: {', '.join(unknown)}; known: {', '.join(sorted(names))}")
    merged: dict[str, Any] = {}
    presets = getattr(config_cls, "PRESETS", None)
    if presets is not None and "preset" in names:
        preset = values.get("preset") or next(
            f.default for f in dataclasses.fields(config_cls) if f.name == "preset")
        if preset not in presets:
            raise UserError(f"unknown preset {preset!r}; choose one of: {', '.join(sorted(presets))}")
        merged.update(presets[preset])
    merged.update(values)
    hints = typing.get_type_hints(config_cls)
    merged = {name: check_value(name, value, hints[name], source) for name, value in merged.items()}
    try:
        return config_cls(**merged)
    except TypeError as err:
        raise UserError(f"bad {source}: {err}") from None


def parse_config(config_cls: type, argv: Sequence[str], prog: str, description: str = "",
                 selectors: dict[str, tuple[str, Sequence[str]]] | None = None) -> Any:
    """Parse command-line ``argv`` into an instance of ``config_cls`` (``selectors``: see :func:`build_parser`)."""
    parser = build_parser(config_cls, prog, description, selectors)
    args = {k: v for k, v in vars(parser.parse_args(list(argv))).items() if not k.startswith("_selector_")}
    file = args.pop("config")
    show = args.pop("print_config")
    for key in [k for k in args if k.startswith("_") and k.endswith("_positional")]:
        value = args.pop(key)
        name = key[1:-len("_positional")]
        if value is not None and args.get(name) is None:
            args[name] = value
    cli = current_names(config_cls, {k: v for k, v in args.items() if v is not None}, f"{prog} options", flags=True)
    values: dict[str, Any] = current_names(config_cls, load_config_file(file), f"config file {file}") if file else {}
    values.update(cli)
    config = make_config(config_cls, values, source=f"{prog} options" + (f" or config file {file}" if file else ""))
    if show:
        import yaml

        print(yaml.safe_dump(config_to_dict(config), sort_keys=False), end="")
        raise SystemExit(0)
    return config


def config_to_dict(config: Any) -> dict[str, Any]:
    """A JSON-safe dict of a config dataclass."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def runtime_fields(config: Any) -> frozenset[str]:
    """Names of the options of a config (class or instance) declared ``runtime=True``: they change how a command
    runs, not what it writes, so a resumed run may change them."""
    return frozenset(f.name for f in dataclasses.fields(config) if f.metadata.get("runtime", False))


def data_options(config: Any) -> dict[str, Any]:
    """:func:`config_to_dict` without the runtime options: the settings a dataset records (a resume must match; one
    recorded under an option's deprecated name still matches, :func:`upgrade_recorded`)."""
    aliases_of(config)  # RENAMED knows this config's old names, however the config was built
    skip = runtime_fields(config)
    return {k: v for k, v in config_to_dict(config).items() if k not in skip}
