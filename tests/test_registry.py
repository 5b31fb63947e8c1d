"""The registry loads model plugins only as far as it must: a checkpoint recognised by a family already loaded loads
no other family; otherwise the others load one at a time until one recognises it."""
from __future__ import annotations

import pytest

from ad import registry
from ad.errors import UserError


def test_load_policy_tries_loaded_families_first_then_loads_one_plugin_at_a_time(monkeypatch, tmp_path):
    def loader(name):
        return (lambda path: (path / name).exists(), lambda path, **kwargs: name.upper())

    loaded: list[str] = []

    def load_plugins(names=None, groups=()):  # imports each plugin once, which registers its loader
        for name in names:
            if name not in registry._POLICY_LOADERS:
                loaded.append(name)
                registry._POLICY_LOADERS[name] = loader(name)

    monkeypatch.setattr(registry, "_POLICY_LOADERS", {"a": loader("a")})  # family a is loaded already
    monkeypatch.setattr(registry, "plugin_modules", lambda groups=(): [("a", "pkg_a"), ("b", "pkg_b"), ("c", "pkg_c")])
    monkeypatch.setattr(registry, "load_plugins", load_plugins)
    for name, plugins in (("a", []), ("b", ["b"]), ("c", ["b", "c"])):
        (tmp_path / name).mkdir()
        assert registry.load_policy(tmp_path) == name.upper()
        (tmp_path / name).rmdir()
        assert loaded == plugins
    with pytest.raises(UserError, match="tried: a, b, c"):
        registry.load_policy(tmp_path)
