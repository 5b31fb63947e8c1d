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


def test_finding_the_default_family_loads_only_the_family_named_first():
    """``ad demo`` without --task finds DarkRoom (the ``ad.default_family`` entry point) without importing the
    task plugins listed before it (bandit sorts first)."""
    import subprocess
    import sys
    code = ("import sys; from ad import registry; print(registry.default_family()); "
            "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('tasks.')}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    others = {name for name, _ in registry.plugin_modules((registry.ENTRY_POINT_GROUP,))} - {"darkroom"}
    assert out[0] == "darkroom" and "bandit" in others and not others & set(eval(out[1])), out
