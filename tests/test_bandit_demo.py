"""The bandit demo (generate -> train AD and ED -> regret on held-out instances) on tiny settings, and `ad eval` on a
bandit dataset (the registered eval env)."""
import contextlib
import importlib
import io
import json

import numpy as np
import pytest
import yaml

importlib.import_module("tasks.bandit")  # registers `ad generate bandit` and the bandit eval env

from ad import cli  # noqa: E402
from tasks.bandit.demo import POLICIES, run_demo  # noqa: E402

TINY = dict(instances=24, pulls=20, ad_steps=3, ed_steps=3, batch_size=2, heldout_fraction=0.25, eval_envs=2,
            train_overrides={"n_embd": 16, "n_head": 2, "n_ff": 32, "warmup_steps": 1, "progress": False})


@pytest.fixture(scope="module")
def tiny_demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("bandit-demo")
    with contextlib.redirect_stdout(io.StringIO()):
        summary = run_demo(out, seed=3, **TINY)
    return out, summary


def test_demo_writes_the_regret_of_every_policy(tiny_demo):
    out, summary = tiny_demo
    for name in ("report.md", "regret.json", "regret.png", "ad/model/config.json", "ed/model/config.json",
                 "data/dataset.json"):
        assert (out / name).stat().st_size > 100, name
    assert json.loads((out / "regret.json").read_text())["ratio_to_thompson"] == summary["ratio_to_thompson"]
    assert summary["instances"] == 6 and summary["runs_per_instance"] == 2 and summary["pulls"] == 20
    assert list(summary["policies"]) == ["AD", "ED", "Thompson", "UCB1", "UCB1 c=0.3", "random"]  # + the source
    assert set(POLICIES) < set(summary["policies"])
    for row in summary["policies"].values():
        mean = np.asarray(row["mean"])
        assert mean.shape == (20,) and np.all(np.diff(mean) >= -1e-12) and row["final_regret"] == mean[-1]
    assert summary["ratio_to_thompson"]["Thompson"] == 1.0
    ed_cfg = yaml.safe_load((out / "ed" / "config.yaml").read_text())
    ad_cfg = yaml.safe_load((out / "ad" / "config.yaml").read_text())
    assert ed_cfg["expert_only"] and ed_cfg["context"] == 2 and ad_cfg["context"] == 20 and not ad_cfg["expert_only"]
    assert ad_cfg["num_states"] == 11 and ad_cfg["reward_kind"] == "discrete"


def test_a_second_temperature_reuses_the_models_and_keeps_the_first_results(tiny_demo):
    out, summary = tiny_demo
    first = (out / "regret.json").read_bytes()
    with contextlib.redirect_stdout(io.StringIO()):
        tempered = run_demo(out, seed=3, temperature=0.25, **TINY)
    assert (out / "regret.json").read_bytes() == first  # the temperature-1 results are kept
    folder = out / "eval-temperature-0.25"
    assert json.loads((folder / "regret.json").read_text()) == tempered and tempered["temperature"] == 0.25
    assert "pulls sampled at temperature 0.25" in (folder / "report.md").read_text()
    assert json.loads((folder / "timings.json").read_text())["seconds"]["train AD"] == 0.0  # models reused
    # the same instances and noise: Thompson sampling's regret is the same, the trained models' is not
    assert tempered["policies"]["Thompson"]["final_regret"] == summary["policies"]["Thompson"]["final_regret"]
    assert tempered["policies"]["AD"]["mean"] != summary["policies"]["AD"]["mean"]
    assert "| AD |" in (out / "report.md").read_text()


def test_demo_rerun_skips_finished_stages(tiny_demo):
    out, first = tiny_demo
    with contextlib.redirect_stdout(io.StringIO()) as log:
        again = run_demo(out, seed=3, **TINY)
    assert "skipping training" in log.getvalue() and "already in" in log.getvalue()
    assert again["timings"]["train AD"] == 0.0
    assert again["policies"]["AD"]["final_regret"] == pytest.approx(first["policies"]["AD"]["final_regret"])


