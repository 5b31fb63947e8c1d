"""Whether an option changes the data is declared on the option (``option(..., runtime=True)``): runtime options stay
out of a dataset's recorded settings and a resume may change them; any other change is refused."""
from __future__ import annotations

import dataclasses

import pytest

from ad import cli
from ad.config import data_options, option, override, runtime_fields
from models.rl.config import RESUMABLE_CHANGES, TrainRLConfig
from tasks.bandit.config import GenerateConfig as BanditConfig
from tasks.keydoor.config import GenerateConfig as KeyDoorConfig


def test_runtime_options_are_left_out_of_the_recorded_settings():
    recorded = data_options(BanditConfig())
    assert "out" not in recorded and "progress" not in recorded and recorded["pulls"] == 500
    assert {"out", "threads", "plots", "tensorboard", "progress"} <= runtime_fields(KeyDoorConfig)  # via override
    assert "learning_rate" not in runtime_fields(KeyDoorConfig) and "seed" not in runtime_fields(KeyDoorConfig)
    assert RESUMABLE_CHANGES == runtime_fields(TrainRLConfig) and {"max_steps", "threads"} <= RESUMABLE_CHANGES


def test_override_keeps_the_declaration():
    @dataclasses.dataclass
    class Base:
        out: str = option("a", "where", runtime=True)

    @dataclasses.dataclass
    class Child:
        out: str = override(Base, "out", "b")

    assert runtime_fields(Child) == {"out"} and Child().out == "b"


def test_a_resume_may_change_runtime_options_only(tmp_path, capsys):
    out = str(tmp_path / "d")
    base = ["generate", "bandit", "--out", out, "--instances", "4", "--pulls", "5"]
    for argv, code in ((base, 0), (base + ["--no-progress"], 0), (base + ["--pulls", "6"], 2)):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == code
    assert "pulls" in capsys.readouterr().err
