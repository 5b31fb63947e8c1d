"""The README's Python quick start runs as written: histories written and read back, a model trained, held-out
returns of the right shape (so the README cannot drift from the API)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"
#: The quick start is the ```python block right after this marker line.
MARKER = "<!-- quickstart -->"


def quickstart_code() -> str:
    """The source of the README's quick-start block (exactly one)."""
    blocks = re.findall(re.escape(MARKER) + r"\n```python\n(.*?)\n```", README.read_text(), flags=re.S)
    assert len(blocks) == 1, f"README.md must hold exactly one ```python block right after {MARKER}"
    return blocks[0]


def test_readme_quickstart_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme_quickstart"}
    exec(compile(quickstart_code(), str(README) + ":quickstart", "exec"), namespace)
    printed = capsys.readouterr().out

    cfg, reader, result = namespace["cfg"], namespace["reader"], namespace["result"]
    heldout = reader.metadata["split"]["heldout"]
    assert len(reader.tasks()) == cfg.instances and len(heldout) == 10
    assert reader.num_transitions() == cfg.instances * cfg.pulls
    assert (tmp_path / "runs" / "quickstart" / "model" / "config.json").is_file()
    assert result.tasks == heldout
    assert result.returns.shape == (10, 2, 100)  # (held-out tasks, seeds, episodes = pulls)
    assert np.isin(result.returns, (0.0, 1.0)).all()  # Bernoulli rewards, one pull an episode
    assert 0.0 < result.normalised_curve().mean() <= 1.0 + 1e-9
    assert f"{cfg.instances} bandits" in printed and "(10, 2, 100)" in printed
