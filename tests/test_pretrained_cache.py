"""Where the dense copy of a packaged model is cached: the user cache, as Hugging Face does (never the repository
or the folder above it)."""
from __future__ import annotations

import pytest

from ad.lm.pretrained import models_dir


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



def test_publish_folder_renames_and_yields_to_a_folder_published_first(tmp_path):
    from ad.lm.pretrained import publish_folder

    def written(name):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "model.safetensors").write_text(name)
        return folder

    target = tmp_path / "model"
    assert publish_folder(written("a.tmp-1"), target) == target
    assert (target / "model.safetensors").read_text() == "a.tmp-1"
    # a second process converted at the same time: its rename meets a complete folder, keeps it, drops its own copy
    assert publish_folder(written("a.tmp-2"), target) == target
    assert (target / "model.safetensors").read_text() == "a.tmp-1" and not (tmp_path / "a.tmp-2").exists()
    # a target that exists but is not complete is not silently accepted
    broken = tmp_path / "broken"
    (broken / "junk").mkdir(parents=True)
    with pytest.raises(OSError):
        publish_folder(written("b.tmp-3"), broken)
