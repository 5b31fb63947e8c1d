"""What users see in reports: which episodes a figure covers, the figure a family's docs quote, whether AD trails
its own source, in-context bands that stay within the possible returns, and generator progress lines."""
from __future__ import annotations

import numpy as np
import pytest

from ad.evaluate import EvalResult, summarise


def _row(curve, optimum=10.0):
    """An eval.json policy row of a return / optimum ``curve`` (one task, one seed)."""
    returns = np.asarray(curve, dtype=np.float64)[None, None] * optimum
    result = EvalResult("x", ["t"], returns, np.array([optimum]))
    mean, std = result.curve()
    return {**summarise(result), "mean": mean.tolist(), "std": std.tolist(),
            "normalised": result.normalised_curve().tolist()}


def _summary(policies, episodes=100):
    return {"tasks": ["t"], "episodes": episodes, "seeds": 1, "greedy": False, "optimal_mean_return": 10.0,
            "policies": policies}


def _report(tmp_path, summary, windows=((36, 40),)) -> str:
    from ad.demo.report import in_context_lines, write_report

    return write_report(tmp_path / "report.md", "Algorithm Distillation on DarkRoom", in_context_lines(summary, windows),
                        {}, {"total": 1.0}, {}).read_text()


def test_the_report_says_which_episodes_are_the_last_10(tmp_path):
    ad = _row(np.linspace(0.2, 1.0, 100))
    source = _row(np.linspace(0.5, 1.0, 60))  # a source that converged in 60 episodes
    text = _report(tmp_path, _summary({"AD": ad, "source": source}))
    assert "last 10 episodes (91-100)" in text
    source_line = next(line for line in text.splitlines() if line.startswith("| source |"))
    assert "(episodes 51-60)" in source_line
    assert source["last_episodes"] == [51, 60] and ad["last_episodes"] == [91, 100]


def test_eval_json_names_the_36_40_window_and_old_files_still_read(tmp_path):
    from ad.evaluate import episodes_36_40

    row = _row(np.linspace(0.0, 1.0, 50))
    assert "episodes_36_40_normalised" in row and "episode_40_normalised" not in row
    assert row["episodes_36_40_normalised"] == pytest.approx(np.mean(np.linspace(0.0, 1.0, 50)[35:40]))
    old = {k: v for k, v in row.items() if k not in ("episodes_36_40_normalised", "normalised")}
    old["episode_40_normalised"] = 0.625  # an eval.json written before the key was renamed
    assert episodes_36_40(old) == 0.625
    text = _report(tmp_path, _summary({"AD": old}, episodes=50))
    assert "| 0.625 |" in text


def test_the_keydoor_report_shows_episodes_46_50(tmp_path):
    from tasks.keydoor.demo import KeyDoorDemoConfig

    curve = np.linspace(0.0, 1.0, 50)
    text = _report(tmp_path, _summary({"AD": _row(curve)}, episodes=50), windows=KeyDoorDemoConfig.REPORT_WINDOWS)
    header = next(line for line in text.splitlines() if line.startswith("| policy |"))
    assert "| episodes 46-50 |" in header
    ad_line = next(line for line in text.splitlines() if line.startswith("| AD |"))
    assert f"{np.mean(curve[45:50]):.3f}" in ad_line


def test_the_report_says_when_ad_trails_its_own_source(tmp_path):
    ad = _row(np.clip(np.arange(1, 41) / 17, 0, 1))  # 0.9 first at episode 16
    source = _row(np.clip(np.arange(1, 41) / 7.5, 0, 1))  # 0.9 first at episode 7
    text = _report(tmp_path, _summary({"AD": ad, "source": source}, episodes=40))
    assert "AD reaches 90% of the optimal return at episode 16, its source at episode 7" in text
    assert "trails its own source" in text
    text = _report(tmp_path, _summary({"AD": source, "source": ad}, episodes=40))
    assert "at episode 7, its source at episode 16" in text and "trails" not in text


def test_the_bandit_report_says_when_ad_trails_its_source(tmp_path):
    from ad.demo.report import write_report
    from tasks.bandit.demo import regret_lines

    row = lambda regret: {"final_regret": regret, "final_regret_se": 0.1}  # noqa: E731
    summary = {"instances": 4, "runs_per_instance": 2, "pulls": 100, "source_policy": "UCB1 c=0.3",
               "policies": {"AD": row(13.1), "UCB1 c=0.3": row(10.0), "Thompson": row(9.0)},
               "ratio_to_thompson": {"AD": 1.46, "UCB1 c=0.3": 1.11, "Thompson": 1.0}, "timings": {}, "settings": {}}
    text = write_report(tmp_path / "report.md", "bandits", regret_lines(summary), {}, {}, {}).read_text()
    assert "AD's regret is 1.31x its source's (UCB1 c=0.3: 10.00)" in text and "trails its own source" in text


def test_in_context_bands_stay_within_the_possible_returns():
    from ad.plots import band

    mean = np.array([0.2, 5.0, 9.9])
    low, high = band(mean, np.array([3.0, 1.0, 2.0]), optimum=10.0)
    assert low.min() >= 0.0 and high.max() <= 10.0
    assert np.allclose(low, [0.0, 4.0, 7.9]) and np.allclose(high, [3.2, 6.0, 10.0])


def test_eval_plots_a_standard_error_band_not_the_spread():
    result = EvalResult("AD", ["a", "b"], np.array([[[0.0, 10.0]] * 4, [[10.0, 10.0]] * 4]), np.array([10.0, 10.0]))
    flat = result.returns.reshape(-1, 2)
    assert np.allclose(result.standard_error(), flat.std(0, ddof=1) / np.sqrt(8))
    assert result.standard_error()[0] < result.curve()[1][0]


def test_keydoor_progress_calls_its_tasks_pairs():
    from tasks.keydoor.generate import KEYDOOR

    assert KEYDOOR.noun == "key/door pairs"


def test_progress_lines_do_not_repeat_an_old_mean_return():
    import io

    from ad.progress import Progress

    bar = Progress(100, "A2C", unit="update", every=0.0)  # a line at every update
    bar.bar.file = buffer = io.StringIO()
    bar.update(0, env_steps_per_s="1,000", mean_return=0.5)
    for _ in range(5):
        bar.update(1)
    printed = [line for line in buffer.getvalue().splitlines() if line.strip()]
    assert sum("mean_return 0.5" in line for line in printed) == 1, printed
    assert len(printed) == 5