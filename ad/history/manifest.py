"""``dataset.json``: read it with every field's type checked, and name the settings two descriptions differ in."""
from __future__ import annotations

import json
from typing import Any

from ad.config import upgrade_recorded
from ad.errors import SchemaError
from ad.history import layout
from ad.history.spec import SCHEMA_VERSION
from ad.history.storage import Location

#: Fields every unit record holds, with their JSON types.
_UNIT_FIELDS: dict[str, type | tuple[type, ...]] = {"task": str, "run": int, "rows": int, "files": list}


def read_manifest(location: Location) -> dict[str, Any]:
    """The parsed ``dataset.json`` of ``location``; a :class:`SchemaError` names the file and the bad field."""
    path = location.join(layout.DATASET_JSON)
    advice = ("re-run the `ad generate` command that made the dataset with a new --out folder, or restore the file "
              "from a copy")
    try:
        meta = location.read_json(path)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SchemaError(f"{path} is corrupt ({err}); {advice}") from None
    if not isinstance(meta, dict) or meta.get("format") != layout.FORMAT_NAME:
        raise SchemaError(f"{path} is not a learning-history dataset description (no \"format\": "
                          f"\"{layout.FORMAT_NAME}\"); choose another folder")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise SchemaError(f"{path} has schema_version {meta.get('schema_version')!r}; this toolkit reads version "
                          f"{SCHEMA_VERSION}: regenerate the dataset with this version")
    for key, kind in (("family", str), ("spec", dict), ("units", dict)):
        if not isinstance(meta.get(key, {} if key == "units" else None), kind):
            raise SchemaError(f"{path}: field {key!r} must be a JSON {kind.__name__}, got {meta.get(key)!r}; "
                              f"{advice}")
    for key, unit in meta.get("units", {}).items():
        if not isinstance(unit, dict):
            raise SchemaError(f"{path}: units[{key!r}] must be an object, got {unit!r}; {advice}")
        for field, kind in _UNIT_FIELDS.items():
            value = unit.get(field)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise SchemaError(f"{path}: units[{key!r}].{field} must be a JSON {kind.__name__}, got {value!r}; "
                                  f"{advice}")
        if not all(isinstance(f, str) for f in unit["files"]):
            raise SchemaError(f"{path}: units[{key!r}].files must list file paths; {advice}")
    return meta


def settings_differences(old: dict[str, Any], new: dict[str, Any], where: str = "") -> list[str]:
    """Readable differences between two dataset descriptions, most specific key first, e.g.
    ``"--learning-rate (source.config.learning_rate): dataset 0.0001, this command 0.001"``. A setting recorded under
    an option's deprecated name compares with its current name (:func:`ad.config.upgrade_recorded`)."""
    old = upgrade_recorded(old, new)
    out: list[str] = []
    for key in sorted(set(old) | set(new), key=str):
        path = f"{where}.{key}" if where else str(key)
        a, b = old.get(key, "<absent>"), new.get(key, "<absent>")
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(settings_differences(a, b, path))
            continue
        name = f"--{str(key).replace('_', '-')} ({path})" if ".config." in f".{path}" else path
        out.append(f"{name}: dataset {_short(a)}, this command {_short(b)}")
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
