"""Where the dense copy of a packaged model is cached: the user cache, as Hugging Face does (never the repository
or the folder above it)."""
from __future__ import annotations

from ad.pretrained import models_dir


def test_models_dir_follows_the_user_cache_convention(monkeypatch, tmp_path):
    monkeypatch.delenv("AD_MODELS_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert models_dir() == tmp_path / "home" / ".cache" / "algorithm-distillation" / "models"

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models_dir() == tmp_path / "xdg" / "algorithm-distillation" / "models"

    monkeypatch.setenv("AD_MODELS_DIR", str(tmp_path / "mine"))  # the override wins
    assert models_dir() == tmp_path / "mine"

    monkeypatch.setenv("AD_MODELS_DIR", "")  # empty means unset
    assert models_dir() == tmp_path / "xdg" / "algorithm-distillation" / "models"