def test_ad_eval_runs_on_a_bandit_dataset(tiny_demo, tmp_path):
    out, _ = tiny_demo
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exit_info:
        cli.main(["eval", "--ckpt", str(out / "ad"), "--data", str(out / "data"), "--baseline", str(out / "ed"),
                  "--episodes", "20", "--seeds", "2", "--progress", "false", "--out", str(tmp_path / "eval")])
    assert exit_info.value.code == 0
    summary = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert set(summary["policies"]) == {"AD", "ED", "random", "source"}
    assert np.asarray(summary["policies"]["AD"]["returns"]).shape == (6, 2, 20)  # one pull = one episode


def test_demo_refuses_bad_options(tmp_path):
    from ad.errors import UserError

    with pytest.raises(UserError, match="--heldout-fraction"):
        run_demo(tmp_path / "x", heldout_fraction=0.0)
    with pytest.raises(UserError, match="--context"):
        run_demo(tmp_path / "x", context=600, pulls=500)
    with pytest.raises(UserError, match="--ucb-c"):
        run_demo(tmp_path / "x", ucb_c=float("inf"))
    assert not (tmp_path / "x").exists()


def test_gaussian_demo_trains_on_continuous_rewards_and_vector_observations(tmp_path):
    with contextlib.redirect_stdout(io.StringIO()):
        summary = run_demo(tmp_path / "g", seed=0, kind="gaussian", arms=10, **TINY)
    ad_cfg = yaml.safe_load((tmp_path / "g" / "ad" / "config.yaml").read_text())
    assert ad_cfg["reward_kind"] == "continuous" and ad_cfg["state_dim"] == 20 and ad_cfg["num_actions"] == 10
    assert np.isfinite(summary["policies"]["AD"]["final_regret"])
    # auto source: UCB1 with c = 0.5 on Gaussian bandits, shown beside the textbook UCB1
    assert summary["settings"]["source"] == "ucb" and summary["settings"]["ucb_c"] == 0.5
    metadata = json.loads((tmp_path / "g" / "data" / "dataset.json").read_text())
    assert metadata["source"]["algorithm"] == "ucb" and metadata["source"]["config"]["ucb_c"] == 0.5
    assert list(summary["policies"]) == ["AD", "ED", "Thompson", "UCB1", "UCB1 c=0.5", "random"]


def test_demo_source_defaults_to_ucb_with_the_coefficient_of_the_reward_kind():
    from ad.config import make_config
    from tasks.bandit.demo import BanditDemoConfig

    bernoulli, gaussian = make_config(BanditDemoConfig, {}), make_config(BanditDemoConfig, {"kind": "gaussian"})
    assert (bernoulli.source, bernoulli.ucb_c, gaussian.source, gaussian.ucb_c) == ("ucb", 0.3, "ucb", 0.5)
    assert make_config(BanditDemoConfig, {"kind": "gaussian", "source": "thompson"}).source == "thompson"
    assert make_config(BanditDemoConfig, {"ucb_c": 1.0}).ucb_c == 1.0


#: The regret table and source line of the tiny demo above as main gave them at commit fb12b6c, before the bandit
#: demo ran through the shared demo pipeline (`ad demo --task bandit --seed 3` with the TINY options).
MAIN_FB12B6C = ["| AD | 6.68 | 0.41 | 1.45 |", "| ED | 6.68 | 0.41 | 1.45 |", "| Thompson | 4.60 | 0.51 | 1.00 |",
                "| UCB1 | 5.41 | 0.33 | 1.18 |", "| UCB1 c=0.3 | 4.27 | 0.70 | 0.93 |", "| random | 6.81 | 0.55 | 1.48 |",
                "AD's regret is 1.56x its source's (UCB1 c=0.3: 4.27): AD trails its own source (more regret than the "
                "algorithm it distils)."]


def test_report_figures_are_the_ones_main_gave(tiny_demo):
    out, _ = tiny_demo
    text = (out / "report.md").read_text().split("## Time")[0]
    figures = [line for line in text.splitlines() if line.startswith(("| AD", "| ED", "| Thompson", "| UCB1",
                                                                       "| random", "AD's regret"))]
    assert figures == MAIN_FB12B6C
