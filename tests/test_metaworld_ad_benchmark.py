"""benchmarks/metaworld_ad.py: --init-from, AD trained on from another finished run of the benchmark."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import metaworld_ad  # noqa: E402


def test_start_from_names_the_base_run_s_ad_and_copies_its_histories(tmp_path):
    base, out = tmp_path / "base" / "seed1", tmp_path / "work" / "seed1"
    (base / "ad" / "model").mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):  # only looked for: the trainer loads them
        (base / "ad" / "model" / name).write_text("")
    (base / "metaworld").mkdir()
    (base / "metaworld" / "dataset.json").write_text("{}")
    options = metaworld_ad.start_from({"seed": 1, "ad_steps": 5}, base, out)
    assert options == {"seed": 1, "ad_steps": 5, "ad_init_from": str(base / "ad")}
    assert (out / "metaworld" / "dataset.json").read_text() == "{}"
    (base / "metaworld" / "dataset.json").write_text("changed")  # a folder of its own: only copied where missing
    metaworld_ad.start_from({"seed": 1}, base, out)
    assert (out / "metaworld" / "dataset.json").read_text() == "{}"


def test_an_init_from_without_a_trained_ad_is_one_error_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["metaworld_ad.py", "--init-from", "nowhere", "--seeds", "0"])
    with pytest.raises(SystemExit) as exit_info:
        metaworld_ad.main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --init-from") and "nowhere/seed0/ad:" in err[0]
    assert "no trained model there" in err[0]
    assert not (tmp_path / "data").exists()  # nothing written


def test_a_run_of_one_seed_keeps_the_other_seeds_figures_with_their_own_command(tmp_path, monkeypatch):
    import json

    from benchmarks import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    old = [{"family": "reach-v3-search-x", "settings": {"seed": 0}, "command": "python a --seeds 0", "date": "d0"},
           {"family": "reach-v3-search-x", "settings": {"seed": 1}, "command": "python a --seeds 1", "date": "d1"},
           {"family": "reach-v3-search-y", "settings": {"seed": 0}, "command": "python b", "date": "d2"}]
    (tmp_path / "metaworld_ad.json").write_text(json.dumps(old))
    kept = common.earlier_seed_figures("metaworld_ad", False, "reach-v3-search-x", [1])
    assert [f["settings"]["seed"] for f in kept] == [0]  # seed 1 is being run again; the other family is not ours
    assert kept[0]["measured_with"] == {"command": "python a --seeds 0", "date": "d0"}
    assert common.earlier_seed_figures("metaworld_ad", True, "reach-v3-search-x", [1]) == []  # no quick file
    misses = [{"family": "v", "seed": 0, "command": "c0", "date": "d0"}, {"family": "v", "seed": 1}]
    (tmp_path / "metaworld_misses.json").write_text(json.dumps(misses))
    kept = common.earlier_seed_figures("metaworld_misses", False, "v", [0])
    assert [f["seed"] for f in kept] == [1] and kept[0]["measured_with"] == {"command": None, "date": None}


def test_the_goal_is_a_rate_held_over_the_last_episodes_not_one_touched_once():
    import numpy as np

    ed = np.full(10, 0.2)
    touched_once = np.array([0.4, 0.6, 0.7, 0.8, 0.8, 0.9, 0.92, 0.84, 0.86, 0.85])
    assert not metaworld_ad.goal_met(touched_once, ed, last=3)
    held = np.array([0.4, 0.6, 0.7, 0.8, 0.8, 0.9, 0.88, 0.9, 0.92, 0.9])
    assert metaworld_ad.goal_met(held, ed, last=3)
    assert not metaworld_ad.goal_met(held, np.full(10, 0.95), last=3)  # ED above AD
    assert metaworld_ad.goal_text(10, 3) == ">= 0.9 over in-context episodes 8-10, ED below AD"


def test_plot_names_the_setting(tmp_path, monkeypatch):
    """The in-context plot is headed by its setting (source and variant); the default setting has no heading."""
    import ad.plots

    written = {}
    real_save = ad.plots.save_figure

    def keep_title(fig, path, *args, **kwargs):
        written[Path(path).name] = fig.get_suptitle()
        return real_save(fig, path, *args, **kwargs)

    monkeypatch.setattr(ad.plots, "save_figure", keep_title)
    curve = {"AD": [0.2, 0.5, 0.9], "ED": [0.1, 0.1, 0.2], "source (search)": [0.3, 0.8, 1.0]}
    curves = {0: curve, 1: curve}
    metaworld_ad.plot(curves, "reach-v3", "search source, mean-72k", tmp_path / "named.png")
    metaworld_ad.plot(curves, "reach-v3", "", tmp_path / "default.png")
    assert written == {"named.png": "search source, mean-72k", "default.png": ""}
    assert (tmp_path / "named.png").stat().st_size > 0 and (tmp_path / "default.png").stat().st_size > 0
